// Shared by the node tests: the relay under test, fresh rooms, clients with controllable sockets.
//
// Run by tests/test_js_client.py, which starts the default relay (fair dice on) and passes TABLERELAY_TEST_URL,
// _DATA and _CLI, a second one for the fairness tests (a longer witness wait) as TABLERELAY_TEST_FAIR_URL and
// _FAIR_DATA, and a third without fair dice as TABLERELAY_TEST_PLAIN_URL and _PLAIN_DATA. Run alone
// (`npm test`), it starts them itself from the repository's .venv.

import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { TableRelay } from "../tablerelay.js";

const here = fileURLToPath(new URL(".", import.meta.url));
const repo = resolve(here, "..", "..", "..");

/** The `tablerelay` command: the one the Python runner names, else the repository's .venv's. */
const defaultCli = () => process.env.TABLERELAY_TEST_CLI || join(repo, ".venv", "bin", "tablerelay");

/**
 * A relay process of its own, on a fresh data folder; `argv` is the command that serves (the real `tablerelay`
 * by default), `cli` the one that makes rooms.
 */
async function startOwnRelay(extraEnv = {}, argv = null) {
  const cli = defaultCli();
  const data = mkdtempSync(join(tmpdir(), "tablerelay-node-"));
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("TABLERELAY_")));
  const env = { ...inherited, TABLERELAY_SECRET: `node-tests-secret-${process.pid}-${Date.now()}-${Math.random()}`, ...extraEnv };
  const [command, ...prefix] = argv ?? [cli];
  const args = [...prefix, "serve", "--host", "127.0.0.1", "--port", "0", "--data", data, "--log-format", "json"];
  const child = spawn(command, args, { cwd: repo, env, stdio: ["ignore", "ignore", "pipe"] });
  process.on("exit", () => {
    child.kill();
    rmSync(data, { recursive: true, force: true });
  });
  const url = await new Promise((ok, fail) => {
    let buffered = "";
    const timer = setTimeout(() => fail(new Error(`relay did not start:\n${buffered}`)), 30_000);
    child.stderr.on("data", (chunk) => {
      buffered += chunk;
      for (const line of buffered.split("\n")) {
        try {
          const record = JSON.parse(line);
          if (record.event === "listening") {
            clearTimeout(timer);
            ok(`ws://${record.host}:${record.port}/ws`);
          }
        } catch {
          /* not a whole JSON line yet */
        }
      }
    });
    child.on("exit", (code) => fail(new Error(`relay exited with ${code}:\n${buffered}`)));
  });
  // The server lives as long as this test process, without keeping it alive.
  child.unref();
  child.stderr.unref();
  return { url, data, cli, env };
}

export const server = process.env.TABLERELAY_TEST_URL
  ? {
      url: process.env.TABLERELAY_TEST_URL,
      data: process.env.TABLERELAY_TEST_DATA,
      cli: process.env.TABLERELAY_TEST_CLI,
      env: process.env,
    }
  : await startOwnRelay();

let fair = null;
let plain = null;

/** A relay without fair dice (`TABLERELAY_FAIR_DICE=false`; the default is on): started on first use. */
export function plainServer() {
  plain ??= process.env.TABLERELAY_TEST_PLAIN_URL
    ? Promise.resolve({
        url: process.env.TABLERELAY_TEST_PLAIN_URL,
        data: process.env.TABLERELAY_TEST_PLAIN_DATA,
        cli: process.env.TABLERELAY_TEST_CLI,
        env: process.env,
      })
    : startOwnRelay({ TABLERELAY_FAIR_DICE: "false" });
  return plain;
}

/** The relay the fairness tests use (fair dice, spec/fairness.md, with a witness wait for a loaded machine): started on first use. */
export function fairServer() {
  fair ??= process.env.TABLERELAY_TEST_FAIR_URL
    ? Promise.resolve({
        url: process.env.TABLERELAY_TEST_FAIR_URL,
        data: process.env.TABLERELAY_TEST_FAIR_DATA,
        cli: process.env.TABLERELAY_TEST_CLI,
        env: process.env,
      })
    : startOwnRelay({ TABLERELAY_FAIR_DICE: "true", TABLERELAY_WITNESS_WAIT_MS: String(CHEAT_WITNESS_WAIT_MS) });
  return fair;
}

const cheating = new Map();

/**
 * A relay that cheats at fair dice (tests/fairness/cheating_relay.py: "drop", "replace", "reroll", "unasked",
 * or "honest" for the control), rolling fair dice with a witness wait long enough for a loaded machine:
 * started on first use. `witnessWaitMs` is the wait it was given.
 */
export function cheatingServer(cheat) {
  if (!cheating.has(cheat)) {
    const python = join(dirname(defaultCli()), "python");
    const env = { TABLERELAY_FAIR_DICE: "true", TABLERELAY_WITNESS_WAIT_MS: String(CHEAT_WITNESS_WAIT_MS) };
    cheating.set(cheat, startOwnRelay(env, [python, "-m", "tests.fairness.cheating_relay", cheat]));
  }
  return cheating.get(cheat);
}

/** A relay of its own rolling fair dice with more settings (`{TABLERELAY_HISTORY: "6"}`): a new one per call. */
export function fairServerWith(env) {
  return startOwnRelay({ TABLERELAY_FAIR_DICE: "true", TABLERELAY_WITNESS_WAIT_MS: String(CHEAT_WITNESS_WAIT_MS), ...env });
}

/** The witness wait of the cheating relays (ms): long, so an honest value is never late on a busy machine. */
export const CHEAT_WITNESS_WAIT_MS = 2000;

let rooms = 0;

/** A fresh room: {room, gm, player, spectator, watch}; on `on` (e.g. `await fairServer()`) when given. */
export function createRoom(name = `node test ${process.pid}-${++rooms}`, on = server) {
  const out = execFileSync(on.cli, ["room", "create", "--name", name, "--data", on.data, "--json"], {
    env: on.env,
    encoding: "utf8",
  });
  return JSON.parse(out);
}

/**
 * A real `ws` socket whose test can cut it (`terminate()`: no close frame, like a dropped network) or make
 * it deaf (`deaf = true`: frames still arrive over the wire but the client never sees them, like a
 * connection that died after the server wrote to it).
 */
export function socketFactory() {
  const sockets = [];
  class TestSocket extends WebSocket {
    constructor(url) {
      super(url);
      this.deaf = false;
      sockets.push(this);
    }
    addEventListener(type, listener, options) {
      if (type !== "message") return super.addEventListener(type, listener, options);
      return super.addEventListener(type, (event) => {
        if (!this.deaf) listener(event);
      }, options);
    }
  }
  return { WebSocket: TestSocket, sockets, last: () => sockets[sockets.length - 1] };
}

const opened = new Set();

/** A connected client (closed by closeAll); options pass through to TableRelay. */
export async function connect(token, options = {}) {
  const { urlList, ...rest } = options; // urlList: several addresses instead of the relay's one
  const client = new TableRelay(urlList ?? server.url, token, { WebSocket, minDelay: 20, maxDelay: 200, ...rest });
  opened.add(client);
  await client.connect();
  return client;
}

export function closeAll() {
  for (const client of opened) client.close();
  opened.clear();
}

/** Resolves when `check()` is truthy (polled), or rejects after `ms`. */
export async function until(check, ms = 8000, what = "condition") {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Resolves with the next `type` event on `client` that passes `filter`. */
export function next(client, type, filter = () => true, ms = 8000) {
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => {
      off();
      fail(new Error(`no '${type}' within ${ms} ms`));
    }, ms);
    const off = client.on(type, (event, info) => {
      if (!filter(event, info)) return;
      clearTimeout(timer);
      off();
      ok(event);
    });
  });
}

/** Collects every event (not replays) a client delivers. */
export function record(client) {
  const events = [];
  client.on("event", (event, info) => {
    if (!info.replay) events.push(event);
  });
  return events;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
