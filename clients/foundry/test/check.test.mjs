// The viewer's check (scripts/check.mjs) against events signed here with a key of the test's own, as the
// relay signs them (spec/signing.md: the domain, the room id, a zero byte, the canonical event). The module
// suite checks the same against a real relay; this one forges what a relay never would.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { checkMessage, claims, firstShown, matchDice, shownBefore, shownDice, signedFaces } from "../scripts/check.mjs";
import { base64ToBytes, bytesToBase64 } from "../scripts/messages.mjs";
import { encodeMsgpack, importKeys, signedBytes } from "../../js/tablerelay.js";
import { HarnessLocalization } from "./localization.mjs";

const english = new HarnessLocalization({ lang: "en" });
await english.initialize();

/** A verdict's reason as the English mark words it. */
function word(verdict) {
  const { reason } = verdict;
  if (typeof reason === "string" || reason === undefined) return String(reason);
  return reason.data ? english.format(reason.key, reason.data) : english.localize(reason.key);
}

const ROOM = "room-check-1";
const EPOCH = "ep1";

async function relayKey() {
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
  const jwk = await crypto.subtle.exportKey("jwk", pair.publicKey);
  const raw = new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey));
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", raw));
  const kid = [...digest.slice(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("");
  const keys = await importKeys({ keys: [{ kty: "OKP", crv: "Ed25519", x: jwk.x, kid }] });
  /** The stored form of an event signed with this key (as messages.mjs keeps it). */
  const sign = async (event, room = ROOM) => {
    const bytes = signedBytes(event, room);
    const sig = new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, pair.privateKey, bytes));
    return { seq: event.seq, kid, sig: bytesToBase64(sig), signed: bytesToBase64(bytes) };
  };
  return { keys, sign, kid };
}

const actor = (id) => ({ id, name: id, role: "player" });
const die = (faces, value) => ({ faces, value, kept: true });

/** A Foundry Roll as far as the check reads it: its dice terms and their results, and its total. */
function roll(terms, total) {
  const dice = terms.map(([faces, results, extra = {}]) => ({ faces, results: results.map((result) => ({ result, active: true })), ...extra }));
  return { total, dice, terms: dice };
}

function rollEvent(seq, dice, total, more = {}) {
  return { seq, epoch: EPOCH, ts: 1, kind: "roll", actor: actor("p1"), visibility: "public", intent: { system: "dice", formula: "2d20" }, result: { system: "dice", dice, total, formula: "x", text: "x" }, ...more };
}

async function posted(key, event, more = {}) {
  const stored = await key.sign(event);
  return { via: true, room: ROOM, epoch: EPOCH, seq: event.seq, kind: "roll", kid: stored.kid, sig: stored.sig, signed: stored.signed, ...more };
}

describe("a relay roll as it was posted", () => {
  test("verifies when the dice shown are the dice signed", async () => {
    const key = await relayKey();
    const flags = await posted(key, rollEvent(5, [die(20, 17), die(20, 4)], 21));
    const verdict = await checkMessage({ flags, rolls: [roll([[20, [17, 4]]], 21)], authorParticipant: null }, { keys: key.keys });
    assert.deepEqual(verdict, { state: "verified", seqs: [5] });
  });

  test("fails when a die, the total's dice or the count differ from the relay's", async () => {
    const key = await relayKey();
    const flags = await posted(key, rollEvent(5, [die(20, 17), die(20, 4)], 21));
    const check = (rolls) => checkMessage({ flags, rolls, authorParticipant: null }, { keys: key.keys });
    assert.match(word(await check([roll([[20, [20, 4]]], 21)])), /d20 of 20 that the relay did not roll/);
    assert.match(word(await check([roll([[20, [17]]], 21)])), /does not show \(1\)/);
    assert.match(word(await check([roll([[20, [17, 4, 1]]], 21)])), /d20 of 1 that the relay did not roll/);
    assert.equal((await check([roll([[20, [4, 17]]], 21)])).state, "verified", "the order of dice is Foundry's to choose");
    assert.match(word(await check([roll([[20, [17, 4]]], 31)])), /total of 31; the relay's is 21/, "a modifier changed on the way");
    assert.match(word(await check([roll([[20, [17, 4]]], 21), roll([[20, [17, 4]]], 21)])), /2 rolls for the relay's one/);
    const third = await posted(key, rollEvent(6, [die(20, 7)], "2.3333333333333335"));
    const fraction = (total) => checkMessage({ flags: third, rolls: [roll([[20, [7]]], total)], authorParticipant: null }, { keys: key.keys });
    assert.equal((await fraction(7 / 3)).state, "verified", "a fraction is signed as its decimal string");
    assert.match(word(await fraction(3)), /total of 3; the relay's is 2.3333333333333335/);
  });

  test("an exploded chain shows each face it rolled", async () => {
    assert.deepEqual(signedFaces([{ faces: 10, value: 14, kept: true, chain: [10, 4] }, die(10, 3)]), [
      { faces: 10, value: 10 },
      { faces: 10, value: 4 },
      { faces: 10, value: 3 },
    ]);
  });

  test("a claim without a signature, or a signature that is not the relay's, fails", async () => {
    const key = await relayKey();
    const other = await relayKey();
    const event = rollEvent(5, [die(20, 17)], 17);
    const rolls = [roll([[20, [17]]], 17)];
    const bare = { via: true, room: ROOM, epoch: EPOCH, seq: 5, kind: "roll", verified: true };
    assert.match(word(await checkMessage({ flags: bare, rolls, authorParticipant: null }, { keys: key.keys })), /no signature/);
    const foreign = await posted(other, event);
    assert.match(word(await checkMessage({ flags: foreign, rolls, authorParticipant: null }, { keys: key.keys })), /not one of the relay's keys/);
    // Another key's signature under the relay's kid.
    const stolen = { ...foreign, kid: key.kid };
    assert.match(word(await checkMessage({ flags: stolen, rolls, authorParticipant: null }, { keys: key.keys })), /does not verify/);
  });

  test("a flipped byte anywhere in the signed bytes fails", async () => {
    const key = await relayKey();
    const flags = await posted(key, rollEvent(5, [die(20, 17)], 17));
    const bytes = base64ToBytes(flags.signed);
    for (const at of [0, 25, bytes.length - 1]) {
      const changed = bytes.slice();
      changed[at] ^= 1;
      const verdict = await checkMessage({ flags: { ...flags, signed: bytesToBase64(changed) }, rolls: [roll([[20, [17]]], 17)], authorParticipant: null }, { keys: key.keys });
      assert.equal(verdict.state, "failed", `byte ${at}`);
    }
  });

  test("a real signature of another event, seq, room or epoch fails", async () => {
    const key = await relayKey();
    const rolls = [roll([[20, [17]]], 17)];
    const event = rollEvent(5, [die(20, 17)], 17);
    const check = (flags) => checkMessage({ flags, rolls, authorParticipant: null }, { keys: key.keys });
    assert.match(word(await check({ ...(await posted(key, event)), seq: 6 })), /relay event #5, not #6/);
    const elsewhere = await key.sign(event, "another-room");
    assert.match(word(await check({ ...(await posted(key, event)), ...elsewhere, seq: 5 })), /another room/);
    assert.match(word(await check({ ...(await posted(key, event)), epoch: "ep2" })), /another epoch/);
  });

  test("a sealed card verifies with no dice and its own commitment, and fails with dice", async () => {
    const key = await relayKey();
    const sealed = { seq: 8, epoch: EPOCH, ts: 1, kind: "roll", actor: actor("gm"), visibility: "gm", sealed: true, commitment: "ab".repeat(32) };
    const flags = await posted(key, sealed, { sealed: true, commitment: sealed.commitment, visibility: "gm" });
    assert.equal((await checkMessage({ flags, rolls: [], authorParticipant: null }, { keys: key.keys })).state, "verified");
    assert.match(word(await checkMessage({ flags, rolls: [roll([[20, [20]]], 20)], authorParticipant: null }, { keys: key.keys })), /shows dice/);
    assert.match(word(await checkMessage({ flags: { ...flags, commitment: "cd".repeat(32) }, rolls: [], authorParticipant: null }, { keys: key.keys })), /seal/);
    const bare = { via: true, room: ROOM, epoch: EPOCH, seq: 8, kind: "roll", sealed: true, commitment: sealed.commitment };
    assert.deepEqual(await checkMessage({ flags: bare, rolls: [], authorParticipant: null }, { keys: key.keys }), { state: "none" }, "a card as posted: no signature, nothing to vouch for");
    assert.match(word(await checkMessage({ flags: bare, rolls: [roll([[20, [20]]], 20)], authorParticipant: null }, { keys: key.keys })), /shows dice/);
    const full = await posted(key, rollEvent(8, [die(20, 3)], 3));
    assert.match(word(await checkMessage({ flags: { ...full, sealed: true }, rolls: [], authorParticipant: null }, { keys: key.keys })), /not the sealed roll/);
  });
});

describe("a revealed roll", () => {
  async function reveal(key, body, { of = 8, seq = 9, nonce = new Uint8Array(16).fill(7) } = {}) {
    const blob = encodeMsgpack(body);
    const joined = new Uint8Array([...nonce, ...blob]);
    const commitment = [...new Uint8Array(await crypto.subtle.digest("SHA-256", joined))].map((b) => b.toString(16).padStart(2, "0")).join("");
    const event = { seq, epoch: EPOCH, ts: 2, kind: "reveal", actor: actor("gm"), visibility: "public", of, blob, nonce };
    const stored = await key.sign(event);
    return { via: true, room: ROOM, epoch: EPOCH, seq: of, kind: "roll", sealed: false, revealed: seq, commitment, kid: stored.kid, sig: stored.sig, signed: stored.signed };
  }

  test("verifies the dice inside the signed reveal against its seal", async () => {
    const key = await relayKey();
    const body = rollEvent(8, [die(20, 12)], 12);
    const flags = await reveal(key, body);
    assert.equal((await checkMessage({ flags, rolls: [roll([[20, [12]]], 12)], authorParticipant: null }, { keys: key.keys })).state, "verified");
    assert.match(word(await checkMessage({ flags, rolls: [roll([[20, [19]]], 12)], authorParticipant: null }, { keys: key.keys })), /did not roll/);
    assert.match(word(await checkMessage({ flags: { ...flags, commitment: "00".repeat(32) }, rolls: [roll([[20, [12]]], 12)], authorParticipant: null }, { keys: key.keys })), /does not match its seal/);
    assert.match(word(await checkMessage({ flags: { ...flags, seq: 7 }, rolls: [roll([[20, [12]]], 12)], authorParticipant: null }, { keys: key.keys })), /not the reveal of relay event #7/);
  });
});

describe("a Foundry roll with the relay's faces", () => {
  async function faces(key, seq, dice, by = "p1") {
    const event = { seq, epoch: EPOCH, ts: 1, kind: "roll", actor: actor(by), visibility: "public", intent: { system: "faces", dice: [] }, result: { system: "faces", dice, total: null, formula: "", text: "" } };
    return key.sign(event);
  }

  test("verifies when every shown die is a face the roller got, and each face is shown once", async () => {
    const key = await relayKey();
    const signatures = [await faces(key, 3, [die(20, 18), die(20, 2)]), await faces(key, 4, [die(6, 6)])];
    const flags = { via: true, room: ROOM, epoch: EPOCH, seqs: [3, 4], signatures };
    const check = (rolls, authorParticipant = "p1") => checkMessage({ flags, rolls, authorParticipant }, { keys: key.keys });
    assert.deepEqual(await check([roll([[20, [18, 2]], [6, [6]]], 24)]), { state: "verified", seqs: [3, 4] });
    assert.match(word(await check([roll([[20, [18, 2]], [6, [5]]], 23)])), /d6 of 5/);
    assert.match(word(await check([roll([[20, [18]], [6, [6]]], 24)])), /does not show \(1\)/, "a face rolled and not shown: a reroll kept quiet");
    assert.match(word(await check([roll([[20, [18, 2]], [6, [6]]], 24)], "p2")), /rolled by p1/, "another player's faces");
    const shared = await checkMessage({ flags, rolls: [roll([[20, [18, 2]], [6, [6]]], 24)], authorParticipant: "p1", sharedParticipant: true }, { keys: key.keys });
    assert.match(word(shared), /claims the same relay participant/, "a participant two users claim");
    const unsigned = { ...flags, signatures: signatures.slice(0, 1) };
    assert.match(word(await checkMessage({ flags: unsigned, rolls: [], authorParticipant: "p1" }, { keys: key.keys })), /not every relay event/);
  });

  test("a die of another kind shows what its term makes of the face", () => {
    const fate = { faces: 3, denomination: "f", results: [{ result: -1 }], mapRandomFace: (u) => Math.ceil(u * 3) - 2 };
    const shown = shownDice([{ dice: [fate] }]);
    const map = (term, face) => term.mapRandomFace((term.faces - face + 0.5) / term.faces);
    assert.equal(matchDice(shown, [{ faces: 3, value: 3 }], map), null);
    assert.equal(matchDice(shown, [{ faces: 3, value: 1 }], map)?.key, "TABLERELAY.Check.Die");
  });
});

describe("a roll shown twice", () => {
  test("a second copy of a relay event, or a Foundry roll's faces used again, is named by its seq", () => {
    const at = { via: true, room: ROOM, epoch: EPOCH };
    const chat = [
      { id: "a", flags: { ...at, seq: 4, sealed: true } },
      { id: "b", flags: { ...at, seq: 4 } },
      { id: "c", flags: { ...at, seqs: [5, 6] } },
      { id: "d", flags: { ...at, seq: 4 } },
      { id: "e", flags: { ...at, seqs: [6] } },
      { id: "f", flags: { ...at, epoch: "ep2", seq: 4 } },
      { id: "g", flags: { via: false } },
    ];
    const first = firstShown(chat);
    const before = (id) => shownBefore(chat.find((m) => m.id === id), first);
    assert.deepEqual(before("b"), [], "the whisper and the sealed card are two forms of one roll");
    assert.deepEqual(before("c"), []);
    assert.deepEqual(before("d"), [4]);
    assert.deepEqual(before("e"), [6]);
    assert.deepEqual(before("f"), [], "another epoch is another log");
    assert.deepEqual(claims({ via: false, seq: 3 }), []);
  });
});

describe("what this browser cannot check", () => {
  test("no keys, or a relay that does not sign: unchecked, never verified", async () => {
    const flags = { via: true, room: ROOM, epoch: EPOCH, seq: 5, verified: true };
    assert.equal((await checkMessage({ flags, rolls: [], authorParticipant: null }, { keys: null })).state, "unchecked");
    assert.equal((await checkMessage({ flags, rolls: [], authorParticipant: null }, { keys: new Map() })).state, "unchecked");
    assert.deepEqual(await checkMessage({ flags: { via: false, reason: "offline" }, rolls: [], authorParticipant: null }, { keys: null }), { state: "not-relay", reason: "offline" });
    const key = await relayKey();
    assert.deepEqual(await checkMessage({ flags: { via: true, seqs: [] }, rolls: [roll([], 5)], authorParticipant: null }, { keys: key.keys }), { state: "none" });
    assert.match(word(await checkMessage({ flags: { via: true, room: ROOM, epoch: EPOCH, seqs: [] }, rolls: [roll([[20, [20]]], 20)], authorParticipant: null }, { keys: key.keys })), /d20 of 20 that the relay did not roll/, "a die typed in by hand");
  });
});

describe("flags of any shape", () => {
  // Any user may create a message with any flags, and Foundry keeps whatever JSON they hold. A map such as
  // { "toString": 1 } throws wherever it is turned into a number or text: one such message must neither
  // break the chat's index of shown events (every message's mark reads it) nor leave its own mark at
  // "checking…", and nothing of this kind may ever verify.
  const hostile = [{ toString: 1 }, { valueOf: 1, toString: 1 }, null, [], [[]], {}, "NaN", "7", -1, 1e308, 2 ** 53 + 1, true, ""];

  /** Every flags object made by putting each hostile value into each field of a real one, and into its lists. */
  function variants(base) {
    const out = [];
    for (const field of ["seq", "seqs", "revealed", "room", "epoch", "sealed", "commitment", "kid", "sig", "signed", "signatures", "via"]) {
      for (const value of hostile) {
        out.push({ ...base, [field]: value });
        if (field === "seqs" || field === "signatures") out.push({ ...base, [field]: [value] });
      }
    }
    out.push({ ...base, signatures: [{ kid: { toString: 1 }, sig: [], signed: {} }] });
    return out;
  }

  const strangeRolls = [[], [{ dice: 5 }], [{ dice: [{ faces: { toString: 1 }, results: {} }] }], [{ dice: [{ faces: 20, results: [{ result: { valueOf: 1, toString: 1 } }] }], total: {} }], 5, [null], [{ toJSON: () => ({ terms: 7 }) }]];

  test("give every message a verdict, keep the chat's index whole, and never verify", async () => {
    const key = await relayKey();
    const real = await posted(key, rollEvent(5, [die(20, 17)], 17));
    const faces = { via: true, room: ROOM, epoch: EPOCH, seqs: [3], signatures: [await key.sign(rollEvent(3, [die(20, 17)], 17))] };
    const reveal = { ...real, revealed: 9, commitment: "00" };
    const forged = [...variants(real), ...variants(faces), ...variants(reveal)];
    const chat = [{ id: "real", flags: real }, ...forged.map((flags, i) => ({ id: `f${i}`, flags }))];
    const first = firstShown(chat);
    assert.equal(first.get(`${ROOM}:${EPOCH}:5:open`), "real", "the real message still shows its event first");
    for (const message of chat) shownBefore(message, first);
    const states = new Set(["verified", "failed", "unchecked", "not-relay", "none"]);
    let checked = 0;
    for (const flags of forged) {
      for (const rolls of strangeRolls) {
        const verdict = await checkMessage({ flags, rolls, authorParticipant: "p1" }, { keys: key.keys });
        assert.ok(states.has(verdict.state), JSON.stringify(verdict));
        // None of these rolls shows the signed d20 of 17, whatever the flags claim.
        assert.notEqual(verdict.state, "verified", `${JSON.stringify(flags)} with ${JSON.stringify(rolls)}`);
        checked += 1;
      }
    }
    assert.ok(checked > 1000, `only ${checked} combinations`);
  });
});
