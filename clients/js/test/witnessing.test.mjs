// Witnessing (spec/fairness.md): the client offers to witness in its hello, answers every pending event that
// asks it with 16 fresh CSPRNG bytes, and raises an alarm when the relay cheats. The relays are the real
// server started through tests/fairness/cheating_relay.py, each with one cheat patched in ("drop", "replace",
// "reroll", "unasked", "withhold"), and its "honest" build for the control: every scenario that raises an
// alarm against a cheat is also run against the honest one, where it must raise none.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import WebSocket from "ws";
import { decodeMsgpack, encodeMsgpack } from "../tablerelay.js";
import { CHEAT_WITNESS_WAIT_MS, cheatingServer, closeAll, connect, createRoom, fairServerWith, next, until } from "./helpers.mjs";

after(closeAll);

const d20 = { system: "dice", formula: "1d20+2" };
const MARGIN_MS = 500; // the client's margin past the relay's witness wait before a missing roll is an alarm

/** A real socket that records the frames its client sends, and that its test can make deaf (`deaf = true`). */
function recordingNet() {
  const sent = [];
  const sockets = [];
  class RecordingSocket extends WebSocket {
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
        if (!this.deaf) listener(event);
      }, options);
    }
  }
  return { WebSocket: RecordingSocket, sent, sockets, last: () => sockets[sockets.length - 1] };
}

/** A real socket that lets its test change the frames its client receives (a relay lying to one client). */
function tamperingNet(tamper) {
  class TamperSocket extends WebSocket {
    addEventListener(type, listener, options) {
      if (type !== "message") return super.addEventListener(type, listener, options);
      return super.addEventListener(type, (event) => {
        const frame = decodeMsgpack(new Uint8Array(event.data));
        for (const one of frame.t === "welcome" ? [frame, ...(frame.history ?? [])] : [frame]) tamper(one);
        listener({ data: encodeMsgpack(frame) });
      }, options);
    }
  }
  return { WebSocket: TamperSocket };
}

/**
 * A table on the relay with `cheat`: a GM, the players named (each on a recording socket), a spectator, and
 * every alarm each of them raises.
 */
async function table(cheat, players = ["Ana"], on = null) {
  const relay = await (on ?? cheatingServer(cheat));
  const room = createRoom(undefined, relay);
  const options = { urlList: relay.url, witnessMarginMs: MARGIN_MS };
  const gm = await connect(room.gm, { name: "GM", ...options });
  const seats = [];
  for (const name of players) {
    const net = recordingNet();
    const client = await connect(room.player, { name, WebSocket: net.WebSocket, ...options });
    seats.push(Object.assign(client, { net }));
  }
  const watcher = await connect(room.spectator, options);
  const raised = new Map();
  for (const client of [gm, ...seats, watcher]) {
    const list = [];
    client.on("alarm", (alarm) => list.push(alarm.message));
    raised.set(client, list);
  }
  return { relay, room, gm, players: seats, ana: seats[0], watcher, raised, everyone: () => [...raised.values()].flat() };
}

const witnessFrames = (client) => client.net.sent.filter((frame) => frame.t === "witness");

/** A roll as `client` holds it, once it has arrived. */
const held = (client, seq) => until(() => client.event(seq), 8000, `roll ${seq} at ${client.you?.name}`);

describe("answering witness requests", () => {
  test("the hello offers; the pending asks the player; 16 fresh bytes go once and the GM's roll carries them", async () => {
    const t = await table("honest");
    const hello = t.ana.net.sent.find((frame) => frame.t === "hello");
    assert.equal(hello.witness, true);
    const announced = next(t.ana, "event", (event) => event.kind === "pending");
    const roll = await t.gm.roll(d20, { label: "GM's roll" });
    const pending = await announced;
    assert.deepEqual(pending.asked, [t.ana.you.id]);
    assert.equal(roll.fair.pending, pending.seq);
    const frames = witnessFrames(t.ana);
    assert.equal(frames.length, 1);
    assert.equal(frames[0].pending, pending.seq);
    assert.ok(frames[0].value instanceof Uint8Array && frames[0].value.length === 16);
    assert.deepEqual(roll.fair.witnesses, [[t.ana.you.id, frames[0].value]]);
    // Once the seed is out, the GM's roll is fair for everyone: a player's bytes went into it.
    await t.gm.revealSeed();
    for (const client of [t.gm, t.ana, t.watcher]) {
      await until(() => client.event(roll.seq)?.verdict === "fair", 8000, `fair at ${client.you.name}`);
    }
    const second = await t.gm.roll(d20);
    await held(t.ana, second.seq);
    assert.equal(witnessFrames(t.ana).length, 2);
    assert.notDeepEqual(witnessFrames(t.ana)[1].value, frames[0].value, "fresh bytes for every pending");
    assert.deepEqual(t.everyone(), []);
  });

  test("witness: false offers nothing, so nothing is asked and no alarm is due", async () => {
    const relay = await cheatingServer("honest");
    const room = createRoom(undefined, relay);
    const gm = await connect(room.gm, { name: "GM", urlList: relay.url });
    const net = recordingNet();
    const ana = await connect(room.player, { name: "Ana", urlList: relay.url, WebSocket: net.WebSocket, witness: false });
    const raised = [];
    ana.on("alarm", (alarm) => raised.push(alarm));
    const roll = await gm.roll(d20);
    await held(ana, roll.seq);
    assert.equal(net.sent.find((frame) => frame.t === "hello").witness, undefined);
    assert.equal(roll.fair.pending, null);
    assert.deepEqual(raised, []);
  });

  test("two tabs of one player both answer; the first value counts and neither raises an alarm", async () => {
    const t = await table("honest");
    const net = recordingNet();
    const tab = await connect(t.ana.session, { urlList: t.relay.url, WebSocket: net.WebSocket, witnessMarginMs: MARGIN_MS });
    assert.equal(tab.you.id, t.ana.you.id);
    const raised = [];
    tab.on("alarm", (alarm) => raised.push(alarm.message));
    const roll = await t.gm.roll(d20);
    await held(t.ana, roll.seq);
    await held(tab, roll.seq);
    const sent = [witnessFrames(t.ana)[0].value, net.sent.find((frame) => frame.t === "witness").value];
    assert.equal(roll.fair.witnesses.length, 1);
    assert.ok(sent.some((value) => Buffer.from(value).equals(Buffer.from(roll.fair.witnesses[0][1]))));
    // The server's answers (an ack, and "already witnessed" for the other tab) may come after the roll.
    await until(() => t.ana._witness.pendings.get(roll.fair.pending).answer !== "sent", 8000, "tab 1's answer");
    await until(() => tab._witness.pendings.get(roll.fair.pending).answer !== "sent", 8000, "tab 2's answer");
    assert.deepEqual([...t.everyone(), ...raised], []);
  });

  test("a pending announced while the player was away is answered after the resume", async () => {
    // A wait of its own, long enough for any resume: her answer must not come after the roll is made.
    const t = await table("honest", ["Ana"], fairServerWith({ TABLERELAY_WITNESS_WAIT_MS: "30000" }));
    t.ana.net.last().deaf = true; // still connected for the server, so the pending asks her; she never sees it
    const announced = next(t.gm, "event", (event) => event.kind === "pending");
    const rolled = t.gm.roll(d20, { label: "while away" });
    await announced;
    t.ana.net.last().terminate(); // she reconnects and resumes, and the pending is in the welcome's history
    await until(() => witnessFrames(t.ana).length === 1, 8000, "the answer after the resume");
    const roll = await rolled;
    assert.deepEqual(roll.fair.witnesses.map(([id]) => id), [t.ana.you.id]);
    await held(t.ana, roll.seq);
    assert.deepEqual(t.everyone(), []);
  });
});

describe("a relay that cheats is caught by the witness's alarm", () => {
  // [cheat, Ana's alarm, the verdict everyone else gives the roll once the seed is out]
  for (const [cheat, alarm, looks] of [
    ["honest", null, "fair"],
    ["drop", /Roll \d+ failed its fairness check: the witness value this client sent for pending \d+ was left out\./, "unwitnessed"],
    ["replace", /Roll \d+ failed its fairness check: the witness value this client sent for pending \d+ was replaced/, "fair"],
  ]) {
    test(`${cheat}: a GM's public roll`, async () => {
      const t = await table(cheat);
      const roll = await t.gm.roll(d20, { label: `public ${cheat}` });
      await held(t.ana, roll.seq);
      assert.equal(witnessFrames(t.ana).length, 1);
      if (!alarm) {
        assert.deepEqual(t.everyone(), []);
        return;
      }
      assert.equal(t.raised.get(t.ana).length, 1, t.raised.get(t.ana).join("\n"));
      assert.match(t.raised.get(t.ana)[0], alarm);
      assert.equal(t.ana.event(roll.seq).verdict, "failed");
      // Nobody else can tell: the roll's own transcript is consistent, and stays so after the seed's reveal.
      await t.gm.revealSeed();
      await until(() => t.watcher.event(roll.seq)?.verdict === looks, 8000, `the watcher's verdict: ${looks}`);
      assert.deepEqual([t.raised.get(t.gm), t.raised.get(t.watcher)], [[], []]);
      assert.equal(t.ana.event(roll.seq).verdict, "failed", "still failed for the witness");
    });

    test(`${cheat}: a player's own blind roll (its sealed placeholder)`, async () => {
      const t = await table(cheat);
      const placeholder = await t.ana.roll(d20, { visibility: "blind", label: `blind ${cheat}` });
      assert.equal(placeholder.sealed, true);
      assert.equal(witnessFrames(t.ana).length, 1, "the roller of a hidden roll witnesses it too");
      if (!alarm) {
        assert.equal(placeholder.verdict, "sealed");
        assert.deepEqual(t.everyone(), []);
        return;
      }
      assert.match(t.raised.get(t.ana).join("\n"), alarm);
      assert.equal(t.ana.event(placeholder.seq).verdict, "failed");
    });
  }

  for (const cheat of ["honest", "reroll"]) {
    test(`${cheat}: a roll made with another nonce than its pending announced`, async () => {
      const t = await table(cheat);
      const roll = await t.gm.roll(d20, { label: `public ${cheat}` });
      const hidden = await t.gm.roll(d20, { visibility: "gm", label: `hidden ${cheat}` });
      await held(t.ana, hidden.seq);
      await held(t.watcher, hidden.seq);
      const revealed = [t.gm, t.ana, t.watcher].map((client) => next(client, "reveal"));
      await t.gm.reveal(hidden.seq);
      await Promise.all(revealed);
      if (cheat === "honest") {
        assert.deepEqual(t.everyone(), []);
        return;
      }
      // Everyone who saw the pending can tell: the public roll at once, the hidden one at its reveal.
      const mismatch = /do not match pending \d+'s commitment/;
      for (const client of [t.gm, t.ana, t.watcher]) {
        const messages = t.raised.get(client);
        assert.ok(messages.some((m) => m.startsWith(`Roll ${roll.seq} `) && mismatch.test(m)), messages.join("\n"));
        assert.ok(messages.some((m) => m.startsWith(`Roll ${hidden.seq} `) && mismatch.test(m)), messages.join("\n"));
      }
    });
  }

  for (const cheat of ["honest", "unasked"]) {
    test(`${cheat}: a witness-capable player left out of a GM's roll`, async () => {
      const alone = await table(cheat);
      const roll = await alone.gm.roll(d20, { label: `alone ${cheat}` });
      await held(alone.ana, roll.seq);
      const two = await table(cheat, ["Ana", "Bo"]);
      const [ana, bo] = two.players;
      const pending = next(ana, "event", (event) => event.kind === "pending");
      const witnessed = await two.gm.roll(d20, { label: `two ${cheat}` });
      await held(ana, witnessed.seq);
      if (cheat === "honest") {
        assert.equal(roll.fair.pending !== null, true);
        assert.deepEqual((await pending).asked, [ana.you.id, bo.you.id].sort());
        assert.deepEqual([...alone.everyone(), ...two.everyone()], []);
        return;
      }
      // Alone at the table: the roll was made with no pending at all.
      assert.equal(roll.fair.pending, null);
      assert.deepEqual(alone.raised.get(alone.ana), [
        `Roll ${roll.seq} failed its fairness check: it was made without asking any witness, although this client was connected and ready to witness it.`,
      ]);
      // Beside another player: the pending asked only Bo.
      assert.deepEqual((await pending).asked, [bo.you.id]);
      assert.match(two.raised.get(ana).join("\n"), /asked [0-9a-f]+ to witness the roll it announced as event \d+, but not this client/);
      assert.deepEqual(two.raised.get(bo), []);
    });
  }

  test("a roll that names a pending never received, or one already made, raises an alarm", async () => {
    const t = await table("honest");
    const pendings = [];
    let joined = null;
    const net = tamperingNet((frame) => {
      if (frame.kind === "join" && frame.member?.role === "spectator") joined = frame.seq;
      if (frame.kind === "pending") pendings.push(frame.seq);
      if (frame.kind === "roll" && frame.label === "names a join") frame.fair.pending = joined;
      if (frame.kind === "roll" && frame.label === "rolled twice") frame.fair.pending = pendings[0];
    });
    const late = await connect(t.room.spectator, { urlList: t.relay.url, WebSocket: net.WebSocket });
    const raised = [];
    late.on("alarm", (alarm) => raised.push(alarm.message));
    const first = await t.gm.roll(d20, { label: "first" });
    const named = await t.gm.roll(d20, { label: "names a join" });
    const twice = await t.gm.roll(d20, { label: "rolled twice" });
    await held(late, twice.seq);
    assert.equal(late.event(first.seq).verdict, "awaiting seed");
    // (The pendings those two rolls really named will also go overdue at this client: their rolls never came.)
    assert.deepEqual(raised.filter((message) => !/ was announced \(a pending event\) but never made/.test(message)), [
      `Roll ${named.seq} failed its fairness check: it names pending ${joined}, which this client never received as a pending event.`,
      `Roll ${twice.seq} failed its fairness check: pending ${pendings[0]} was already made as roll ${first.seq}: a second roll for one pending is a re-roll.`,
    ]);
    assert.deepEqual(t.everyone(), [], "the relay itself is honest");
  });

  test("withhold: a pending whose roll never comes raises an alarm after the wait and the margin", async () => {
    const t = await table("withhold");
    const pending = next(t.ana, "event", (event) => event.kind === "pending");
    t.gm.roll(d20, { label: "never made" }).catch(() => {}); // never answered: the roll is not made
    const announced = await pending;
    await until(() => t.raised.get(t.ana).length, CHEAT_WITNESS_WAIT_MS + MARGIN_MS + 8000, "the alarm");
    assert.match(t.raised.get(t.ana)[0], new RegExp(`^Roll ${announced.seq} was announced \\(a pending event\\) but never made`));
    // The wait is the relay's own, from its welcome's witness_wait_ms, not the default 250 ms.
    assert.match(t.raised.get(t.ana)[0], new RegExp(`within ${CHEAT_WITNESS_WAIT_MS + MARGIN_MS} ms while this client was connected`));
    await until(() => t.raised.get(t.watcher).length, 8000, "the spectator's alarm");
  });

  test("honest: a slow table raises no missing-roll alarm", async () => {
    const t = await table("honest");
    const roll = await t.gm.roll(d20);
    await held(t.ana, roll.seq);
    // Past the relay's wait and the clients' margin: no pending is left without its roll.
    await new Promise((resolve) => setTimeout(resolve, CHEAT_WITNESS_WAIT_MS + MARGIN_MS + 200));
    assert.deepEqual(t.everyone(), []);
  });
});
