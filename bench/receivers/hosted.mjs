// The hosted-load generator (bench/sections/hosted.py): tables of a GM, four players and a spectator, each
// member a real `TableRelay` from clients/js (its reconnect backoff, its resume, its retries of rolls in
// flight), each socket bound to a source address of its own in 127.0.0.0/8 so ports never run out. Against
// the bare websockets peer the same tables and schedule go through plain `ws` sockets (the peer has no
// protocol: any message is a roll, broadcast to the room).
//
// JSON lines on stdin (commands) and stdout (reports):
//   {cmd:"open", kind, url, tables:[{room, tokens:[6]}], first, meanMs, seed, verify}  -> {ev:"open", n, failed}
//   {cmd:"go"}     every table rolls on its own schedule (exponential gaps, mean meanMs)  -> {ev:"sample"} each second
//   {cmd:"pause"}  no new requests; {cmd:"settle", timeout} waits for those in flight   -> {ev:"settled", pending}
//   {cmd:"storm", since}  reports once every client has been welcomed again after `since` (ms since the epoch)
//                          -> {ev:"back", n, last, welcomes}
//   {cmd:"report"} -> {ev:"report", clients:[{room, role, base, seqs}], rolls:{room: [ids acked]}, inflight, errors}
//   {cmd:"quit"}
// Signature verification is off in these clients (options.verify = false): a browser verifies its own
// events; 18,000 of them verifying on the load generator's share of two cores would measure Node.

import { createInterface } from "node:readline";
import { decode } from "@msgpack/msgpack";
import WebSocket from "ws";
import { TableRelay } from "../../clients/js/tablerelay.js";

const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const ROLES = ["gm", "player", "player", "player", "player", "spectator"];

// Source address number n (from 1): 127.a.b.c with c in 1..250, so no address ends in 0 or 255.
function source(n) {
  const c = (n % 250) + 1;
  const rest = Math.floor(n / 250);
  return `127.${(Math.floor(rest / 250) % 250) + 1}.${(rest % 250) + 1}.${c}`;
}

function boundSocket(address, onClose) {
  return class Bound extends WebSocket {
    constructor(url) {
      super(url, { localAddress: address, perMessageDeflate: false, handshakeTimeout: 30_000 });
      // Registered before the client's own listener: it sees the requests still in flight at the close.
      this.addEventListener("close", () => onClose());
    }
  };
}

// A small deterministic generator for the schedule and the mix (bench load only, never a die).
function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 4294967296;
  };
}

const INTENTS = [
  { system: "drawsteel.power", characteristic: 2, edges: 1 },
  { system: "daggerheart.duality", modifier: 1, difficulty: 12 },
  { system: "honors_edge.roll", pool: "5k3" },
  { system: "nexus.test", attribute_die: "d8", skill_rank: 2 },
  { system: "dice", formula: "4d6kh3" },
  { system: "dice", formula: "2d20kh1+5", dialect: "roll20" },
];

let kind = "relay";
let tables = [];
let random = rng(1);
let meanMs = 10_000;
let rolling = false;
let prefix = "s";
const latencies = [];
const errors = {};
const inflight = new Set(); // roll ids sent and not acked when their socket closed
const stormWelcomes = [];
let storm = null;

function countError(code) {
  errors[code] = (errors[code] ?? 0) + 1;
}

function arrived(table, seq, at) {
  let a = table.arrivals.get(seq);
  if (!a) table.arrivals.set(seq, (a = { count: 0, last: 0 }));
  a.count++;
  a.last = Math.max(a.last, at);
  complete(table, seq);
}

function complete(table, seq) {
  const a = table.arrivals.get(seq);
  const sent = table.sends.get(seq);
  if (!a || sent === undefined || a.count < table.members.length) return;
  latencies.push(a.last - sent);
  table.arrivals.delete(seq);
  table.sends.delete(seq);
}

function openRelayMember(url, table, token, role, index, verify) {
  const member = { role, base: null, seqs: [], client: null, welcomedAt: 0, welcoming: false, missing: [] };
  const Bound = boundSocket(source(index), () => {
    for (const [id, request] of member.client._pending) {
      if (request.frame.t === "roll" && request.sent && !request.acked) inflight.add(id);
    }
  });
  const name = role === "gm" ? "GM" : role === "player" ? `Player ${index}` : "Watcher";
  const client = new TableRelay(url, token, { WebSocket: Bound, name, verify });
  member.client = client;
  client.on("event", (event) => {
    member.seqs.push(event.seq);
    arrived(table, event.seq, Date.now());
  });
  // A welcome's "state" comes once its history has been delivered: the client is caught up then.
  client.on("welcome", () => {
    member.welcoming = true;
  });
  client.on("state", () => {
    if (!member.welcoming) return; // a resource, join or leave event's state
    member.welcoming = false;
    if (member.base === null) member.base = client.seq;
    member.welcomedAt = Date.now();
    if (storm && member.welcomedAt > storm.since) {
      stormWelcomes.push(member.welcomedAt);
      checkStorm();
    }
  });
  client.on("error", (err) => countError(err.code ?? "error"));
  return member;
}

function checkStorm() {
  if (!storm || storm.done) return;
  const all = tables.flatMap((t) => t.members);
  if (all.every((m) => m.welcomedAt > storm.since)) {
    storm.done = true;
    out({ ev: "back", n: all.length, last: Math.max(...all.map((m) => m.welcomedAt)), welcomes: stormWelcomes.length });
  }
}

function openBareMember(url, table, index) {
  const member = { role: "bare", base: 0, seqs: [], ws: null };
  const ws = new WebSocket(url, { localAddress: source(index), perMessageDeflate: false });
  ws.binaryType = "nodebuffer";
  ws.on("message", (data) => {
    const frame = decode(data);
    member.seqs.push(frame.seq);
    arrived(table, frame.seq, Date.now());
  });
  ws.on("error", () => countError("socket"));
  member.ws = ws;
  member.ready = new Promise((resolve) => {
    ws.once("open", () => resolve(true));
    ws.once("error", () => resolve(false));
  });
  return member;
}

async function open(cmd) {
  kind = cmd.kind;
  random = rng(cmd.seed);
  meanMs = cmd.meanMs;
  prefix = `s${cmd.seed}`;
  let index = cmd.first;
  tables = cmd.tables.map((t) => ({ room: t.room, members: [], arrivals: new Map(), sends: new Map(), n: 0, sealed: [], bareSends: 0 }));
  const waits = [];
  for (let i = 0; i < tables.length; i++) {
    const table = tables[i];
    for (let j = 0; j < ROLES.length; j++) {
      index++;
      if (kind === "relay") {
        const m = openRelayMember(cmd.url, table, cmd.tables[i].tokens[j], ROLES[j], index, cmd.verify === true);
        table.members.push(m);
        waits.push(m.client.connect().then(() => true, () => false));
      } else {
        const m = openBareMember(`${cmd.url}/r/${table.room}`, table, index);
        table.members.push(m);
        waits.push(m.ready);
      }
      // A few hundred handshakes at a time, as tables open through an evening rather than in one instant.
      if (waits.length % 200 === 0) await Promise.all(waits.slice(-200));
    }
  }
  const ok = await Promise.all(waits);
  out({ ev: "open", n: ok.filter(Boolean).length, failed: ok.filter((x) => !x).length });
}

function nextGap() {
  return -Math.log(1 - random()) * meanMs;
}

function schedule(table) {
  table.timer = setTimeout(() => {
    if (!rolling) return;
    act(table);
    schedule(table);
  }, nextGap());
}

// One table's next action: mostly rolls (public and GM-only sealed ones, every system and both dialects),
// sometimes the GM's reveal of a sealed roll or a Fear gain or spend.
function act(table) {
  const at = Date.now();
  if (kind !== "relay") {
    table.bareSends++;
    table.sends.set(table.bareSends, at); // the bare server numbers a room's messages in arrival order
    complete(table, table.bareSends);
    table.members[0].ws.send("r");
    return;
  }
  const gm = table.members[0].client;
  const r = random();
  if (r < 0.06 && table.sealed.length) {
    gm.reveal(table.sealed.shift()).catch((e) => countError(e.code ?? "reveal"));
    return;
  }
  if (r < 0.1) {
    const op = gm.state.fear > 0 && r < 0.08 ? "spend" : "gain";
    gm.resource("fear", op, 1).catch((e) => countError(e.code ?? "resource"));
    return;
  }
  const who = Math.floor(random() * 5); // the GM or one of the four players
  const sealed = who === 0 && random() < 0.3;
  const intent = INTENTS[Math.floor(random() * INTENTS.length)];
  const id = `${prefix}-${table.room}-${++table.n}`;
  const acked = (table.acked ??= []);
  table.members[who].client
    .roll(intent, { visibility: sealed ? "gm" : "public", label: "Hosted", id })
    .then((event) => {
      acked.push(id);
      table.sends.set(event.seq, at);
      if (sealed) table.sealed.push(event.seq);
      complete(table, event.seq);
    })
    .catch((e) => countError(e.code ?? "roll"));
}

function sample() {
  const batch = latencies.splice(0);
  const members = tables.flatMap((t) => t.members);
  const open = kind === "relay" ? members.filter((m) => m.client.status === "open").length : members.length;
  out({ ev: "sample", t: Date.now(), lat: batch.map((x) => Math.round(x * 10) / 10), open });
}

async function settle(timeout) {
  const deadline = Date.now() + timeout;
  const pending = () => (kind === "relay" ? tables.reduce((n, t) => n + t.members.reduce((k, m) => k + m.client._pending.size, 0), 0) : 0);
  while (pending() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, 500)); // the events of the last acks
  out({ ev: "settled", pending: pending() });
}

let sampler = null;
const rl = createInterface({ input: process.stdin });
rl.on("line", async (line) => {
  const cmd = JSON.parse(line);
  try {
    if (cmd.cmd === "open") await open(cmd);
    else if (cmd.cmd === "go") {
      rolling = true;
      for (const t of tables) schedule(t);
      sampler ??= setInterval(sample, 1000);
    } else if (cmd.cmd === "pause") {
      rolling = false;
      for (const t of tables) clearTimeout(t.timer);
    } else if (cmd.cmd === "settle") await settle(cmd.timeout ?? 30_000);
    else if (cmd.cmd === "storm") {
      storm = { since: cmd.since, done: false };
      stormWelcomes.length = 0;
      checkStorm();
    } else if (cmd.cmd === "report") {
      clearInterval(sampler);
      sampler = null;
      out({
        ev: "report",
        clients: tables.flatMap((t) => t.members.map((m) => ({ room: t.room, role: m.role, base: m.base, seqs: m.seqs }))),
        rolls: Object.fromEntries(tables.map((t) => [t.room, t.acked ?? []])),
        inflight: [...inflight],
        errors,
      });
    } else if (cmd.cmd === "quit" || cmd.cmd === "close") {
      for (const t of tables) {
        for (const m of t.members) {
          if (m.client) m.client.close();
          else m.ws.terminate();
        }
      }
      setTimeout(() => process.exit(0), 200);
    }
  } catch (err) {
    out({ ev: "fail", error: String(err?.stack ?? err) });
  }
});
rl.on("close", () => process.exit(0));
