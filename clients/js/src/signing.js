// The signed form of an event (spec/signing.md): the canonical MessagePack encoding and the bytes a
// signature is made over, and those bytes read back.

import { decodeMsgpack } from "./protocol.js";

const textEncoder = new TextEncoder();
const SIGNING_DOMAIN = textEncoder.encode("tablerelay-event-v1\0");
/** Keys an event carries that its signature does not cover. */
export const UNSIGNED_KEYS = Object.freeze(["t", "sig", "kid", "foundry", "roll20"]);
/** Fields this client adds to the events it delivers; never part of what the server signed. */
export const CLIENT_FIELDS = Object.freeze(["verified", "verifyError", "roll", "commitmentVerified", "verdict", "verdictReason"]);
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
