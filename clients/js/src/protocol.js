// The wire protocol's ground floor (docs/protocol.md): its version, the event kinds, the client's error, the
// MessagePack codec with integers kept exact, and the relay's page of one event.

import { Decoder, Encoder } from "@msgpack/msgpack";

export const PROTOCOL_VERSION = 1;

/** Event kinds the server sends (`event.kind`). */
export const EVENT_KINDS = Object.freeze(["roll", "reveal", "resource", "join", "leave"]);

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

/** Bytes (an ArrayBuffer or a view) as lowercase hex. */
export function toHex(buffer) {
  const bytes = new Uint8Array(buffer);
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
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
