// Checking what the relay sends: each event's Ed25519 signature (docs/verification.md) over its signed form
// (signing.js), with WebCrypto where the runtime has Ed25519 and @noble/ed25519 where it does not, the
// server's published keys, and a reveal against the commitment of the roll it opens.

import { decodeMsgpack, toHex } from "./protocol.js";
import { signedBytes } from "./signing.js";

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

/**
 * Open a reveal event in place: `event.roll` is the roll its blob holds (or null), and
 * `event.commitmentVerified` whether the blob matches `commitment`, the one published with the sealed roll
 * (null when that roll's commitment was never seen: it predates the history this client was given).
 * @param {object} event a reveal event
 * @param {string|undefined} commitment
 */
export async function checkReveal(event, commitment) {
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
