// The client against a real relay: every frame type, audiences, reveals and their commitments, errors.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import WebSocket from "ws";
import { TableRelay, TableRelayError, decodeMsgpack, verifyCommitment } from "../tablerelay.js";
import { closeAll, connect, createRoom, next, record, server, socketFactory, until } from "./helpers.mjs";

after(closeAll);

const duality = { system: "daggerheart.duality", modifier: 1 };
const nexus = { system: "nexus.test", attribute_die: "d8", skill_rank: 2 };

describe("hello and welcome", () => {
  test("a welcome carries the room, who we are, a session, the epoch, seq, state and history", async () => {
    // The room the pytest wrapper made for us, when it made one.
    const token = process.env.TABLERELAY_TEST_GM ?? createRoom().gm;
    const gm = await connect(token, { name: "Mercer" });
    assert.equal(gm.status, "open");
    assert.equal(gm.you.role, "gm");
    assert.equal(typeof gm.you.id, "string");
    assert.equal(typeof gm.room.id, "string");
    assert.equal(typeof gm.session, "string");
    assert.notEqual(gm.session.length, 0);
    assert.equal(typeof gm.epoch, "string");
    assert.ok(Number.isInteger(gm.seq) && gm.seq >= 0);
    assert.equal(typeof gm.state.fear, "number");
    assert.ok(Array.isArray(gm.state.members));
  });

  test("a token the server did not sign is refused: connect() rejects with unauthorized, no retry loop", async () => {
    const statuses = [];
    const client = new TableRelay(server.url, "not.a.token", { WebSocket, minDelay: 10 });
    client.on("status", (s) => statuses.push(s));
    await assert.rejects(client.connect(), (err) => {
      assert.ok(err instanceof TableRelayError);
      assert.equal(err.code, "unauthorized");
      assert.ok(err.message.length > 0);
      return true;
    });
    assert.equal(client.status, "closed");
    assert.ok(!statuses.includes("reconnecting"), `statuses: ${statuses}`);
  });

  test("join and leave reach the others, and members follow them", async () => {
    const room = createRoom();
    const gm = await connect(room.gm, { name: "GM" });
    const joined = next(gm, "join", (e) => e.member.name === "Ana");
    const ana = await connect(room.player, { name: "Ana" });
    const join = await joined;
    assert.equal(join.member.role, "player");
    assert.equal(join.member.id, ana.you.id);
    await until(() => gm.state.members.some((m) => m.id === ana.you.id), 8000, "Ana in the GM's members");
    assert.equal(gm.state.hope[ana.you.id] ?? 0, 0);
    const left = next(gm, "leave", (e) => e.member.id === ana.you.id);
    ana.close();
    await left;
    assert.ok(!gm.state.members.some((m) => m.id === ana.you.id));
  });

  test("a stale stored session falls back to the token instead of giving up", async () => {
    const room = createRoom();
    // A session signed by some other server (as a page might have kept): refused, then the token is used.
    const forged = room.player.split(".").slice(0, 2).join(".") + ".c2lnbmF0dXJlIGZyb20gZWxzZXdoZXJl";
    const client = await connect(room.player, { name: "Cy", session: forged });
    assert.equal(client.status, "open");
    assert.equal(client.you.name, "Cy");
    assert.notEqual(client.session, forged);
  });

  test("a session token rejoins as the same participant", async () => {
    const room = createRoom();
    const first = await connect(room.player, { name: "Bo" });
    const id = first.you.id;
    first.close();
    const again = await connect(room.player, { session: first.session });
    assert.equal(again.you.id, id);
    assert.equal(again.you.name, "Bo");
  });
});

describe("requests", () => {
  test("ping resolves with the round trip", async () => {
    const gm = await connect(createRoom().gm);
    const ms = await gm.ping();
    assert.equal(typeof ms, "number");
    assert.ok(ms >= 0 && ms < 5000);
  });

  test("a public roll resolves to its event, and everyone in the room receives it once", async () => {
    const room = createRoom();
    const gm = await connect(room.gm, { name: "GM" });
    const spectator = await connect(room.spectator, { name: "Viewer" });
    const player = await connect(room.player, { name: "Ana" });
    const seenBySpectator = record(spectator);
    const seenByGm = record(gm);
    const event = await player.roll(nexus, { label: "Climb the wall" });
    assert.equal(event.kind, "roll");
    assert.equal(event.visibility, "public");
    assert.equal(event.label, "Climb the wall");
    assert.deepEqual(event.intent, nexus);
    assert.equal(event.result.system, "nexus.test");
    assert.ok(Array.isArray(event.result.dice) && event.result.dice.length >= 2);
    assert.equal(typeof event.result.total, "number");
    assert.equal(event.actor.id, player.you.id);
    assert.equal(typeof event.ts, "number");
    await until(() => seenBySpectator.some((e) => e.seq === event.seq) && seenByGm.some((e) => e.seq === event.seq));
    const copy = seenBySpectator.find((e) => e.seq === event.seq);
    assert.deepEqual(copy.result, event.result);
    assert.equal(seenBySpectator.filter((e) => e.seq === event.seq).length, 1);
    // on(kind) and on("event") both fire; the kind filter only sees its kind.
    const rolls = [];
    gm.on("roll", (e) => rolls.push(e));
    const second = await player.roll({ system: "honors_edge.roll", pool: "5k3" });
    await until(() => rolls.some((e) => e.seq === second.seq));
    assert.ok(rolls.every((e) => e.kind === "roll"));
  });

  test("formats asked for in the hello come with each roll; others get none", async () => {
    const room = createRoom();
    const vtt = await connect(room.gm, { formats: ["foundry", "roll20"] });
    const plain = await connect(room.spectator);
    const seen = record(plain);
    const event = await vtt.roll({ system: "dice", formula: "2d20kh1 + 3" }, { label: "Attack" });
    // Foundry gets ChatMessage data whose rolls are serialized Roll objects; Roll20 a roll result and a chat line.
    assert.ok(Array.isArray(event.foundry.rolls) && event.foundry.rolls.length === 1);
    assert.equal(JSON.parse(event.foundry.rolls[0]).total, event.result.total);
    assert.equal(event.roll20.rollresult.total, event.result.total);
    assert.match(event.roll20.chat, new RegExp(`\\[\\[${event.result.total}\\]\\]`));
    const copy = await until(() => seen.find((e) => e.seq === event.seq));
    assert.ok(!("foundry" in copy) && !("roll20" in copy));
  });

  test("request ids are unique per client and a given id is the roll's idempotency key", async () => {
    const room = createRoom();
    const player = await connect(room.player);
    const a = await player.roll(duality, { id: "fixed-id-1" });
    const b = await player.roll(duality, { id: "fixed-id-1" });
    assert.equal(b.seq, a.seq);
    assert.deepEqual(b.result, a.result);
    const c = await player.roll(duality);
    const d = await player.roll(duality);
    assert.notEqual(c.seq, d.seq);
  });

  test("Daggerheart effects: a duality roll moves Fear or Hope, and every client's state follows", async () => {
    const room = createRoom();
    const gm = await connect(room.gm);
    const player = await connect(room.player, { name: "Ana" });
    const resources = record(gm);
    let sawFear = false;
    let sawHope = false;
    for (let i = 0; i < 12 && !(sawFear && sawHope); i++) {
      const roll = await player.roll({ ...duality, reaction: false });
      const want = roll.result.with === "fear" ? "fear" : "hope";
      const effect = await until(() => resources.find((e) => e.kind === "resource" && e.cause === roll.seq), 8000, "the roll's effect");
      assert.equal(effect.name, want);
      if (want === "fear") {
        sawFear = true;
        assert.equal(gm.state.fear, effect.value);
      } else {
        sawHope = true;
        assert.equal(effect.participant, player.you.id);
        assert.equal(gm.state.hope[player.you.id], effect.value);
      }
    }
    assert.ok(sawFear || sawHope);
  });

  test("resource: the GM gains and spends Fear, gives Hope; a player spends only its own Hope", async () => {
    const room = createRoom();
    const gm = await connect(room.gm);
    const player = await connect(room.player, { name: "Ana" });
    const spectator = await connect(room.spectator);
    const base = gm.state.fear;
    const gained = await gm.resource("fear", "gain", 3);
    assert.equal(gained.kind, "resource");
    assert.equal(gained.name, "fear");
    assert.equal(gained.delta, Math.min(12, base + 3) - base);
    assert.equal(gained.value, Math.min(12, base + 3));
    const spent = await gm.resource("fear", "spend", 1);
    assert.equal(spent.delta, -1);
    await until(() => spectator.state.fear === spent.value, 8000, "the spectator's Fear");
    const hope = await gm.resource("hope", "gain", 2, { participant: player.you.id });
    assert.equal(hope.participant, player.you.id);
    assert.equal(hope.value, 2);
    const own = await player.resource("hope", "spend", 1, { participant: player.you.id });
    assert.equal(own.value, 1);
    await until(() => spectator.state.hope[player.you.id] === 1, 8000, "the spectator's view of Ana's Hope");
    await assert.rejects(player.resource("fear", "gain", 1), { code: "forbidden" });
    await assert.rejects(player.resource("hope", "gain", 1, { participant: player.you.id }), { code: "forbidden" });
    const set = await gm.resource("fear", "set", 0);
    assert.equal(set.value, 0);
    await assert.rejects(gm.resource("fear", "spend", 1), (err) => err.code === "insufficient" && /Fear/.test(err.message));
  });
});

describe("hidden rolls, reveals and commitments", () => {
  test("a gm roll: full to its roller and the GM, sealed with a commitment to the rest", async () => {
    const room = createRoom();
    const gm = await connect(room.gm);
    const spectator = await connect(room.spectator);
    const player = await connect(room.player, { name: "Ana" });
    const other = await connect(room.player, { name: "Bo" });
    const toSpectator = record(spectator);
    const toGm = record(gm);
    const toOther = record(other);
    const mine = await player.roll(nexus, { visibility: "gm", label: "secret door" });
    assert.equal(mine.sealed, undefined);
    assert.equal(mine.label, "secret door");
    assert.equal(typeof mine.commitment, "string");
    await until(() => [toSpectator, toGm, toOther].every((list) => list.some((e) => e.seq === mine.seq)));
    for (const list of [toSpectator, toOther]) {
      const sealed = list.find((e) => e.seq === mine.seq);
      assert.equal(sealed.sealed, true);
      assert.match(sealed.commitment, /^[0-9a-f]{64}$/);
      assert.equal(sealed.commitment, mine.commitment);
      for (const key of ["label", "intent", "result"]) assert.ok(!(key in sealed), `sealed roll carries ${key}`);
    }
    assert.deepEqual(toGm.find((e) => e.seq === mine.seq).result, mine.result);

    // The roller opens it; everybody can check it against what they were sent.
    const reveal = await player.reveal(mine.seq);
    assert.equal(reveal.kind, "reveal");
    assert.equal(reveal.of, mine.seq);
    assert.ok(reveal.blob instanceof Uint8Array && reveal.nonce instanceof Uint8Array);
    assert.equal(reveal.commitmentVerified, true);
    const opened = await until(() => toSpectator.find((e) => e.kind === "reveal" && e.of === mine.seq));
    assert.equal(opened.commitmentVerified, true);
    assert.deepEqual(opened.roll.result, mine.result);
    assert.equal(opened.roll.label, "secret door");
    assert.equal(opened.roll.seq, mine.seq);
    assert.equal(opened.roll.actor.id, player.you.id);
    const gmOpened = await until(() => toGm.find((e) => e.kind === "reveal" && e.of === mine.seq));
    assert.equal(gmOpened.commitmentVerified, true);
  });

  test("verifyCommitment: the reveal's bytes match, any changed byte does not", async () => {
    const room = createRoom();
    const gm = await connect(room.gm);
    const spectator = await connect(room.spectator);
    const sealedSeen = record(spectator);
    const roll = await gm.roll({ system: "honors_edge.roll", pool: "6k3", tn: 20 }, { visibility: "self" });
    const sealed = await until(() => sealedSeen.find((e) => e.seq === roll.seq));
    assert.equal(sealed.sealed, true);
    const reveal = await gm.reveal(roll.seq);
    const { nonce, blob } = reveal;
    assert.equal(await verifyCommitment(nonce, blob, sealed.commitment), true);
    assert.equal(await verifyCommitment(nonce, blob, sealed.commitment.toUpperCase()), true);
    const tampered = Uint8Array.from(blob);
    tampered[tampered.length - 1] ^= 1;
    assert.equal(await verifyCommitment(nonce, tampered, sealed.commitment), false);
    const otherNonce = Uint8Array.from(nonce);
    otherNonce[0] ^= 0x80;
    assert.equal(await verifyCommitment(otherNonce, blob, sealed.commitment), false);
    assert.equal(await verifyCommitment(nonce, blob, "00".repeat(32)), false);
    // The blob is the roll's full event body.
    const body = decodeMsgpack(blob);
    assert.equal(body.seq, roll.seq);
    assert.deepEqual(body.result, roll.result);
  });

  test("a blind roll is sealed even for its roller; only the GM may reveal it", async () => {
    const room = createRoom();
    const gm = await connect(room.gm);
    const player = await connect(room.player, { name: "Ana" });
    const toGm = record(gm);
    const blind = await player.roll(nexus, { visibility: "blind", label: "Perception" });
    assert.equal(blind.sealed, true);
    assert.ok(!("result" in blind));
    const full = await until(() => toGm.find((e) => e.seq === blind.seq));
    assert.equal(full.label, "Perception");
    await assert.rejects(player.reveal(blind.seq), { code: "forbidden" });
    const opened = next(player, "reveal", (e) => e.of === blind.seq);
    await gm.reveal(blind.seq);
    const reveal = await opened;
    assert.equal(reveal.commitmentVerified, true);
    assert.deepEqual(reveal.roll.result, full.result);
  });

  test("a new client's history replays opened rolls in full and keeps commitments for later reveals", async () => {
    const room = createRoom();
    const gm = await connect(room.gm);
    const hidden = await gm.roll(duality, { visibility: "gm" });
    await gm.resource("fear", "gain", 1);
    const late = await connect(room.spectator);
    const sealed = late.event(hidden.seq);
    assert.equal(sealed.sealed, true);
    const reveal = next(late, "reveal");
    await gm.reveal(hidden.seq);
    assert.equal((await reveal).commitmentVerified, true);
    const later = await connect(room.spectator);
    const replayed = later.event(hidden.seq);
    assert.equal(replayed.sealed, undefined);
    assert.deepEqual(replayed.result, hidden.result);
  });
});

describe("errors reject with the server's code and message", () => {
  test("spectator roll → forbidden", async () => {
    const spectator = await connect(createRoom().spectator);
    await assert.rejects(spectator.roll(duality), (err) => {
      assert.ok(err instanceof TableRelayError);
      assert.equal(err.code, "forbidden");
      assert.match(err.message, /\w+ \w+/);
      assert.equal(typeof err.id, "string");
      return true;
    });
  });

  test("bad intents → bad_intent with the rules' sentence", async () => {
    const player = await connect(createRoom().player);
    await assert.rejects(player.roll({ system: "no.such.system" }), (err) => err.code === "bad_intent" && /no\.such\.system|system/.test(err.message));
    await assert.rejects(player.roll({ system: "nexus.test", attribute_die: "d7" }), (err) => err.code === "bad_intent" && /attribute_die/.test(err.message));
    await assert.rejects(player.roll({ system: "daggerheart.duality", modifier: "two" }), { code: "bad_intent" });
  });

  test("malformed frames → bad_frame; revealing what is not sealed → not_found", async () => {
    const room = createRoom();
    const gm = await connect(room.gm);
    await assert.rejects(gm.roll(duality, { visibility: "everyone" }), { code: "bad_frame" });
    await assert.rejects(gm.roll(duality, { label: "x".repeat(201) }), { code: "bad_frame" });
    const open = await gm.roll(duality);
    await assert.rejects(gm.reveal(open.seq), { code: "not_found" });
    await assert.rejects(gm.reveal(999999), { code: "not_found" });
    await assert.rejects(gm.resource("fear", "gain", -1), { code: "bad_frame" });
  });

  test("a player may not reveal another player's hidden roll", async () => {
    const room = createRoom();
    const ana = await connect(room.player, { name: "Ana" });
    const bo = await connect(room.player, { name: "Bo" });
    const hidden = await ana.roll(duality, { visibility: "self" });
    await assert.rejects(bo.reveal(hidden.seq), { code: "forbidden" });
  });

  test("after close(), requests reject with closed and nothing reconnects", async () => {
    const gm = await connect(createRoom().gm);
    gm.close();
    assert.equal(gm.status, "closed");
    await assert.rejects(gm.roll(duality), { code: "closed" });
    await assert.rejects(gm.ping(), { code: "closed" });
  });
});

describe("rate limits", () => {
  test("a burst beyond the server's limit still lands every roll: rate_limited ones are sent again", async () => {
    const net = socketFactory();
    const player = await connect(createRoom().player, { WebSocket: net.WebSocket });
    let refused = 0;
    net.last().on("message", (data) => {
      const frame = decodeMsgpack(new Uint8Array(data));
      if (frame.t === "error" && frame.code === "rate_limited") refused++;
    });
    // 60 at once is past the default burst of 40 frames; every one must still resolve, each once.
    const rolls = await Promise.all(Array.from({ length: 60 }, (_, i) => player.roll({ system: "dice", formula: "1d6" }, { label: `burst ${i}` })));
    assert.ok(refused > 0, "the burst should have met the rate limit");
    assert.equal(new Set(rolls.map((e) => e.seq)).size, 60);
    assert.deepEqual(new Set(rolls.map((e) => e.label)), new Set(Array.from({ length: 60 }, (_, i) => `burst ${i}`)));
  });
});
