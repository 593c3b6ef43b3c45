// Reconnect and resume: sockets cut mid-stream, and the client still delivers every event exactly once,
// in order; a roll whose answer was lost is sent again with the same id and never rolled twice.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { closeAll, connect, createRoom, record, sleep, socketFactory, until } from "./helpers.mjs";

after(closeAll);

const intent = { system: "honors_edge.roll", pool: "3k2" };

test("cutting the socket twice mid-stream loses and doubles nothing", async () => {
  const room = createRoom();
  const gm = await connect(room.gm, { name: "GM" });
  const cut = socketFactory();
  const watcher = await connect(room.spectator, { name: "Watcher", WebSocket: cut.WebSocket });
  const welcomes = [];
  watcher.on("welcome", (_w, info) => welcomes.push(info));
  const seen = record(watcher);
  const startSeq = watcher.seq;

  const rolled = [];
  const total = 30;
  for (let i = 0; i < total; i++) {
    rolled.push(await gm.roll(intent, { label: `roll ${i}` }));
    if (i === 8 || i === 19) cut.last().terminate(); // no close frame: a dropped network
    await sleep(40); // under the server's rate limit
  }
  const lastSeq = rolled[rolled.length - 1].seq;
  await until(() => watcher.seq >= lastSeq && watcher.status === "open", 15000, "the watcher to catch up");

  assert.ok(cut.sockets.length >= 3, `expected two reconnects, saw ${cut.sockets.length} sockets`);
  assert.deepEqual(
    welcomes.slice(1).map((w) => w.fresh),
    welcomes.slice(1).map(() => false),
    "every resume was recovered (no fresh start)",
  );
  // Every event after the first welcome, once each, in seq order with no hole.
  const seqs = seen.map((e) => e.seq);
  assert.equal(new Set(seqs).size, seqs.length, `duplicates in ${seqs}`);
  for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1] + 1, `gap or disorder at ${seqs[i - 1]} → ${seqs[i]}`);
  assert.equal(seqs[0], startSeq + 1);
  // Every roll the GM made arrived with its result intact.
  const byLabel = new Map(seen.filter((e) => e.kind === "roll").map((e) => [e.label, e]));
  for (const roll of rolled) assert.deepEqual(byLabel.get(roll.label)?.result, roll.result, roll.label);
  assert.equal(byLabel.size, total);
});

test("a roll whose ack is lost is resent with the same id after the resume: one roll, same result", async () => {
  const room = createRoom();
  const gm = await connect(room.gm);
  const toGm = record(gm);
  const net = socketFactory();
  const player = await connect(room.player, { name: "Ana", WebSocket: net.WebSocket });
  const delivered = record(player);

  // The server gets the roll and answers, but the answer never reaches the client...
  net.last().deaf = true;
  const pending = player.roll(intent, { label: "lost ack" });
  const stored = await until(() => toGm.find((e) => e.kind === "roll" && e.label === "lost ack"), 8000, "the stored roll");
  await sleep(50);
  // ...and then the connection dies.
  net.last().terminate();
  const event = await pending;
  assert.equal(event.seq, stored.seq);
  assert.deepEqual(event.result, stored.result);
  assert.equal(net.sockets.length, 2);
  await sleep(200);
  assert.equal(toGm.filter((e) => e.kind === "roll" && e.label === "lost ack").length, 1, "rolled exactly once");
  assert.equal(delivered.filter((e) => e.seq === stored.seq).length, 1, "delivered exactly once");
});

test("a roll sent while the socket is down waits and goes out after the resume", async () => {
  const room = createRoom();
  const net = socketFactory();
  const player = await connect(room.player, { WebSocket: net.WebSocket, minDelay: 150, maxDelay: 300 });
  net.last().terminate();
  await until(() => player.status === "reconnecting", 4000, "reconnecting");
  const event = await player.roll(intent, { label: "queued" });
  assert.equal(event.label, "queued");
  assert.equal(player.status, "open");
});

test("other requests cut off mid-flight reject with disconnected (they might have happened)", async () => {
  const room = createRoom();
  const net = socketFactory();
  const gm = await connect(room.gm, { WebSocket: net.WebSocket });
  net.last().deaf = true;
  const ping = gm.ping();
  const fear = gm.resource("fear", "gain", 1);
  await sleep(100);
  net.last().terminate();
  await assert.rejects(ping, { code: "disconnected" });
  await assert.rejects(fear, { code: "disconnected" });
  // The Fear did happen: the resumed client sees its event once.
  await until(() => gm.status === "open" && gm.state.fear === 1, 8000, "the Fear after resume");
});

test("the heartbeat notices a dead connection and reconnects", async () => {
  const room = createRoom();
  const net = socketFactory();
  const spectator = await connect(room.spectator, { WebSocket: net.WebSocket, pingInterval: 100, pingTimeout: 200 });
  net.last().deaf = true; // a half-open connection: nothing comes back
  await until(() => net.sockets.length >= 2 && spectator.status === "open", 8000, "a reconnect");
  assert.equal(spectator.status, "open");
});

test("a heartbeat timeout reconnects through the jittered backoff, a few steps in, not at once (#37)", async () => {
  const room = createRoom();
  const nets = [socketFactory(), socketFactory()];
  const clients = [];
  for (const net of nets) {
    clients.push(await connect(room.spectator, { WebSocket: net.WebSocket, pingInterval: 100, pingTimeout: 200, minDelay: 20, maxDelay: 10_000 }));
  }
  const waits = clients.map((client) => {
    const list = [];
    client.on("backoff", (wait) => list.push(wait));
    return list;
  });
  for (const net of nets) net.last().deaf = true; // a stalled server: no pong for anyone
  await until(() => clients.every((c, i) => nets[i].sockets.length >= 2 && c.status === "open"), 8000, "both reconnect");
  for (const list of waits) {
    assert.equal(list[0].reason, "heartbeat timeout");
    assert.equal(list[0].attempt, 3, "the backoff is not started over by a heartbeat timeout");
    // Step 3: 50 to 100 % of minDelay * 2 ** 3.
    assert.ok(list[0].delay >= 80 && list[0].delay <= 160, `waited ${list[0].delay} ms`);
  }
  assert.notEqual(waits[0][0].delay, waits[1][0].delay, "jittered: two clients of one stalled server wait differently");
  // A reconnect asked for by hand starts the backoff over, and still waits its (jittered) first step.
  clients[0].reconnectNow();
  await until(() => waits[0].length === 2, 8000, "the second backoff");
  assert.equal(waits[0][1].attempt, 0);
  assert.ok(waits[0][1].delay >= 10 && waits[0][1].delay <= 20, `waited ${waits[0][1].delay} ms`);
});

test("with several addresses (a cluster's nodes) each reconnect tries the next one and resumes", async () => {
  const room = createRoom();
  const gm = await connect(room.gm, { name: "GM" });
  const cut = socketFactory();
  // Port 9 (discard) refuses connections here: a node that is down.
  const down = "ws://127.0.0.1:9/ws";
  const watcher = await connect(room.spectator);
  watcher.close();
  const rotating = await connect(room.spectator, { WebSocket: cut.WebSocket, urlList: [down, watcher.url] });
  assert.deepEqual(rotating.urls, [down, watcher.url]);
  assert.equal(rotating.url, watcher.url, "the down node was passed over");
  const seen = record(rotating);
  const first = await gm.roll(intent, { label: "before" });
  await until(() => rotating.seq >= first.seq, 8000, "the first roll");
  const visited = cut.sockets.length;
  cut.last().terminate();
  const second = await gm.roll(intent, { label: "while away" });
  await until(() => rotating.seq >= second.seq && rotating.status === "open", 15000, "the resume");
  const urls = cut.sockets.slice(visited).map((s) => s.url);
  assert.ok(urls.includes(down) && urls[urls.length - 1] === watcher.url, `tried ${urls}`);
  const seqs = seen.map((e) => e.seq);
  for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1] + 1, `gap at ${seqs[i - 1]}`);
  assert.deepEqual(
    seen.filter((e) => e.kind === "roll").map((e) => e.label),
    ["before", "while away"],
    "every event once, in order, across the rotation",
  );
});
