// Signed events from a real relay: every event verifies, in the client and with @noble/ed25519 directly;
// any change to a signed field, the kid or the room fails; a client pinned to other keys says why.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import * as ed from "@noble/ed25519";
import { CLIENT_FIELDS, UNSIGNED_KEYS, canonicalEncode, decodeMsgpack, encodeMsgpack, importKeys, openSignedBytes, signedBytes, verifyEvent } from "../tablerelay.js";
import { closeAll, connect, createRoom, record, server, until } from "./helpers.mjs";

after(closeAll);

const power = { system: "drawsteel.power", characteristic: 2, edges: 1 };
const httpBase = (process.env.TABLERELAY_TEST_HTTP ?? server.url.replace(/^ws/, "http").replace(/\/ws$/, "")).replace(/\/$/, "");

async function publishedKeys() {
  const response = await fetch(`${httpBase}/.well-known/tablerelay-keys.json`);
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("access-control-allow-origin"), "*");
  return response.json();
}

/** A deep copy through MessagePack, so bytes stay bytes. */
const copy = (value) => decodeMsgpack(encodeMsgpack(value));

/** [path, changed value] for every leaf of `value`: one byte or bit of it changed. */
function* mutations(value, path = []) {
  if (value instanceof Uint8Array) {
    const changed = Uint8Array.from(value);
    changed[0] ^= 1;
    yield [path, changed];
  } else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) yield* mutations(value[i], [...path, i]);
  } else if (value !== null && typeof value === "object") {
    for (const key of Object.keys(value)) yield* mutations(value[key], [...path, key]);
  } else if (typeof value === "boolean") {
    yield [path, !value];
  } else if (typeof value === "number") {
    yield [path, value ^ 1];
  } else if (typeof value === "string") {
    yield [path, value.length ? value.slice(0, -1) + String.fromCharCode(value.charCodeAt(value.length - 1) ^ 1) : "x"];
  } else if (value === null) {
    yield [path, 0];
  }
}

function changed(event, path, value) {
  const out = copy(event);
  let target = out;
  for (const step of path.slice(0, -1)) target = target[step];
  target[path[path.length - 1]] = value;
  return out;
}

/** What the server signed: the event without its unsigned keys and the fields the client added (a roll's verdict). */
const signedPart = (event) =>
  Object.fromEntries(Object.entries(event).filter(([k]) => ![...UNSIGNED_KEYS, ...CLIENT_FIELDS].includes(k)));

describe("signed events", () => {
  test("every event a client receives verifies, history and live, and the welcome carries the published keys", async () => {
    const room = createRoom();
    const keys = await publishedKeys();
    const gm = await connect(room.gm, { name: "GM" });
    assert.deepEqual(gm.keys, keys.keys);
    const spectator = await connect(room.spectator);
    const seen = record(spectator);
    const hidden = await gm.roll({ system: "daggerheart.duality", modifier: 1 }, { visibility: "gm", label: "Secret" });
    await gm.roll(power, { label: "Open" });
    await gm.roll({ system: "dice", formula: "{1d6/4, 2d4/3}kh1" });
    await gm.reveal(hidden.seq);
    await until(() => seen.some((e) => e.kind === "reveal"), 8000, "the reveal");
    const late = await connect(room.spectator);
    const all = [...seen, ...[...Array(late.seq + 1).keys()].map((s) => late.event(s)).filter(Boolean)];
    assert.ok(all.length >= 8, `only ${all.length} events`);
    for (const event of all) {
      assert.equal(event.verified, true, `${event.seq} ${event.kind}: ${event.verifyError}`);
      assert.equal(event.verifyError, undefined);
      assert.equal(event.sig.length, 64);
      // The same check with @noble/ed25519 directly, over the bytes the client exposes.
      const jwk = keys.keys.find((k) => k.kid === event.kid);
      const publicKey = (await importKeys([jwk])).get(event.kid).x;
      assert.equal(await ed.verifyAsync(event.sig, signedBytes(event, room.room), publicKey), true);
    }
    const sealed = seen.find((e) => e.seq === hidden.seq);
    assert.equal(sealed.sealed, true);
    const reveal = seen.find((e) => e.kind === "reveal");
    assert.equal(reveal.commitmentVerified, true, "the commitment check has its own field");
  });

  test("a changed byte in any signed field, another kid, a dropped field or another room fails", async () => {
    const room = createRoom();
    const keys = await publishedKeys();
    const gm = await connect(room.gm);
    const player = await connect(room.player);
    const events = record(player);
    const hidden = await gm.roll(power, { visibility: "gm", label: "Hidden" });
    await gm.roll(power, { visibility: "public", label: "Open" });
    await gm.reveal(hidden.seq);
    await until(() => events.some((e) => e.kind === "reveal"), 8000, "the reveal");
    let tried = 0;
    const fields = new Set();
    for (const event of events.filter((e) => e.kind === "roll" || e.kind === "reveal")) {
      assert.deepEqual(await verifyEvent(event, room.room, keys), { verified: true });
      for (const [path, value] of mutations(signedPart(event))) {
        const outcome = await verifyEvent(changed(event, path, value), room.room, keys);
        assert.equal(outcome.verified, false, `still verifies after changing ${path.join(".")}`);
        assert.match(outcome.reason, /signature does not match|cannot be encoded/);
        fields.add(path[0]);
        tried++;
      }
      for (const key of Object.keys(signedPart(event))) {
        const dropped = copy(event);
        delete dropped[key];
        assert.equal((await verifyEvent(dropped, room.room, keys)).verified, false, `dropping ${key}`);
      }
      const otherKid = await verifyEvent({ ...event, kid: "0000000000000000" }, room.room, keys);
      assert.equal(otherKid.verified, false);
      assert.match(otherKid.reason, /not one of the server's keys/);
      const replayed = await verifyEvent(event, `${room.room}x`, keys);
      assert.equal(replayed.verified, false, "replayed into another room");
      const sig = Uint8Array.from(event.sig);
      sig[63] ^= 1;
      assert.equal((await verifyEvent({ ...event, sig }, room.room, keys)).verified, false);
    }
    assert.ok(tried > 30, `${tried} mutations`);
    // The default relay rolls fair dice: the roll's `fair` map (seed, draws, witnesses...) is signed like the rest.
    assert.ok(fields.has("fair"), `the fields changed: ${[...fields]}`);
  });

  test("a client that trusts other keys marks every event unverified, with a reason", async () => {
    const room = createRoom();
    const privateKey = ed.utils.randomSecretKey();
    const publicKey = await ed.getPublicKeyAsync(privateKey);
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", publicKey));
    const kid = [...digest.slice(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("");
    const x = Buffer.from(publicKey).toString("base64url");
    const stranger = { keys: [{ kty: "OKP", crv: "Ed25519", x, kid, use: "sig", alg: "EdDSA" }] };
    const gm = await connect(room.gm, { keys: stranger });
    const event = await gm.roll(power);
    assert.equal(event.verified, false);
    assert.match(event.verifyError, /not one of the server's keys/);
  });

  test("without WebCrypto Ed25519 the client verifies with @noble/ed25519", async () => {
    const room = createRoom();
    const gm = await connect(room.gm);
    const event = await gm.roll(power);
    const subtle = globalThis.crypto.subtle;
    const importKey = subtle.importKey;
    let refused = 0;
    subtle.importKey = function (format, data, algorithm, ...rest) {
      if ((algorithm?.name ?? algorithm) === "Ed25519") {
        refused++;
        return Promise.reject(new DOMException("Unrecognized name.", "NotSupportedError"));
      }
      return importKey.call(this, format, data, algorithm, ...rest);
    };
    try {
      // A fresh copy of the module that checks signatures, which has not yet found out what this runtime supports.
      const fresh = await import(`../src/verification.js?without-webcrypto-ed25519=${Date.now()}`);
      assert.deepEqual(await fresh.verifyEvent(event, room.room, gm.keys), { verified: true });
      const sig = Uint8Array.from(event.sig);
      sig[0] ^= 1;
      assert.equal((await fresh.verifyEvent({ ...event, sig }, room.room, gm.keys)).verified, false);
    } finally {
      subtle.importKey = importKey;
    }
    assert.ok(refused >= 1, "the WebCrypto path was tried first");
  });

  test("canonicalEncode: keys in UTF-8 byte order, shortest integers, no fractions", () => {
    const hex = (bytes) => Buffer.from(bytes).toString("hex");
    // "é" (c3 a9) sorts after "z" (7a); U+FFFF (ef bf bf) before U+1F600 (f0 9f 98 80), unlike UTF-16.
    assert.equal(hex(canonicalEncode({ z: 1, "é": 2 })), "82a17a01a2c3a902");
    assert.equal(hex(canonicalEncode({ "😀": 1, "\uffff": 2 })), "82a3efbfbf02a4f09f988001");
    const ints = [0, 127, 128, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, -1, -32, -33, -128, -129, -32768, -32769, -(2 ** 31), -(2 ** 31) - 1];
    const encoded = ints.map((n) => hex(canonicalEncode(n)));
    assert.deepEqual(encoded, [
      "00", "7f", "cc80", "ccff", "cd0100", "cdffff", "ce00010000", "ceffffffff", "cf0000000100000000",
      "ff", "e0", "d0df", "d080", "d1ff7f", "d18000", "d2ffff7fff", "d280000000", "d3ffffffff7fffffff",
    ]);
    assert.equal(hex(canonicalEncode(2n ** 63n)), "cf8000000000000000");
    assert.throws(() => canonicalEncode({ total: 1.5 }), /fraction/);
  });

  test("openSignedBytes reads back the room and the event signedBytes wrote; other bytes are null", () => {
    const event = { seq: 3, kind: "roll", result: { dice: [{ faces: 20, value: 7 }] }, sig: new Uint8Array(64), t: 1 };
    const opened = openSignedBytes(signedBytes(event, "room-ü"));
    assert.equal(opened.room, "room-ü");
    assert.deepEqual(opened.event, { seq: 3, kind: "roll", result: { dice: [{ faces: 20, value: 7 }] } }, "what was signed, no more");
    assert.equal(openSignedBytes(new TextEncoder().encode("tablerelay-event-v2\0room\0")), null);
    assert.equal(openSignedBytes(new Uint8Array([1, 2, 3])), null);
  });
});
