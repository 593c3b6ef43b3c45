// The benchmark's client harness: one Node process holding many WebSocket clients of one server kind.
//
// The same code drives the relay and its peers, so every ratio in docs/benchmarks.md compares servers, not
// clients. The Python orchestrator (bench/tools/harness.py) starts this with one JSON argument, reads JSON lines
// from stdout and writes JSON command lines to stdin:
//
//   role "receive": open the connections, say {"ev":"ready"}; on {"cmd":"go","expect":E} count E
//                   messages per connection and report the monotonic time of the last one (with "track",
//                   also each event's seq and the time the last connection of this process received it).
//   role "driver":  one connection per target (the GM for the relay); {"cmd":"burst","n":E} sends E rolls
//                   per target as fast as the socket takes them; {"cmd":"paced","n":E,"rate":R} sends them
//                   R per second per target and reports when each was sent.
//   role "roller":  one player connection per target entry; {"cmd":"go","duration":S} makes each send a
//                   roll, wait for its ack and send the next, until S seconds have passed. With
//                   "lean": true (relay only) the rollers use openLean below instead of ws; with
//                   "seed": true each roll carries a roller seed (fair dice, spec/fairness.md).
//
// Times are CLOCK_MONOTONIC milliseconds (process.hrtime), comparable across processes on one machine.
// Every wait has a timeout, so a stuck server ends the run instead of hanging it.

import { createInterface } from "node:readline";
import { decode, encode } from "@msgpack/msgpack";
import { io } from "socket.io-client";
import WebSocket from "ws";
import { connect as tcpConnect } from "node:net";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";

// A large configuration (a thousand rooms' tokens) comes as "@path": one argument holds at most 128 KiB.
const argument = process.argv[2];
const config = JSON.parse(argument.startsWith("@") ? readFileSync(argument.slice(1), "utf8") : argument);
const kind = config.kind; // relay | bare | socketio
const SMALL = 100; // acks and errors are shorter than any event frame

function now() {
  return Number(process.hrtime.bigint() / 1000n) / 1000;
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function fail(message) {
  emit({ ev: "error", message });
  process.exit(2);
}

// -- connections -------------------------------------------------------------------------------------------

// A connection calls `onMessage(data)` for every frame after its handshake (the relay's welcome is not one).
function open(target, onMessage, onClose) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("handshake timed out")), 30000);
    if (kind === "socketio") {
      const socket = io(target.url, {
        transports: ["websocket"],
        forceNew: true,
        reconnection: false,
        timeout: 30000,
        auth: { room: target.room },
      });
      socket.on("connect", () => {
        clearTimeout(timer);
        resolve({ send: (payload) => socket.emit("roll", payload), close: () => socket.disconnect() });
      });
      socket.on("connect_error", (err) => {
        clearTimeout(timer);
        reject(err);
      });
      socket.on("event", onMessage);
      socket.on("disconnect", (reason) => onClose(String(reason)));
      return;
    }
    const ws = new WebSocket(target.url, { perMessageDeflate: false });
    let welcomed = kind !== "relay";
    const conn = { send: (data) => ws.send(data), close: () => ws.terminate(), welcome: null };
    ws.on("open", () => {
      if (kind === "relay") {
        ws.send(encode({ t: "hello", v: 1, token: target.token, name: target.name }));
      } else {
        clearTimeout(timer);
        resolve(conn);
      }
    });
    ws.on("message", (data) => {
      if (!welcomed) {
        const frame = decode(data);
        if (frame.t !== "welcome") {
          clearTimeout(timer);
          reject(new Error(`expected a welcome, got ${JSON.stringify(frame)}`));
          return;
        }
        welcomed = true;
        conn.welcome = frame;
        clearTimeout(timer);
        resolve(conn);
        return;
      }
      onMessage(data);
    });
    ws.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    ws.on("close", (code, reason) => {
      clearTimeout(timer);
      if (!welcomed) reject(new Error(`closed ${code} ${reason}`));
      onClose(`${code} ${reason}`);
    });
  });
}


// A minimal WebSocket client for load generation: it frames what it sends and, of what it receives, reads
// only the frame headers, handing on the small frames (acks and errors) and skipping event payloads
// unread. A roller needs nothing more, and a full client's per-message work would otherwise make the
// rollers, not the server, the thing measured.
function openLean(target, onSmall, onClose) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("handshake timed out")), 30000);
    const url = new URL(target.url);
    const socket = tcpConnect({ host: url.hostname, port: Number(url.port), noDelay: true });
    let buffer = Buffer.alloc(0);
    let upgraded = false;
    let welcomed = false;
    const mask = randomBytes(4);
    function frame(payload, first = 0x82) {
      const n = payload.length;
      const head = n < 126 ? Buffer.from([first, 0x80 | n]) : Buffer.from([first, 0x80 | 126, n >> 8, n & 255]);
      const body = Buffer.allocUnsafe(n);
      for (let i = 0; i < n; i++) body[i] = payload[i] ^ mask[i & 3];
      return Buffer.concat([head, mask, body]);
    }
    const conn = { send: (data) => socket.write(frame(data)), close: () => socket.destroy(), welcome: null };
    socket.on("connect", () => {
      socket.setNoDelay(true);
      const key = randomBytes(16).toString("base64");
      socket.write(
        `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\n` +
          `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
    });
    socket.on("data", (chunk) => {
      buffer = buffer.length ? Buffer.concat([buffer, chunk]) : chunk;
      if (!upgraded) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        if (!buffer.subarray(0, 12).toString().includes("101")) {
          clearTimeout(timer);
          reject(new Error(`handshake refused: ${buffer.subarray(0, end).toString()}`));
          return;
        }
        upgraded = true;
        buffer = buffer.subarray(end + 4);
        socket.write(frame(encode({ t: "hello", v: 1, token: target.token, name: target.name })));
      }
      let at = 0;
      while (buffer.length - at >= 2) {
        const opcode = buffer[at] & 0x0f;
        let n = buffer[at + 1] & 0x7f;
        let head = 2;
        if (n === 126) {
          if (buffer.length - at < 4) break;
          n = buffer.readUInt16BE(at + 2);
          head = 4;
        } else if (n === 127) {
          if (buffer.length - at < 10) break;
          n = Number(buffer.readBigUInt64BE(at + 2));
          head = 10;
        }
        if (buffer.length - at < head + n) break;
        const payload = buffer.subarray(at + head, at + head + n);
        at += head + n;
        if (opcode === 0x8) {
          socket.destroy();
          onClose(`${n >= 2 ? payload.readUInt16BE(0) : 1005}`);
          return;
        }
        if (opcode === 0x9) {
          // A ping: the server's keepalive closes a socket whose pong is late, so a roller that outlives
          // one ping interval (a relay kept up between windows) must answer like any client.
          socket.write(frame(payload, 0x8a));
          continue;
        }
        if (opcode !== 0x2) continue;
        if (!welcomed) {
          const first = decode(payload);
          clearTimeout(timer);
          if (first.t !== "welcome") {
            reject(new Error(`expected a welcome, got ${JSON.stringify(first)}`));
            return;
          }
          welcomed = true;
          conn.welcome = first;
          resolve(conn);
        } else if (n < SMALL) {
          onSmall(payload);
        }
      }
      buffer = at === buffer.length ? Buffer.alloc(0) : buffer.subarray(at);
    });
    socket.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on("close", () => {
      clearTimeout(timer);
      if (!welcomed) reject(new Error("closed before the welcome"));
    });
  });
}

// Open `count` connections to `target` with at most `limit` handshakes in flight (a listen backlog of
// ~100 would otherwise drop SYNs and stall the run on retransmits).
async function openMany(jobs, limit) {
  const conns = new Array(jobs.length);
  let next = 0;
  async function worker() {
    while (next < jobs.length) {
      const i = next++;
      conns[i] = await jobs[i]();
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, jobs.length) }, worker));
  return conns;
}

const closes = {};
function closed(reason) {
  if (!stopping) closes[reason] = (closes[reason] || 0) + 1;
}
let stopping = false;

// -- receive -----------------------------------------------------------------------------------------------

async function receive() {
  let armed = false;
  let expect = 0;
  let total = 0;
  let goal = 0;
  let first = 0;
  let last = 0;
  let track = false;
  let lastBySeq = null; // per target index: Map seq -> time the last connection here got it
  let report = null;
  const counts = [];
  const jobs = [];
  config.targets.forEach((target, t) => {
    for (let k = 0; k < target.conns; k++) {
      const index = jobs.length;
      counts.push(0);
      jobs.push(() =>
        open(
          target,
          (data) => {
            // "decode": every frame is decoded, as a real client does (the many-tables shape asks it of
            // both servers alike); otherwise only tracked runs decode, for the seq.
            const frame = track || config.decode ? (kind === "socketio" ? data : decode(data)) : null;
            if (!armed) return;
            // A relay rolling fair dice (its default) sends a room's seed events beside its rolls (a seed's
            // commitment before the first roll, a reveal and the next commitment every 250): they are not
            // the deliveries measured. Undecoded runs count them, a frame or two per room in hundreds.
            if (frame !== null && kind === "relay" && frame.t === "event" && frame.kind !== "roll") return;
            const at = now();
            if (first === 0) first = at;
            last = at;
            counts[index]++;
            if (track) {
              const seq = frame.seq;
              lastBySeq[t].set(seq, at);
            }
            total++;
            if (total === goal) finish(true);
          },
          closed,
        ),
      );
    }
  });
  const started = now();
  const conns = await openMany(jobs, config.concurrency || 64);
  emit({ ev: "ready", conns: conns.length, seconds: (now() - started) / 1000 });

  function finish(complete) {
    if (!armed) return;
    armed = false;
    clearTimeout(report);
    const result = {
      ev: "done",
      complete,
      received: total,
      expected: goal,
      first,
      last,
      min_conn: Math.min(...counts),
      max_conn: Math.max(...counts),
      closes,
    };
    if (track) result.seqs = lastBySeq.map((m) => Array.from(m.entries()));
    emit(result);
  }

  commands((cmd) => {
    if (cmd.cmd === "go") {
      expect = cmd.expect;
      // With rolls spread unevenly over rooms ("window"), the orchestrator gives the total itself.
      goal = cmd.goal ?? expect * conns.length;
      total = 0;
      first = 0;
      last = 0;
      counts.fill(0);
      track = Boolean(cmd.track);
      lastBySeq = config.targets.map(() => new Map());
      armed = true;
      report = setTimeout(() => finish(false), (cmd.timeout || 60) * 1000);
      emit({ ev: "armed" });
    } else if (cmd.cmd === "close") {
      stopping = true;
      for (const c of conns) c.close();
      setTimeout(() => process.exit(0), 200);
    }
  });
}

// -- driver ------------------------------------------------------------------------------------------------

function rollPayload(id) {
  const roll = { t: "roll", id, intent: config.intent, visibility: "public", label: config.label };
  // "seed": true sends a roller seed as the JS client does (spec/fairness.md: 16 fresh bytes per roll).
  if (config.seed) roll.seed = randomBytes(16);
  return roll;
}

async function driver() {
  const pending = new Map(); // request id -> [target index, sent at]
  const errors = {};
  let acked = 0;
  let ackGoal = 0;
  let ackDone = null;
  let lastAck = 0;
  const sends = []; // [target index, seq or null, request id, sent at]
  const ackSeq = new Map(); // request id -> seq
  const counters = config.targets.map(() => 0); // peers number their events per room; so do we
  let chainNext = null;
  const jobs = config.targets.map((target) => () =>
    open(
      target,
      (data) => {
        if (kind === "socketio" || data.length >= SMALL) {
          // An event reached the driver itself: the next roll of a chain may go.
          if (chainNext) chainNext();
          return;
        }
        const frame = decode(data);
        if (frame.t === "ack") {
          ackSeq.set(frame.id, frame.seq);
          acked++;
          lastAck = now();
          if (acked === ackGoal && ackDone) ackDone();
        } else if (frame.t === "error") {
          errors[frame.code] = (errors[frame.code] || 0) + 1;
        }
      },
      closed,
    ),
  );
  const conns = await openMany(jobs, 16);
  emit({ ev: "ready", conns: conns.length });
  let serial = 0;

  // One roll on target t; the relay numbers it in its ack, the peers by their per-room counter.
  function sendOne(t) {
    const id = `r${serial++}`;
    counters[t]++;
    const at = now();
    if (kind === "relay") conns[t].send(encode(rollPayload(id)));
    else if (kind === "bare") conns[t].send(encode(rollPayload(id)));
    else conns[t].send(rollPayload(id));
    sends.push([t, kind === "relay" ? null : counters[t], id, at]);
  }

  function waitAcks(goal, timeoutMs) {
    ackGoal = goal;
    if (kind !== "relay" || acked >= goal) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      ackDone = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
  }

  commands(async (cmd) => {
    if (cmd.cmd === "burst") {
      sends.length = 0;
      const before = acked;
      const t0 = now();
      for (let i = 0; i < cmd.n; i++) for (let t = 0; t < conns.length; t++) sendOne(t);
      const tSent = now();
      const ok = await waitAcks(before + cmd.n * conns.length, (cmd.timeout || 60) * 1000);
      emit({ ev: "burst", t0, t_sent: tSent, acked: acked - before, complete: ok, t_acked: lastAck, errors });
    } else if (cmd.cmd === "chain") {
      // One roll in flight per target: the next is sent when the driver has received the previous
      // one's event, so the server never has two rolls of a room to coalesce.
      sends.length = 0;
      const before = acked;
      const t0 = now();
      let remaining = cmd.n * conns.length;
      let left = conns.map(() => cmd.n);
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, (cmd.timeout || 60) * 1000);
        let turn = 0;
        chainNext = () => {
          remaining--;
          if (remaining <= 0) {
            clearTimeout(timer);
            chainNext = null;
            resolve();
            return;
          }
          // Round-robin over the targets that still have rolls to send.
          for (let k = 0; k < conns.length; k++) {
            turn = (turn + 1) % conns.length;
            if (left[turn] > 0) {
              left[turn]--;
              sendOne(turn);
              return;
            }
          }
        };
        for (let t = 0; t < conns.length; t++) {
          left[t]--;
          sendOne(t);
        }
        remaining = cmd.n * conns.length;
      });
      chainNext = null;
      const ok = await waitAcks(before + cmd.n * conns.length, 30000);
      emit({ ev: "chain", t0, t_sent: now(), acked: acked - before, complete: ok, t_acked: lastAck, errors });
    } else if (cmd.cmd === "window") {
      // Many tables: cmd.rooms lists the target of each roll (rooms chosen at random by the
      // orchestrator); cmd.window rolls are in flight at once, and the next leaves when an event reaches
      // the driver (it is a member of every room), whichever room it came from.
      sends.length = 0;
      const before = acked;
      const order = cmd.rooms;
      let sentCount = 0;
      let arrived = 0;
      const t0 = now();
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, (cmd.timeout || 60) * 1000);
        chainNext = () => {
          arrived++;
          if (sentCount < order.length) sendOne(order[sentCount++]);
          else if (arrived >= order.length) {
            clearTimeout(timer);
            resolve();
          }
        };
        while (sentCount < Math.min(cmd.window, order.length)) sendOne(order[sentCount++]);
      });
      chainNext = null;
      const tSent = now();
      const ok = await waitAcks(before + order.length, 30000);
      const rows = sends.map(([t, seq, id, at]) => [t, seq === null ? ackSeq.get(id) ?? null : seq, at]);
      emit({ ev: "window", t0, t_sent: tSent, acked: acked - before, complete: ok, t_acked: lastAck, sends: rows, errors });
    } else if (cmd.cmd === "paced") {
      sends.length = 0;
      const before = acked;
      const t0 = now();
      const interval = 1000 / cmd.rate;
      for (let i = 0; i < cmd.n; i++) {
        const due = t0 + i * interval;
        const wait = due - now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        for (let t = 0; t < conns.length; t++) sendOne(t);
      }
      const ok = await waitAcks(before + cmd.n * conns.length, (cmd.timeout || 30) * 1000);
      const rows = sends.map(([t, seq, id, at]) => [t, seq === null ? ackSeq.get(id) ?? null : seq, at]);
      emit({ ev: "paced", sends: rows, complete: ok, errors });
    } else if (cmd.cmd === "close") {
      stopping = true;
      for (const c of conns) c.close();
      setTimeout(() => process.exit(0), 200);
    }
  });
}

// -- roller ------------------------------------------------------------------------------------------------

async function roller() {
  const rollers = [];
  const errors = {};
  let running = false;
  let deadline = 0;
  let acks = 0;
  let active = 0;
  let onIdle = null;
  const jobs = [];
  config.targets.forEach((target) => {
    for (let k = 0; k < target.conns; k++) {
      const r = { conn: null, id: null, serial: 0, index: rollers.length };
      rollers.push(r);
      jobs.push(async () => {
        r.conn = await (config.lean ? openLean : open)(
          target,
          (data) => {
            if (data.length >= SMALL) return;
            const frame = decode(data);
            if (frame.id !== r.id) return;
            if (frame.t === "error") errors[frame.code] = (errors[frame.code] || 0) + 1;
            else if (frame.t === "ack" && running && now() <= deadline) acks++;
            next(r);
          },
          closed,
        );
      });
    }
  });

  function next(r) {
    if (!running || now() > deadline) {
      r.id = null;
      active--;
      if (active === 0 && onIdle) onIdle();
      return;
    }
    r.id = `k${r.index}.${r.serial++}`;
    r.conn.send(encode(rollPayload(r.id)));
  }

  await openMany(jobs, config.concurrency || 32);
  emit({ ev: "ready", conns: rollers.length });
  commands((cmd) => {
    if (cmd.cmd === "go") {
      acks = 0;
      for (const key of Object.keys(errors)) delete errors[key];
      const t0 = now();
      deadline = t0 + cmd.duration * 1000;
      running = true;
      active = rollers.length;
      const guard = setTimeout(() => onIdle && onIdle(), (cmd.duration + 30) * 1000);
      onIdle = () => {
        clearTimeout(guard);
        running = false;
        onIdle = null;
        emit({ ev: "done", acks, seconds: cmd.duration, stuck: active, errors, closes });
      };
      for (const r of rollers) {
        r.id = `k${r.index}.${r.serial++}`;
        r.conn.send(encode(rollPayload(r.id)));
      }
    } else if (cmd.cmd === "close") {
      stopping = true;
      for (const r of rollers) r.conn.close();
      setTimeout(() => process.exit(0), 200);
    }
  });
}

// -- commands from the orchestrator --------------------------------------------------------------------------

function commands(handler) {
  const lines = createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    if (line.trim()) handler(JSON.parse(line));
  });
  // The orchestrator went away: stop rather than linger.
  lines.on("close", () => process.exit(0));
}

const roles = { receive, driver, roller };
if (!roles[config.role]) fail(`unknown role ${config.role}`);
roles[config.role]().catch((err) => fail(String(err && err.stack ? err.stack : err)));
