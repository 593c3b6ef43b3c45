// Fair dice (spec/fairness.md) against a real relay rolling them (TABLERELAY_FAIR_DICE=true): the roller seed
// each roll frame carries, the verdicts, and the alarms a relay that cheats (a socket that changes what it
// delivers) raises.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import WebSocket from "ws";
import { FairDice, SeedBook, VERDICTS, decodeMsgpack, encodeMsgpack, rollKey, seedCommit } from "../tablerelay.js";
import { closeAll, connect, createRoom, fairServer, fairServerWith, next, plainServer, sleep, until } from "./helpers.mjs";

after(closeAll);

const d20 = { system: "dice", formula: "1d20+2" };
const pool = { system: "honors_edge.roll", pool: "4k2" };

/** A socket that records the frames it sends and lets its test change the frames it receives. */
function tamperingNet(tamper = () => {}) {
  const sent = [];
  const sockets = [];
  class TamperSocket extends WebSocket {
    constructor(url) {
      super(url);
      this.deaf = false;
      sockets.push(this);
    }
    send(data) {
      sent.push(decodeMsgpack(new Uint8Array(data)));
      return super.send(data);
    }
    addEventListener(type, listener, options) {
      if (type !== "message") return super.addEventListener(type, listener, options);
      return super.addEventListener(type, (event) => {
        if (this.deaf) return;
        const frame = decodeMsgpack(new Uint8Array(event.data));
        const frames = frame.t === "welcome" ? [frame, ...(frame.history ?? [])] : [frame];
        frames.forEach((f) => tamper(f));
        listener({ data: encodeMsgpack(frame) });
      }, options);
    }
  }
  return { WebSocket: TamperSocket, sent, sockets, last: () => sockets[sockets.length - 1] };
}

async function fairRoom() {
  const relay = await fairServer();
  return { relay, room: createRoom(undefined, relay) };
}

const join = (relay, token, options = {}) => connect(token, { urlList: relay.url, ...options });
const verdictOf = (client, seq) => client.event(seq)?.verdict;
const alarms = (client) => {
  const list = [];
  client.on("alarm", (alarm) => list.push(alarm));
  return list;
};

describe("the derivation", () => {
  test("key, seed commitment and dice (rejections included) equal the Python relay's for the same inputs", async () => {
    // relay.core.fairness and rules.rng.KeyedDice, run once by hand on these inputs.
    const seed = Uint8Array.from({ length: 32 }, (_, i) => i);
    const transcript = {
      room: "room-ü1",
      n: 3,
      roller: "player-ab",
      visibility: "public",
      intent: { system: "dice", formula: "2d6+1d20", dialect: "foundry" },
      label: "Sneak ✓",
      seed: Uint8Array.from({ length: 16 }, (_, i) => 100 + i),
      pending: null,
      nonce: null,
      witnesses: [],
    };
    const key = await rollKey(seed, transcript);
    assert.equal(Buffer.from(key).toString("hex"), "358e466c8c927e198d7b88218d698deece8c85ad377643204bae4353b6a28c99");
    assert.equal(await seedCommit("room-ü1", 3, seed), "3ac0515e84fb07c4dc96e727dbc12d632ae1637fdcd84cbd6214790b2fe13f2a");
    const big = 2n ** 63n + 1n; // about half of all words are rejected for this die
    const faces = [6, 20, 100, 2, 1, big, 2n ** 64n, 2 ** 32 - 5, 12, big, big, big];
    const dice = new FairDice(key);
    for (const f of faces) await dice.roll(f);
    assert.deepEqual(
      dice.draws.map(([, value]) => BigInt(value)),
      [6n, 19n, 70n, 1n, 1n, 1472742903146881415n, 9973845948776748903n, 7367364n, 6n, 6285910016835570265n, 3146385783861262581n, 6685309745003558112n],
    );
  });
});

describe("the seed book", () => {
  test("a history replayed after a fresh welcome judges its rolls again without false alarms", async () => {
    const seed = Uint8Array.from({ length: 32 }, (_, i) => 200 - i);
    const book = new SeedBook();
    const commit = await seedCommit("r1", 1, seed);
    const roll = () => ({ seq: 3, kind: "roll", actor: { id: "p", role: "player" }, visibility: "public", label: null, intent: d20, fair: { n: 1, seed: new Uint8Array(16), pending: null, nonce: null, witnesses: [], draws: [] } });
    const replay = async () => {
      const alarmsSeen = [book.seedCommitted({ seq: 2, n: 1, commit })];
      const first = roll();
      alarmsSeen.push(await book.check("r1", first));
      const revealed = await book.seedRevealed("r1", { seq: 4, n: 1, seed });
      alarmsSeen.push(revealed.alarm);
      return { alarmsSeen, first };
    };
    const once = await replay();
    assert.deepEqual(once.alarmsSeen, [null, null, null]);
    assert.equal(once.first.verdict, "fair", once.first.verdictReason);
    const twice = await replay(); // the same events again: the same verdicts, no alarm
    assert.deepEqual(twice.alarmsSeen, [null, null, null]);
    assert.equal(twice.first.verdict, "fair");
    const other = await book.seedRevealed("r1", { seq: 9, n: 1, seed });
    assert.match(other.alarm, /revealed a second time/);
    const changed = await book.seedRevealed("r1", { seq: 11, n: 2, seed });
    assert.equal(changed.alarm, null, "no commitment known for seed 2: nothing to hold it to");
  });

  test("the next seed committed while one is open abandons it: its rolls await it for good, with no alarm", async () => {
    // What a relay writes when it imports a room without the open seed's secret (docs/fairness.md, (7)).
    const book = new SeedBook();
    const seed2 = Uint8Array.from({ length: 32 }, (_, i) => i);
    const roll = (seq, n) => ({ seq, kind: "roll", actor: { id: "p", role: "player" }, visibility: "public", label: null, intent: d20, fair: { n, seed: new Uint8Array(16), pending: null, nonce: null, witnesses: [], draws: [] } });
    assert.equal(book.seedCommitted({ seq: 1, n: 1, commit: "ab".repeat(32) }), null);
    const before = roll(2, 1);
    assert.equal(await book.check("r1", before), null);
    assert.equal(book.seedCommitted({ seq: 3, n: 2, commit: await seedCommit("r1", 2, seed2) }), null, "no alarm");
    assert.equal(before.verdict, VERDICTS.AWAITING);
    assert.match(before.verdictReason, /abandoned unrevealed when seed 2 was committed \(event 3\)/);
    const judgedAfter = roll(1, 1); // seen later (a hidden roll's reveal), made before the abandonment
    assert.equal(await book.check("r1", judgedAfter), null);
    assert.match(judgedAfter.verdictReason, /abandoned unrevealed/);
    const after = roll(4, 2);
    assert.equal(await book.check("r1", after), null);
    const { alarm, updated } = await book.seedRevealed("r1", { seq: 5, n: 2, seed: seed2 });
    assert.equal(alarm, null);
    assert.deepEqual(updated.map((r) => [r.seq, r.verdict]), [[4, VERDICTS.FAIR]]);
    assert.equal(before.verdict, VERDICTS.AWAITING, "seed 1 is never revealed");
    const late = roll(6, 1); // a relay rolling on the seed it abandoned
    assert.match(await book.check("r1", late), /it uses seed 1 after seed 2 was committed \(event 3\), abandoning it/);
    assert.equal(late.verdict, VERDICTS.FAILED);
  });
});

describe("roller seeds", () => {
  test("every roll frame carries 16 fresh bytes as its seed, and the roll carries them", async () => {
    const { relay, room } = await fairRoom();
    const net = tamperingNet();
    const player = await join(relay, room.player, { name: "Ana", WebSocket: net.WebSocket });
    const first = await player.roll(d20);
    const second = await player.roll(d20);
    const frames = net.sent.filter((f) => f.t === "roll");
    assert.equal(frames.length, 2);
    for (const frame of frames) assert.ok(frame.seed instanceof Uint8Array && frame.seed.length === 16);
    assert.notDeepEqual(frames[0].seed, frames[1].seed);
    assert.deepEqual(first.fair.seed, frames[0].seed);
    assert.deepEqual(second.fair.seed, frames[1].seed);
  });

  test("a roll whose answer was lost is resent with the same id and the same seed: one roll", async () => {
    const { relay, room } = await fairRoom();
    const gm = await join(relay, room.gm, { name: "GM" });
    const net = tamperingNet();
    const player = await join(relay, room.player, { name: "Ana", WebSocket: net.WebSocket });
    net.last().deaf = true;
    const pending = player.roll(d20, { label: "lost answer" });
    await until(() => gm.event(gm.seq)?.label === "lost answer", 8000, "the stored roll");
    await sleep(50);
    net.last().terminate();
    const event = await pending;
    const frames = net.sent.filter((f) => f.t === "roll");
    assert.equal(frames.length, 2, "sent again after the resume");
    assert.equal(frames[0].id, frames[1].id);
    assert.deepEqual(frames[0].seed, frames[1].seed);
    assert.deepEqual(event.fair.seed, frames[0].seed);
    // Rolling the same id again by hand sends the same bytes too, and the server answers with the first roll.
    const again = await player.roll(d20, { id: frames[0].id });
    assert.equal(again.seq, event.seq);
    assert.deepEqual(net.sent.filter((f) => f.t === "roll").at(-1).seed, frames[0].seed);
  });

  test("a server without fair dice: the seed is sent, no roll gets a verdict, no alarm", async () => {
    const plain = await plainServer();
    const net = tamperingNet();
    const player = await join(plain, createRoom(undefined, plain).player, { name: "Ana", WebSocket: net.WebSocket });
    const raised = alarms(player);
    const event = await player.roll(d20);
    const [frame] = net.sent.filter((f) => f.t === "roll");
    assert.equal(frame.seed.length, 16, "the client cannot know the server's setting: it sends its seed all the same");
    assert.equal(event.fair, undefined);
    assert.equal(event.verdict, undefined);
    assert.equal("verdict" in event, false);
    assert.deepEqual(raised, []);
  });
});

describe("verdicts", () => {
  test("awaiting seed until the GM reveals it, then fair for a player's roll and unwitnessed for the GM's", async () => {
    const { relay, room } = await fairRoom();
    const gm = await join(relay, room.gm, { name: "GM" });
    // Not a witness: the GM's roll then has no outside contribution (witnessing.test.mjs has the other case).
    const player = await join(relay, room.player, { name: "Ana", witness: false });
    const watcher = await join(relay, room.spectator);
    const raised = [...[gm, player, watcher].map(alarms)];
    const mine = await player.roll(d20, { label: "mine" });
    const theirs = await gm.roll(pool, { label: "GM's" });
    assert.equal(mine.verdict, VERDICTS.AWAITING);
    assert.match(mine.verdictReason, /seed 1/);
    assert.equal(theirs.verdict, VERDICTS.AWAITING);
    await until(() => verdictOf(watcher, theirs.seq), 8000, "the watcher's rolls");
    assert.equal(verdictOf(watcher, mine.seq), VERDICTS.AWAITING);

    const updates = [];
    watcher.on("verdict", (event) => updates.push([event.seq, event.verdict]));
    const reveal = await gm.revealSeed();
    assert.equal(reveal.kind, "seed_reveal");
    assert.equal(reveal.n, 1);
    await until(() => updates.length === 2, 8000, "two verdict updates");
    assert.deepEqual(updates.sort(), [[mine.seq, "fair"], [theirs.seq, "unwitnessed"]].sort());
    for (const client of [gm, player, watcher]) {
      // Each roll is recomputed on its own (WebCrypto is asynchronous): wait for both, in either order.
      await until(() => verdictOf(client, mine.seq) === "fair", 8000, "the player's roll to turn fair");
      await until(() => verdictOf(client, theirs.seq) === "unwitnessed", 8000, "the GM's roll to turn unwitnessed");
    }
    // The next roll takes the next seed, committed with the reveal.
    const later = await player.roll(d20);
    assert.equal(later.fair.n, 2);
    assert.equal(later.verdict, VERDICTS.AWAITING);
    // A client that joins now judges the history it is given the same way.
    const late = await join(relay, room.spectator);
    assert.equal(verdictOf(late, mine.seq), "fair");
    assert.equal(verdictOf(late, theirs.seq), "unwitnessed");
    assert.equal(verdictOf(late, later.seq), VERDICTS.AWAITING);
    assert.deepEqual(raised.flat(), []);
  });

  test("a client that joins after a seed's commitment left the history judges its rolls with the welcome's seeds", async () => {
    const relay = await fairServerWith({ TABLERELAY_HISTORY: "6" });
    const room = createRoom(undefined, relay);
    const gm = await join(relay, room.gm, { name: "GM" });
    const player = await join(relay, room.player, { name: "Ana" });
    const mine = await player.roll(d20);
    await gm.resource("fear", "gain", 1);
    await gm.resource("fear", "gain", 1);
    await gm.revealSeed();
    await until(() => verdictOf(player, mine.seq) === "fair", 8000, "the verdict of a client that saw it all");
    const late = await join(relay, room.spectator);
    const history = [...Array(late.seq).keys()].map((i) => late.event(i + 1)).filter(Boolean);
    assert.ok(history.some((e) => e.seq === mine.seq), "the roll is in the late client's history");
    assert.ok(!history.some((e) => e.kind === "seed_commit" && e.n === 1), "its seed's commitment is not");
    assert.equal(verdictOf(late, mine.seq), "fair", late.event(mine.seq).verdictReason);
  });

  test("a blind roll is sealed for those who cannot see it, and judged at its reveal", async () => {
    const { relay, room } = await fairRoom();
    const gm = await join(relay, room.gm, { name: "GM" });
    const player = await join(relay, room.player, { name: "Ana" });
    const raised = alarms(player);
    const placeholder = await player.roll(d20, { visibility: "blind", label: "hidden" });
    assert.equal(placeholder.sealed, true);
    assert.equal(placeholder.verdict, VERDICTS.SEALED);
    await until(() => verdictOf(gm, placeholder.seq), 8000, "the GM's copy");
    assert.equal(verdictOf(gm, placeholder.seq), VERDICTS.AWAITING);
    const opened = next(player, "reveal");
    await gm.reveal(placeholder.seq);
    assert.equal((await opened).roll.verdict, VERDICTS.AWAITING);
    await gm.revealSeed();
    await until(() => verdictOf(player, placeholder.seq) === "fair", 8000, "the sealed roll to turn fair");
    assert.deepEqual(raised, [], "the player's own seed is in the revealed roll");
  });
});

describe("alarms", () => {
  test("a changed draw fails its roll once the seed is revealed, with an alarm", async () => {
    const { relay, room } = await fairRoom();
    const gm = await join(relay, room.gm, { name: "GM" });
    const net = tamperingNet((frame) => {
      if (frame.kind === "roll" && frame.label === "tampered") {
        const [faces, value] = frame.fair.draws[0];
        frame.fair.draws[0] = [faces, (value % faces) + 1];
      }
    });
    const watcher = await join(relay, room.spectator, { WebSocket: net.WebSocket });
    const raised = alarms(watcher);
    const event = await gm.roll(d20, { label: "tampered" });
    await until(() => verdictOf(watcher, event.seq), 8000, "the roll");
    assert.equal(verdictOf(watcher, event.seq), VERDICTS.AWAITING);
    await gm.revealSeed();
    await until(() => verdictOf(watcher, event.seq) === "failed", 8000, "the failure");
    assert.match(watcher.event(event.seq).verdictReason, /draw 1 is \d+ on a d20; the seed and transcript give \d+/);
    assert.equal(raised.length, 1);
    assert.equal(raised[0].seq, event.seq);
    assert.equal(gm.event(event.seq).verdict, "unwitnessed", "the untouched stream checks out");
  });

  test("a seed reveal that does not match its commitment raises an alarm and fails the seed's rolls", async () => {
    const { relay, room } = await fairRoom();
    const gm = await join(relay, room.gm, { name: "GM" });
    const net = tamperingNet((frame) => {
      if (frame.kind === "seed_reveal") frame.seed = Uint8Array.from(frame.seed, (b, i) => (i === 0 ? b ^ 1 : b));
    });
    const player = await join(relay, room.player, { name: "Ana", WebSocket: net.WebSocket });
    const raised = alarms(player);
    const event = await player.roll(d20);
    await gm.revealSeed();
    await until(() => verdictOf(player, event.seq) === "failed", 8000, "the failure");
    assert.match(player.event(event.seq).verdictReason, /does not match its commitment/);
    assert.ok(raised.some((a) => /seed 1 does not match what it committed to/.test(a.message)), JSON.stringify(raised.map((a) => a.message)));
    assert.ok(raised.some((a) => a.seq === event.seq));
  });

  test("a roll that uses a seed after its reveal fails at once, with an alarm", async () => {
    const { relay, room } = await fairRoom();
    const gm = await join(relay, room.gm, { name: "GM" });
    const net = tamperingNet((frame) => {
      if (frame.kind === "roll" && frame.label === "stale seed") frame.fair.n = 1;
    });
    const watcher = await join(relay, room.spectator, { WebSocket: net.WebSocket });
    const raised = alarms(watcher);
    await gm.roll(d20);
    await gm.revealSeed();
    const event = await gm.roll(d20, { label: "stale seed" });
    await until(() => verdictOf(watcher, event.seq), 8000, "the roll");
    assert.equal(verdictOf(watcher, event.seq), "failed");
    assert.match(watcher.event(event.seq).verdictReason, /uses seed 1 after that seed's reveal/);
    assert.equal(raised.length, 1);
  });

  test("a roller seed left out of the roll raises the roller's alarm, whatever the seed shows later", async () => {
    const { relay, room } = await fairRoom();
    const gm = await join(relay, room.gm, { name: "GM" });
    const net = tamperingNet((frame) => {
      if (frame.kind === "roll" && frame.fair) frame.fair.seed = null;
    });
    const player = await join(relay, room.player, { name: "Ana", WebSocket: net.WebSocket });
    const raised = alarms(player);
    const event = await player.roll(d20);
    assert.equal(event.verdict, "failed");
    assert.match(event.verdictReason, /roller seed this client sent was left out/);
    assert.equal(raised.length, 1);
    await gm.revealSeed();
    await sleep(300);
    assert.equal(player.event(event.seq).verdict, "failed");
  });
});
