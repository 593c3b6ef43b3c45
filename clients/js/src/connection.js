// A relay connection's lifecycle (docs/protocol.md): the socket, the hello that resumes from the last event
// delivered, reconnecting with jittered backoff (each retry on the next address of a cluster's), the
// heartbeat, listeners, and requests in flight, which a reconnect sends again (rolls) or rejects (the rest).
//
// `TableRelay` (client.js) builds on it: it receives the frames (`_receive`), keeps the room's state and
// offers the requests. This class is not exported by the package; its methods are TableRelay's.

import { PROTOCOL_VERSION, TableRelayError, encodeMsgpack, toHex } from "./protocol.js";

// Close codes after which reconnecting cannot help: the server refused who we are or what we sent.
// 4001 = first frame was not a hello (a client bug); 4003/4401/4403 = the token was refused.
const FATAL_CLOSE_CODES = new Set([4001, 4003, 4401, 4403]);
const NORMAL_CLOSURE = 1000;
// A heartbeat that times out says the server (or the way to it) is stalled, and then it is stalled for
// every client of it at once: their reconnects start this many steps into the backoff (1 to 2 s with the
// defaults), so they are spread over a second rather than arrive within 125 ms of each other.
const HEARTBEAT_STEPS = 3;

function randomPrefix() {
  const bytes = new Uint8Array(6);
  globalThis.crypto.getRandomValues(bytes);
  return toHex(bytes);
}

export class RelayConnection {
  /**
   * @param {string | string[]} url the server's WebSocket address, or the addresses of several relay nodes
   *   of one cluster: each reconnect tries the next one (spec/cluster.md)
   * @param {string} token a room token (GM, player invite, spectator, or a session token)
   * @param {import("../tablerelay.d.ts").TableRelayOptions} [options]
   */
  constructor(url, token, options = {}) {
    const urls = Array.isArray(url) ? url : [url];
    if (!urls.length || urls.some((u) => typeof u !== "string" || !u)) {
      throw new TypeError("TableRelay needs the server's WebSocket URL (or a list of them).");
    }
    if (typeof token !== "string" || !token) throw new TypeError("TableRelay needs a room token.");
    const WebSocketImpl = options.WebSocket ?? globalThis.WebSocket;
    if (typeof WebSocketImpl !== "function") {
      throw new TypeError(
        "No WebSocket constructor: pass one as options.WebSocket (in Node 20: `import WebSocket from \"ws\"`).",
      );
    }
    /** Every address it may connect to; `url` is the one in use (or tried next). */
    this.urls = [...urls];
    this.url = this.urls[0];
    this.token = token;
    this.name = options.name;
    this.formats = options.formats;
    /** Whether the hello offers to witness rolls (spec/fairness.md); answering is automatic. */
    this.witness = options.witness !== false;
    this._WebSocket = WebSocketImpl;
    this._reconnect = options.reconnect !== false;
    this._minDelay = options.minDelay ?? 250;
    this._maxDelay = options.maxDelay ?? 10_000;
    this._pingInterval = options.pingInterval ?? 25_000;
    this._pingTimeout = options.pingTimeout ?? 10_000;
    /** @type {"idle"|"connecting"|"open"|"reconnecting"|"closed"} */
    this.status = "idle";
    /** The session token from the last welcome: it rejoins as the same participant. */
    this.session = options.session ?? null;
    this.epoch = null;
    /** The seq of the last event delivered to listeners. */
    this.seq = 0;

    this._listeners = new Map();
    this._ws = null;
    this._attempt = 0;
    this._timer = null;
    this._heartbeat = null;
    this._welcomed = false;
    this._idPrefix = randomPrefix();
    this._nextId = 1;
    this._pending = new Map(); // request id -> request
    this._awaitingEvent = new Map(); // seq -> requests acked whose event has not arrived yet
    this._ready = null;
  }

  // ---- events -------------------------------------------------------------------------------------------

  /**
   * Listen for an event kind ("roll", "reveal", "resource", "join", "leave"), "event" (every event), or a
   * client happening: "welcome", "state", "status", "error". Returns a function that removes the listener.
   */
  on(type, fn) {
    if (typeof fn !== "function") throw new TypeError("on() needs a listener function.");
    let set = this._listeners.get(type);
    if (!set) this._listeners.set(type, (set = new Set()));
    set.add(fn);
    return () => this.off(type, fn);
  }

  off(type, fn) {
    this._listeners.get(type)?.delete(fn);
  }

  /** Like on(), for one call only. */
  once(type, fn) {
    const off = this.on(type, (...args) => {
      off();
      fn(...args);
    });
    return off;
  }

  _emit(type, ...args) {
    const set = this._listeners.get(type);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        fn(...args);
      } catch (err) {
        // A listener's bug must not stop delivery to the others or stall the event pipeline.
        setTimeout(() => {
          throw err;
        }, 0);
      }
    }
  }

  _setStatus(status) {
    if (this.status === status) return;
    this.status = status;
    this._emit("status", status);
  }

  // ---- connection ---------------------------------------------------------------------------------------

  /**
   * Open the connection. Resolves with the first welcome; rejects if the server refuses the token (or, with
   * `reconnect: false`, if the first attempt fails). Calling it again returns the same promise.
   */
  connect() {
    if (this._ready) return this._ready;
    this._ready = new Promise((resolve, reject) => {
      this._resolveReady = resolve;
      this._rejectReady = reject;
    });
    this._open();
    return this._ready;
  }

  /** Close for good: no reconnect; requests still waiting are rejected with code "closed". */
  close() {
    this._stop(new TableRelayError("closed", "The connection was closed by this client."));
  }

  _stop(error) {
    if (this.status === "closed") return;
    this._setStatus("closed");
    clearTimeout(this._timer);
    this._stopHeartbeat();
    this._socketClosed();
    const ws = this._ws;
    this._ws = null;
    if (ws && ws.readyState <= 1) ws.close(NORMAL_CLOSURE);
    for (const request of this._pending.values()) request.reject(error);
    for (const list of this._awaitingEvent.values()) for (const request of list) request.reject(error);
    this._pending.clear();
    this._awaitingEvent.clear();
    this._rejectReady?.(error);
    this._ready ??= Promise.reject(error);
    this._ready.catch(() => {});
    this._emit("close", error);
  }

  _open() {
    this._setStatus(this._attempt === 0 && !this._welcomed ? "connecting" : "reconnecting");
    this._welcomedOnSocket = false;
    let ws;
    try {
      ws = new this._WebSocket(this.url);
    } catch (err) {
      this._afterClose(null, 1006, String(err?.message ?? err));
      return;
    }
    ws.binaryType = "arraybuffer";
    this._ws = ws;
    ws.addEventListener("open", () => {
      if (this._ws === ws) this._sendFrame(this._hello());
    });
    ws.addEventListener("message", (event) => {
      if (this._ws === ws) this._receive(event.data);
    });
    ws.addEventListener("close", (event) => {
      if (this._ws === ws) this._afterClose(ws, event.code, event.reason);
    });
    // Every failure is followed by a close event; that is where it is handled.
    ws.addEventListener("error", () => {});
  }

  _hello() {
    this._helloUsedSession = Boolean(this.session) && this.session !== this.token;
    const hello = { t: "hello", v: PROTOCOL_VERSION, token: this.session ?? this.token };
    if (this.name) hello.name = this.name;
    if (this.formats?.length) hello.formats = this.formats;
    if (this.witness) hello.witness = true;
    if (this.epoch !== null) hello.resume = { epoch: this.epoch, seq: this.seq };
    return hello;
  }

  /** A stored session token given to us that was refused (expired, another server): use the token instead. */
  _dropStaleSession() {
    if (!this._helloUsedSession || this._welcomed) return false;
    this.session = null;
    this._helloUsedSession = false;
    return true;
  }

  _afterClose(ws, code, reason) {
    this._ws = null;
    this._stopHeartbeat();
    this._welcomedOnSocket = false;
    this._socketClosed();
    if (this.status === "closed") return;
    if (FATAL_CLOSE_CODES.has(code)) {
      if (this._dropStaleSession()) {
        this._scheduleReconnect("session refused");
        return;
      }
      this._stop(new TableRelayError("unauthorized", reason || `The server refused us (${code}).`, { closeCode: code }));
      return;
    }
    // A sent request other than a roll may or may not have taken effect; only a roll is safe to send again
    // (its id is its idempotency key), so the others are rejected rather than risk doing them twice.
    for (const [id, request] of this._pending) {
      if (!request.sent || request.acked) continue;
      if (request.frame.t === "roll") {
        request.sent = false;
      } else {
        this._pending.delete(id);
        request.reject(
          new TableRelayError(
            "disconnected",
            "The connection dropped before the server answered; the request may or may not have taken effect.",
            { id },
          ),
        );
      }
    }
    if (!this._reconnect) {
      this._stop(new TableRelayError("disconnected", reason || `The connection closed (${code}).`, { closeCode: code }));
      return;
    }
    this._scheduleReconnect(reason || `closed (${code})`);
  }

  /**
   * The one way every reconnect goes: after the next step of the jittered backoff (a wait of 50 to 100 % of
   * `minDelay * 2 ** attempt`, at most `maxDelay`), on the next address. Emits "backoff" with the wait.
   */
  _scheduleReconnect(reason) {
    this._setStatus("reconnecting");
    clearTimeout(this._timer);
    const attempt = this._attempt;
    const ceiling = Math.min(this._maxDelay, this._minDelay * 2 ** attempt);
    const delay = ceiling / 2 + Math.random() * (ceiling / 2); // jitter spreads a room's reconnects apart
    this._attempt++;
    this._rotate();
    this._timer = setTimeout(() => this._open(), delay);
    this._emit("backoff", { delay, attempt, reason });
  }

  /** Hook for the client: the socket is gone (closed, or the client stopped). */
  _socketClosed() {}

  /** The next address of `urls`: a node that died takes its sockets with it, so the retry goes elsewhere. */
  _rotate() {
    if (this.urls.length < 2) return;
    this.url = this.urls[(this.urls.indexOf(this.url) + 1) % this.urls.length];
  }

  /**
   * Drop the current socket and reconnect (resuming) after the backoff's first step, started over; e.g.
   * when the page comes back online.
   */
  reconnectNow() {
    this._restartSocket(0, "client reconnect");
  }

  /** Close the socket (if any) and reconnect through the backoff, from step `fromStep` at least. */
  _restartSocket(fromStep, reason) {
    if (this.status === "closed" || this.status === "idle") return;
    clearTimeout(this._timer);
    this._attempt = fromStep === 0 ? 0 : Math.max(this._attempt, fromStep);
    const ws = this._ws;
    if (ws) {
      ws.close(4000, reason);
      this._afterClose(ws, 4000, reason);
    } else {
      this._scheduleReconnect(reason);
    }
  }

  _startHeartbeat() {
    this._stopHeartbeat();
    if (!this._pingInterval) return;
    this._heartbeat = setInterval(() => {
      this.ping({ timeout: this._pingTimeout }).catch((err) => {
        // Not started over: a stalled server is stalled for all its clients (HEARTBEAT_STEPS).
        if (err.code === "timeout") this._restartSocket(HEARTBEAT_STEPS, "heartbeat timeout");
      });
    }, this._pingInterval);
    this._heartbeat.unref?.();
  }

  _stopHeartbeat() {
    clearInterval(this._heartbeat);
    this._heartbeat = null;
  }

  _sendFrame(frame) {
    const ws = this._ws;
    if (!ws || ws.readyState !== 1) return false;
    ws.send(encodeMsgpack(frame));
    return true;
  }

  // ---- requests in flight -------------------------------------------------------------------------------

  _newId() {
    // A per-client random prefix: a reloaded page must not reuse an old roll's id (its idempotency key).
    return `${this._idPrefix}-${this._nextId++}`;
  }

  _request(frame, { timeout } = {}) {
    if (this.status === "closed") {
      return Promise.reject(new TableRelayError("closed", "The connection is closed."));
    }
    return new Promise((resolve, reject) => {
      let timer = null;
      const done = (fn) => (value) => {
        clearTimeout(timer);
        fn(value);
      };
      const request = {
        frame,
        sent: false,
        acked: false,
        retries: 0,
        sentAt: 0,
        resolve: done(resolve),
        reject: done(reject),
      };
      if (timeout) {
        timer = setTimeout(() => {
          this._pending.delete(frame.id);
          reject(new TableRelayError("timeout", `No answer from the server within ${timeout} ms.`, { id: frame.id }));
        }, timeout);
        timer.unref?.();
      }
      this._pending.set(frame.id, request);
      if (this._welcomedOnSocket) this._sendRequest(request);
    });
  }

  _sendRequest(request) {
    request.sentAt = Date.now();
    request.sent = this._sendFrame(request.frame);
  }

  _flush() {
    for (const request of this._pending.values()) {
      if (!request.sent) this._sendRequest(request);
    }
  }

  /** Round trip to the server; resolves with the milliseconds it took. */
  ping({ timeout = 10_000 } = {}) {
    return this._request({ t: "ping", id: this._newId() }, { timeout });
  }
}
