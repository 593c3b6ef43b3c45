// tablerelay: a thin client for the tablerelay dice relay (wire protocol version 1).
//
// One ES module for browsers and Node 20+. The only dependency is @msgpack/msgpack; in a browser map the
// bare specifier with an import map, in Node it resolves from node_modules. Types: tablerelay.d.ts.
//
//   import { TableRelay } from "tablerelay";
//   const table = new TableRelay("wss://relay.example/ws", token);
//   table.on("roll", (event) => console.log(event.actor.name, event.result?.text ?? "(sealed)"));
//   await table.connect();
//   const event = await table.roll({ system: "drawsteel.power", characteristic: 2, edges: 1 });
//
// Every event is checked against the server's Ed25519 signature (docs/verification.md): `event.verified`
// is true, or false with `event.verifyError` saying why. Where WebCrypto lacks Ed25519 the client imports
// @noble/ed25519 (map it too in a browser's import map).

import { Decoder, Encoder } from "@msgpack/msgpack";

export const PROTOCOL_VERSION = 1;

/** Event kinds the server sends (`event.kind`). */
export const EVENT_KINDS = Object.freeze(["roll", "reveal", "resource", "join", "leave"]);

// Close codes after which reconnecting cannot help: the server refused who we are or what we sent.
// 4001 = first frame was not a hello (a client bug); 4003/4401/4403 = the token was refused.
const FATAL_CLOSE_CODES = new Set([4001, 4003, 4401, 4403]);
// Events that change `state` (members, Fear, Hope).
const STATE_KINDS = new Set(["resource", "join", "leave", "rename", "merge", "kick", "archive"]);
const FATAL_ERROR_CODES = new Set(["unauthorized", "forbidden", "not_found"]);
const NORMAL_CLOSURE = 1000;
const RECENT_EVENTS = 1000; // events kept so acks (also retried ones) can resolve to their event
const RATE_LIMIT_RETRIES = 3; // a request refused as rate_limited is sent again after 0.5 s, 1 s, 2 s

/** An error from the server (`code`, `message`) or from the client itself (`disconnected`, `closed`, `timeout`). */
export class TableRelayError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {{ id?: string, closeCode?: number }} [details]
   */
  constructor(code, message, details = {}) {
    super(message);
    this.name = "TableRelayError";
    this.code = code;
    if (details.id !== undefined) this.id = details.id;
    if (details.closeCode !== undefined) this.closeCode = details.closeCode;
  }
}

// Ints that do not fit an int32/uint32 travel as MessagePack int64/uint64. Decoding those as BigInt keeps
// them exact; narrowing the ones that fit a double back to `number` keeps ordinary values (timestamps,
// totals) plain numbers, so only an integer outside ±(2^53 − 1) is ever a BigInt.
const decoder = new Decoder({ useBigInt64: true });
const encoder = new Encoder({ useBigInt64: true, ignoreUndefined: true });

/** Decode one MessagePack value, with integers narrowed as described above. */
export function decodeMsgpack(bytes) {
  return narrowIntegers(decoder.decode(bytes));
}

/** Encode one value as MessagePack; `bigint` values are sent exactly as int64/uint64. */
export function encodeMsgpack(value) {
  return encoder.encode(value);
}

function narrowIntegers(value) {
  if (typeof value === "bigint") {
    return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(value)
      : value;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = narrowIntegers(value[i]);
    return value;
  }
  if (value !== null && typeof value === "object" && !ArrayBuffer.isView(value)) {
    for (const key of Object.keys(value)) value[key] = narrowIntegers(value[key]);
  }
  return value;
}

function toHex(buffer) {
  const bytes = new Uint8Array(buffer);
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

/**
 * Check a reveal: does SHA-256(nonce ‖ blob) equal the hex commitment published with the sealed roll?
 * @param {Uint8Array} nonce
 * @param {Uint8Array} blob
 * @param {string} commitment
 * @returns {Promise<boolean>}
 */
export async function verifyCommitment(nonce, blob, commitment) {
  if (!(nonce instanceof Uint8Array) || !(blob instanceof Uint8Array) || typeof commitment !== "string") {
    return false;
  }
  const joined = new Uint8Array(nonce.length + blob.length);
  joined.set(nonce, 0);
  joined.set(blob, nonce.length);
  const digest = await globalThis.crypto.subtle.digest("SHA-256", joined);
  return toHex(digest) === commitment.toLowerCase();
}

// ---- signatures (spec/signing.md) -----------------------------------------------------------------------

const textEncoder = new TextEncoder();
const SIGNING_DOMAIN = textEncoder.encode("tablerelay-event-v1\0");
/** Keys an event carries that its signature does not cover. */
export const UNSIGNED_KEYS = Object.freeze(["t", "sig", "kid", "foundry", "roll20"]);
/** Fields this client adds to the events it delivers; never part of what the server signed. */
export const CLIENT_FIELDS = Object.freeze(["verified", "verifyError", "roll", "commitmentVerified"]);
const LEFT_OUT = new Set([...UNSIGNED_KEYS, ...CLIENT_FIELDS]);

class ByteWriter {
  constructor() {
    this.buffer = new Uint8Array(256);
    this.length = 0;
  }
  reserve(n) {
    if (this.length + n <= this.buffer.length) return;
    const grown = new Uint8Array(Math.max(this.buffer.length * 2, this.length + n));
    grown.set(this.buffer.subarray(0, this.length));
    this.buffer = grown;
  }
  byte(b) {
    this.reserve(1);
    this.buffer[this.length++] = b;
  }
  bytes(data) {
    this.reserve(data.length);
    this.buffer.set(data, this.length);
    this.length += data.length;
  }
  // Big-endian, `size` bytes: every length and integer MessagePack writes after its type byte.
  uint(value, size) {
    let v = BigInt(value);
    const out = new Uint8Array(size);
    for (let i = size - 1; i >= 0; i--) {
      out[i] = Number(v & 0xffn);
      v >>= 8n;
    }
    this.bytes(out);
  }
  result() {
    return this.buffer.slice(0, this.length);
  }
}

function writeInteger(out, value) {
  const n = BigInt(value);
  if (n >= 0n) {
    if (n < 0x80n) return out.byte(Number(n));
    if (n <= 0xffn) return out.byte(0xcc), out.uint(n, 1);
    if (n <= 0xffffn) return out.byte(0xcd), out.uint(n, 2);
    if (n <= 0xffffffffn) return out.byte(0xce), out.uint(n, 4);
    if (n <= 0xffffffffffffffffn) return out.byte(0xcf), out.uint(n, 8);
  } else {
    if (n >= -32n) return out.byte(Number(n & 0xffn));
    if (n >= -0x80n) return out.byte(0xd0), out.uint(n & 0xffn, 1);
    if (n >= -0x8000n) return out.byte(0xd1), out.uint(n & 0xffffn, 2);
    if (n >= -0x80000000n) return out.byte(0xd2), out.uint(n & 0xffffffffn, 4);
    if (n >= -0x8000000000000000n) return out.byte(0xd3), out.uint(n & 0xffffffffffffffffn, 8);
  }
  throw new TypeError(`the integer ${n} does not fit MessagePack`);
}

function writeLength(out, n, fix, fixMax, codes) {
  if (fix !== null && n <= fixMax) return out.byte(fix | n);
  const [c8, c16, c32] = codes;
  if (c8 !== null && n <= 0xff) return out.byte(c8), out.uint(n, 1);
  if (n <= 0xffff) return out.byte(c16), out.uint(n, 2);
  return out.byte(c32), out.uint(n, 4);
}

function compareBytes(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

function writeCanonical(out, value, leaveOut) {
  if (value === null) return out.byte(0xc0);
  if (value === true) return out.byte(0xc3);
  if (value === false) return out.byte(0xc2);
  if (typeof value === "bigint") return writeInteger(out, value);
  if (typeof value === "number") {
    if (!Number.isInteger(value)) throw new TypeError("an event may not hold a number with a fraction");
    return writeInteger(out, value);
  }
  if (typeof value === "string") {
    const data = textEncoder.encode(value);
    writeLength(out, data.length, 0xa0, 31, [0xd9, 0xda, 0xdb]);
    return out.bytes(data);
  }
  if (value instanceof Uint8Array) {
    writeLength(out, value.length, null, 0, [0xc4, 0xc5, 0xc6]);
    return out.bytes(value);
  }
  if (Array.isArray(value)) {
    writeLength(out, value.length, 0x90, 15, [null, 0xdc, 0xdd]);
    for (const item of value) writeCanonical(out, item, null);
    return undefined;
  }
  if (typeof value === "object") {
    // Keys in the order of their UTF-8 bytes (JavaScript's own string order is by UTF-16 units).
    const entries = Object.keys(value)
      .filter((key) => !(leaveOut && leaveOut.has(key)) && value[key] !== undefined)
      .map((key) => [textEncoder.encode(key), key])
      .sort((a, b) => compareBytes(a[0], b[0]));
    writeLength(out, entries.length, 0x80, 15, [null, 0xde, 0xdf]);
    for (const [encoded, key] of entries) {
      writeLength(out, encoded.length, 0xa0, 31, [0xd9, 0xda, 0xdb]);
      out.bytes(encoded);
      writeCanonical(out, value[key], null);
    }
    return undefined;
  }
  throw new TypeError(`an event may not hold a ${typeof value}`);
}

/**
 * The canonical MessagePack of a value (spec/signing.md): map keys in the order of their UTF-8 bytes,
 * every integer in its shortest form, no numbers with a fraction (a TypeError).
 * @param {unknown} value
 * @returns {Uint8Array}
 */
export function canonicalEncode(value) {
  const out = new ByteWriter();
  writeCanonical(out, value, null);
  return out.result();
}

/**
 * The bytes an event's signature is made over: the domain, the room id, and the canonical encoding of
 * the event without `t`, `sig`, `kid`, `foundry`, `roll20` and the fields this client added.
 * @param {object} event an event as received (live, or from a welcome's history)
 * @param {string} roomId the room it was received in
 * @returns {Uint8Array}
 */
export function signedBytes(event, roomId) {
  const out = new ByteWriter();
  out.bytes(SIGNING_DOMAIN);
  out.bytes(textEncoder.encode(String(roomId)));
  out.byte(0);
  writeCanonical(out, event, LEFT_OUT);
  return out.result();
}

const textDecoder = new TextDecoder("utf-8", { fatal: true });

/**
 * What `signedBytes` made, read back: the room id and the event, or null when the bytes are not of that form
 * (the domain, the room id, a zero byte, the canonical event).
 * @param {Uint8Array} bytes
 * @returns {{ room: string, event: object } | null}
 */
export function openSignedBytes(bytes) {
  if (bytes.length <= SIGNING_DOMAIN.length || SIGNING_DOMAIN.some((b, i) => bytes[i] !== b)) return null;
  const end = bytes.indexOf(0, SIGNING_DOMAIN.length);
  if (end < 0) return null;
  try {
    const room = textDecoder.decode(bytes.subarray(SIGNING_DOMAIN.length, end));
    const event = decodeMsgpack(bytes.subarray(end + 1));
    if (event === null || typeof event !== "object" || Array.isArray(event)) return null;
    return { room, event };
  } catch {
    return null;
  }
}

/**
 * The relay's page of one event, `/events/ROOM/SEQ` on the host of its socket's address: the event as the
 * relay stored it (as the viewer may see it), its signature checked in the browser.
 * @param {string} relayUrl the relay's ws(s) address
 * @param {string} roomId
 * @param {number} seq
 */
export function eventPageUrl(relayUrl, roomId, seq) {
  const url = new URL(relayUrl);
  url.protocol = url.protocol === "wss:" ? "https:" : "http:";
  url.pathname = `/events/${encodeURIComponent(roomId)}/${seq}`;
  url.search = "";
  url.hash = "";
  return url.href;
}

function fromBase64Url(text) {
  const b64 = text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4);
  const binary = atob(b64);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/**
 * Public keys by kid from a JWK Set (`{keys: [...]}`), a list of JWKs, or the result of an earlier call.
 * A JWK whose kid is not the first 16 hex digits of SHA-256 over its key is left out.
 * @returns {Promise<Map<string, {x: Uint8Array, retired?: number}>>}
 */
export async function importKeys(keys) {
  if (keys instanceof Map) return keys;
  const list = Array.isArray(keys) ? keys : Array.isArray(keys?.keys) ? keys.keys : [];
  const out = new Map();
  for (const jwk of list) {
    if (jwk?.kty !== "OKP" || jwk?.crv !== "Ed25519" || typeof jwk.x !== "string") continue;
    let x;
    try {
      x = fromBase64Url(jwk.x);
    } catch {
      continue;
    }
    if (x.length !== 32) continue;
    const kid = toHex(await globalThis.crypto.subtle.digest("SHA-256", x)).slice(0, 16);
    if (kid !== jwk.kid) continue;
    out.set(kid, jwk.retired === undefined ? { x } : { x, retired: jwk.retired });
  }
  return out;
}

// RFC 8032's first test key: importing it tells whether this runtime's WebCrypto has Ed25519.
const PROBE_KEY = new Uint8Array([
  0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a, 0x0e, 0xe1, 0x72,
  0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a,
]);
let webCryptoEd25519 = null; // a promise of true/false, made on first use
let noble = null; // a promise of the @noble/ed25519 module, loaded only where WebCrypto lacks Ed25519
const cryptoKeys = new Map(); // hex public key -> CryptoKey promise

function hasWebCryptoEd25519() {
  webCryptoEd25519 ??= globalThis.crypto.subtle
    .importKey("raw", PROBE_KEY, { name: "Ed25519" }, false, ["verify"])
    .then(
      () => true,
      () => false,
    );
  return webCryptoEd25519;
}

/**
 * Ed25519: is `signature` by `publicKey` over `message`? WebCrypto where the runtime has it (Node 20,
 * current Chromium), else `@noble/ed25519`, imported the first time it is needed.
 */
export async function ed25519Verify(publicKey, signature, message) {
  if (await hasWebCryptoEd25519()) {
    const id = toHex(publicKey);
    let key = cryptoKeys.get(id);
    if (!key) {
      key = globalThis.crypto.subtle.importKey("raw", publicKey, { name: "Ed25519" }, false, ["verify"]);
      cryptoKeys.set(id, key);
    }
    return globalThis.crypto.subtle.verify({ name: "Ed25519" }, await key, signature, message);
  }
  noble ??= import("@noble/ed25519");
  const ed = await noble;
  return ed.verifyAsync(signature, message, publicKey);
}

/**
 * Check one event's signature. Resolves with `{verified: true}`, or `{verified: false, reason}`.
 * @param {object} event an event as received (`kid` and `sig` as the server sent them)
 * @param {string} roomId the room it belongs to
 * @param {object|object[]|Map} keys the server's JWK Set (the welcome's `keys`, or
 *   /.well-known/tablerelay-keys.json), a list of JWKs, or the Map `importKeys` returns
 */
export async function verifyEvent(event, roomId, keys) {
  if (!globalThis.crypto?.subtle) {
    // Browsers hide WebCrypto on plain http (other than localhost); noble needs its SHA-512 too.
    return { verified: false, reason: "Signatures cannot be checked on this page: WebCrypto is unavailable (use https)." };
  }
  const { kid, sig } = event ?? {};
  if (typeof kid !== "string" || !(sig instanceof Uint8Array)) {
    return { verified: false, reason: "The event is not signed." };
  }
  if (sig.length !== 64) return { verified: false, reason: `The signature is ${sig.length} bytes, not 64.` };
  let key;
  try {
    key = (await importKeys(keys)).get(kid);
  } catch (err) {
    return { verified: false, reason: `The server's keys could not be read: ${err?.message ?? err}.` };
  }
  if (!key) return { verified: false, reason: `The event's key ${kid} is not one of the server's keys.` };
  let message;
  try {
    message = signedBytes(event, roomId);
  } catch (err) {
    return { verified: false, reason: `The event cannot be encoded canonically: ${err.message}.` };
  }
  let ok = false;
  try {
    ok = await ed25519Verify(key.x, sig, message);
  } catch (err) {
    return { verified: false, reason: `The signature could not be checked: ${err?.message ?? err}.` };
  }
  return ok
    ? { verified: true }
    : { verified: false, reason: "The signature does not match: the event was changed, or is from another room." };
}

function randomPrefix() {
  const bytes = new Uint8Array(6);
  globalThis.crypto.getRandomValues(bytes);
  return toHex(bytes);
}

/**
 * A connection to one room of a tablerelay server. Reconnects by itself and resumes from the last event
 * it saw, so listeners receive every event exactly once, in seq order.
 */
export class TableRelay {
  /**
   * @param {string | string[]} url the server's WebSocket address, e.g. "wss://relay.example/ws", or the
   *   addresses of several relay nodes of one cluster: each reconnect tries the next one (spec/cluster.md)
   * @param {string} token a room token (GM, player invite, spectator, or a session token)
   * @param {import("./tablerelay.d.ts").TableRelayOptions} [options]
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
    this._WebSocket = WebSocketImpl;
    this._reconnect = options.reconnect !== false;
    this._minDelay = options.minDelay ?? 250;
    this._maxDelay = options.maxDelay ?? 10_000;
    this._pingInterval = options.pingInterval ?? 25_000;
    this._pingTimeout = options.pingTimeout ?? 10_000;
    this._verify = options.verify !== false;
    // Keys to trust instead of the ones the server announces in its welcome (pinned, e.g. fetched once
    // from /.well-known/tablerelay-keys.json of the server you mean).
    this._pinnedKeys = options.keys ?? null;
    this._keyTable = null;
    /** The server's published keys, from the last welcome (a JWK list). */
    this.keys = [];

    /** @type {"idle"|"connecting"|"open"|"reconnecting"|"closed"} */
    this.status = "idle";
    this.room = null;
    this.you = null;
    /** The session token from the last welcome: it rejoins as the same participant. */
    this.session = options.session ?? null;
    this.epoch = null;
    /** The seq of the last event delivered to listeners. */
    this.seq = 0;
    /** The room's state, kept current from welcomes and resource/join/leave events. */
    this.state = { fear: 0, hope: {}, members: [] };

    this._listeners = new Map();
    this._ws = null;
    this._attempt = 0;
    this._timer = null;
    this._heartbeat = null;
    this._welcomed = false;
    this._chain = Promise.resolve();
    this._idPrefix = randomPrefix();
    this._nextId = 1;
    this._pending = new Map(); // request id -> request
    this._awaitingEvent = new Map(); // seq -> requests acked whose event has not arrived yet
    this._recent = new Map(); // seq -> event, the last RECENT_EVENTS events
    this._commitments = new Map(); // seq of a sealed roll -> its commitment
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
    if (this.status === "closed") return;
    if (FATAL_CLOSE_CODES.has(code)) {
      if (this._dropStaleSession()) {
        this._open();
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
    this._setStatus("reconnecting");
    const ceiling = Math.min(this._maxDelay, this._minDelay * 2 ** this._attempt);
    const delay = ceiling / 2 + Math.random() * (ceiling / 2); // jitter spreads a room's reconnects apart
    this._attempt++;
    this._rotate();
    this._timer = setTimeout(() => this._open(), delay);
  }

  /** The next address of `urls`: a node that died takes its sockets with it, so the retry goes elsewhere. */
  _rotate() {
    if (this.urls.length < 2) return;
    this.url = this.urls[(this.urls.indexOf(this.url) + 1) % this.urls.length];
  }

  /** Drop the current socket and reconnect at once (resuming); e.g. when the page comes back online. */
  reconnectNow() {
    if (this.status === "closed" || this.status === "idle") return;
    clearTimeout(this._timer);
    this._attempt = 0;
    const ws = this._ws;
    if (ws) {
      ws.close(4000, "client reconnect");
      this._afterClose(ws, 4000, "client reconnect");
    } else {
      this._open();
    }
  }

  _startHeartbeat() {
    this._stopHeartbeat();
    if (!this._pingInterval) return;
    this._heartbeat = setInterval(() => {
      this.ping({ timeout: this._pingTimeout }).catch((err) => {
        if (err.code === "timeout") this.reconnectNow();
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

  // ---- receiving ----------------------------------------------------------------------------------------

  _receive(data) {
    let frame;
    try {
      if (typeof data === "string") throw new Error("a text frame");
      frame = decodeMsgpack(data instanceof ArrayBuffer ? new Uint8Array(data) : data);
      if (frame === null || typeof frame !== "object" || typeof frame.t !== "string") {
        throw new Error("a frame that is not a map with a type");
      }
    } catch (err) {
      this._emit("error", new TableRelayError("bad_frame", `The server sent ${err.message}.`));
      return;
    }
    // Reveal checks are async (WebCrypto); chaining keeps delivery in arrival (= seq) order.
    this._chain = this._chain
      .then(() => this._handle(frame))
      .catch((err) => this._emit("error", err instanceof TableRelayError ? err : new TableRelayError("internal", String(err?.message ?? err))));
  }

  async _handle(frame) {
    if (this.status === "closed") return;
    switch (frame.t) {
      case "welcome":
        return this._onWelcome(frame);
      case "event":
        return this._onEvent(frame, { replay: false });
      case "ack":
        return this._onAck(frame);
      case "pong":
        return this._settle(frame.id, (request) => request.resolve(Date.now() - request.sentAt));
      case "invites":
        return this._settle(frame.id, (request) => request.resolve(frame));
      case "error":
        return this._onError(frame);
      default:
        return undefined; // newer server, newer frame: ignore what we do not know
    }
  }

  async _onWelcome(frame) {
    const fresh = !(frame.recovered === true && this.epoch !== null && frame.epoch === this.epoch);
    this.room = frame.room;
    this.you = frame.you;
    this.keys = Array.isArray(frame.keys) ? frame.keys : [];
    if (this._verify) {
      // Imported once per welcome; verifyEvent explains any failure per event.
      this._keyTable = await importKeys(this._pinnedKeys ?? this.keys).catch(() => this._pinnedKeys ?? this.keys);
    }
    if (frame.session) this.session = frame.session;
    this._welcomed = true;
    this._welcomedOnSocket = true;
    this._attempt = 0;
    if (fresh) {
      // A first welcome, or a resume the server could not fill: start over from its state and history.
      this.epoch = frame.epoch;
      this._recent.clear();
      this._commitments.clear();
      this.state = {
        fear: frame.state?.fear ?? 0,
        hope: { ...(frame.state?.hope ?? {}) },
        members: [...(frame.state?.members ?? [])],
      };
      this.seq = 0;
    }
    this._setStatus("open");
    this._emit("welcome", frame, { fresh });
    for (const event of frame.history ?? []) {
      // The welcome's state already includes a fresh history's effects; a resume gap is news.
      await this._onEvent(event, { replay: fresh });
    }
    if (this.status === "closed" || !this._welcomedOnSocket) return; // a gap in the history: resuming
    this.seq = Math.max(this.seq, frame.seq ?? 0);
    // Acked before a fresh start and not in its history: the event is stored, but we will never see it.
    for (const [seq, list] of this._awaitingEvent) {
      if (seq > this.seq) continue;
      this._awaitingEvent.delete(seq);
      for (const request of list) request.resolve(this._recent.get(seq) ?? { seq });
    }
    // The welcome's state is the room as of its seq, whatever the history held.
    this.state = {
      fear: frame.state?.fear ?? 0,
      hope: { ...(frame.state?.hope ?? {}) },
      members: [...(frame.state?.members ?? [])],
    };
    if (frame.archived === true) this.state.archived = true;
    this._emit("state", this.state);
    this._startHeartbeat();
    this._flush();
    this._resolveReady?.(frame);
    this._resolveReady = null;
    this._rejectReady = null;
  }

  async _onEvent(event, info) {
    if (typeof event.seq !== "number") return;
    if (event.seq <= this.seq) return; // already delivered (a resend or an overlapping resume)
    if (!info.replay && this._welcomedOnSocket && event.seq !== this.seq + 1 && this.seq !== 0) {
      // A hole in the stream: resume from the last seq we have instead of delivering out of order.
      this._emit("error", new TableRelayError("gap", `Expected event ${this.seq + 1}, got ${event.seq}; resuming.`));
      this.reconnectNow();
      return;
    }
    // Sealed placeholders carry the commitment, and so do hidden rolls sent in full to their audience.
    if (event.kind === "roll" && typeof event.commitment === "string") {
      this._commitments.set(event.seq, event.commitment);
    }
    if (this._verify) {
      // Before anything is added to the event: the signature covers the event as the server sent it.
      const outcome = await verifyEvent(event, this.room?.id, this._keyTable ?? new Map());
      event.verified = outcome.verified;
      if (!outcome.verified) event.verifyError = outcome.reason;
    }
    if (event.kind === "reveal") await this._checkReveal(event);
    this.seq = event.seq;
    this._remember(event);
    if (!info.replay) this._applyToState(event);
    this._emit(event.kind, event, info);
    this._emit("event", event, info);
    if (!info.replay && STATE_KINDS.has(event.kind)) {
      this._emit("state", this.state);
    }
    const waiting = this._awaitingEvent.get(event.seq);
    if (waiting) {
      this._awaitingEvent.delete(event.seq);
      for (const request of waiting) request.resolve(event);
    }
  }

  async _checkReveal(event) {
    const commitment = this._commitments.get(event.of);
    let roll = null;
    try {
      roll = event.blob instanceof Uint8Array ? decodeMsgpack(event.blob) : null;
    } catch {
      roll = null;
    }
    event.roll = roll;
    if (commitment === undefined) {
      // We never saw the roll's commitment (it predates the history we were given).
      event.commitmentVerified = null;
      return;
    }
    let ok = await verifyCommitment(event.nonce, event.blob, commitment);
    // The blob must also be the roll it claims to open.
    if (ok && roll && typeof roll === "object" && "seq" in roll && roll.seq !== event.of) ok = false;
    event.commitmentVerified = ok;
  }

  _remember(event) {
    this._recent.set(event.seq, event);
    if (this._recent.size > RECENT_EVENTS) this._recent.delete(this._recent.keys().next().value);
  }

  _applyToState(event) {
    const state = this.state;
    if (event.kind === "resource") {
      if (event.name === "fear") state.fear = event.value;
      else if (event.name === "hope" && event.participant != null) {
        state.hope = { ...state.hope, [event.participant]: event.value };
      }
    } else if (event.kind === "join" || event.kind === "leave") {
      const member = event.member ?? event.actor;
      if (!member) return;
      const others = state.members.filter((m) => m.id !== member.id);
      state.members = event.kind === "join" ? [...others, member] : others;
    } else if (event.kind === "rename" && event.member) {
      state.members = state.members.map((m) => (m.id === event.member.id ? event.member : m));
      if (this.you?.id === event.member.id) this.you = event.member;
    } else if (event.kind === "kick" && event.member) {
      state.members = state.members.filter((m) => m.id !== event.member.id);
      const { [event.member.id]: _gone, ...hope } = state.hope;
      state.hope = hope;
    } else if (event.kind === "merge" && event.merged && event.into) {
      state.members = state.members.filter((m) => m.id !== event.merged.id);
      const { [event.merged.id]: _gone, ...hope } = state.hope;
      state.hope = event.hope == null ? hope : { ...hope, [event.into.id]: event.hope };
    } else if (event.kind === "archive") {
      state.members = [];
      state.archived = true;
    }
  }

  _onAck(frame) {
    const request = this._pending.get(frame.id);
    if (!request) return;
    request.acked = true;
    this._pending.delete(frame.id);
    const event = this._recent.get(frame.seq);
    if (event) {
      request.resolve(event);
    } else if (frame.seq <= this.seq) {
      // Acked long ago and no longer remembered (a retry of a very old roll): all we know is its seq.
      request.resolve({ seq: frame.seq });
    } else {
      const list = this._awaitingEvent.get(frame.seq) ?? [];
      list.push(request);
      this._awaitingEvent.set(frame.seq, list);
    }
  }

  _onError(frame) {
    const error = new TableRelayError(frame.code ?? "internal", frame.message ?? "The server reported an error.", {
      id: frame.id,
    });
    const request = frame.id != null ? this._pending.get(frame.id) : undefined;
    if (request && error.code === "rate_limited" && request.retries < RATE_LIMIT_RETRIES) {
      // Refused before anything happened, so sending it again is safe; wait a little longer each time.
      request.retries++;
      request.sent = false;
      const timer = setTimeout(() => {
        if (this._pending.get(frame.id) === request && this._welcomedOnSocket && !request.sent) this._sendRequest(request);
      }, 250 * 2 ** request.retries);
      timer.unref?.();
      return;
    }
    if (frame.id != null && this._settle(frame.id, (request) => request.reject(error))) return;
    if (!this._welcomedOnSocket && FATAL_ERROR_CODES.has(error.code)) {
      if (this._dropStaleSession()) {
        this.reconnectNow();
        return;
      }
      this._emit("error", error);
      this._stop(error);
      return;
    }
    this._emit("error", error);
  }

  _settle(id, fn) {
    const request = this._pending.get(id);
    if (!request) return false;
    this._pending.delete(id);
    fn(request);
    return true;
  }

  // ---- requests -----------------------------------------------------------------------------------------

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

  /**
   * Roll: resolves with the stored event (the full roll, or a sealed placeholder for a blind roll you are
   * not the GM of). Rejects with a TableRelayError carrying the server's code and message.
   * If the connection drops before the answer, the roll is sent again with the same id after the resume,
   * and the server answers with the first result: never a second roll.
   */
  roll(intent, { visibility = "public", label, id } = {}) {
    const frame = { t: "roll", id: id ?? this._newId(), intent, visibility };
    if (label !== undefined && label !== null && label !== "") frame.label = label;
    return this._request(frame);
  }

  /** Reveal a sealed roll by its seq; resolves with the reveal event. */
  reveal(seq) {
    return this._request({ t: "reveal", id: this._newId(), seq });
  }

  /**
   * Change Fear or Hope: `resource("fear", "gain", 1)`, `resource("hope", "spend", 1, { participant })`.
   * Resolves with the resource event.
   */
  resource(name, op, n, { participant } = {}) {
    const frame = { t: "resource", id: this._newId(), name, op, n };
    if (participant !== undefined && participant !== null) frame.participant = participant;
    return this._request(frame);
  }

  // ---- campaign management (GM only; docs/campaigns.md) --------------------------------------------------

  /** Rename a participant; resolves with the `rename` event. */
  rename(participant, name) {
    return this._request({ t: "rename", id: this._newId(), participant, name });
  }

  /** Fold `participant` into `into` (Hope adds up to the cap); resolves with the `merge` event. */
  merge(participant, into) {
    return this._request({ t: "merge", id: this._newId(), participant, into });
  }

  /** Remove a participant: its sockets close (4003) and its tokens stop working. Resolves with the `kick` event. */
  kick(participant, { reason } = {}) {
    const frame = { t: "kick", id: this._newId(), participant };
    if (reason) frame.reason = reason;
    return this._request(frame);
  }

  /**
   * The room's invite tokens and links: `{generation, player, spectator, links: {player, spectator}}`. With
   * `rotate: true`, new invites replace the old ones first (the old links stop working).
   */
  invites({ rotate = false } = {}) {
    return this._request({ t: "invites", id: this._newId(), rotate });
  }

  /** Archive the room: read-only from now on. Resolves with the `archive` event. */
  archive() {
    return this._request({ t: "archive", id: this._newId() });
  }

  /** Round trip to the server; resolves with the milliseconds it took. */
  ping({ timeout = 10_000 } = {}) {
    return this._request({ t: "ping", id: this._newId() }, { timeout });
  }

  /** The last events seen (up to 1000), by seq. */
  event(seq) {
    return this._recent.get(seq);
  }
}

export default TableRelay;
