// What each viewer checks for itself before a chat message shows the relay's mark.
//
// A message's `flags.tablerelay` are written by the client that posted it, so they are a claim, not a proof:
// any user may create a message with any flags (a macro is enough), and a player's own client builds the flags
// of its own Foundry rolls. So every client that shows a message checks the claim with what only the relay
// can make: the signatures the flags carry, with the relay's keys this client got itself; the signed events
// must be the ones the flags name, in this room; and the dice the message shows must be the dice the relay
// signed. Pure, apart from the signature check's WebCrypto: the module gives it the keys and what it knows
// of the other messages.

import { decodeMsgpack, ed25519Verify, openSignedBytes, verifyCommitment } from "./client.mjs";
import { resultFor } from "./fulfillment.mjs";
import { base64ToBytes } from "./messages.mjs";

/**
 * A viewer's verdict on a message.
 * - `verified`: every claim checked out against the relay's signatures.
 * - `failed`: something does not match: `reason` says what. Shown to everyone, always.
 * - `unchecked`: this client cannot check (no keys: not connected, or the relay does not sign).
 * - `not-relay`: the message says its dice are not the relay's (a fallback roll, or no relay flags at all).
 * - `none`: a Foundry roll of no dice: nothing to vouch for.
 * A reason is a sentence of lang/*.json (its key and placeholders), worded by whoever shows it; a `not-relay`
 * reason is the text the rolling client stored with the message.
 * @typedef {{ key: string, data?: Record<string, string> }} Reason
 * @typedef {{ state: "verified"|"failed"|"unchecked"|"not-relay"|"none", reason?: Reason|string, seqs?: number[] }} Verdict
 */

/**
 * A flag read as a number: a JSON number, or numeric text; anything else NaN. The flags are whatever JSON the
 * poster stored, and a map such as `{ "toString": 1 }` throws wherever it is turned into a number or text.
 * @param {unknown} value
 */
function num(value) {
  return typeof value === "number" ? value : typeof value === "string" ? Number(value) : NaN;
}

/** A flag read as text (see `num`): text, or a number's digits; anything else empty. @param {unknown} value */
function text(value) {
  return typeof value === "string" ? value : typeof value === "number" ? String(value) : "";
}

/** @param {unknown} value @returns {any[]} */
function list(value) {
  return Array.isArray(value) ? value : [];
}

/** @param {string} key @param {Record<string, string|number>} [data] @returns {Reason} */
function why(key, data) {
  return data ? { key, data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, String(v)])) } : { key };
}

/**
 * One signed event in the form a message's flags keep it.
 * @typedef {{ seq?: number, kid?: string, sig?: string, signed?: string }} StoredSignature
 */

/**
 * Check one stored signature with the relay's keys; the event it signs, or why not.
 * @param {StoredSignature} stored
 * @param {Map<string, { x: Uint8Array }>} keys
 * @returns {Promise<{ room: string, event: Record<string, any> } | { reason: Reason }>}
 */
export async function openVerified(stored, keys) {
  if (typeof stored?.kid !== "string" || typeof stored.sig !== "string" || typeof stored.signed !== "string") {
    return { reason: why("TABLERELAY.Check.NoSignature") };
  }
  const key = keys.get(stored.kid);
  if (!key) return { reason: why("TABLERELAY.Check.UnknownKey", { kid: stored.kid.slice(0, 16) }) };
  let sig, bytes;
  try {
    sig = base64ToBytes(stored.sig);
    bytes = base64ToBytes(stored.signed);
  } catch {
    return { reason: why("TABLERELAY.Check.Unreadable") };
  }
  if (sig.length !== 64) return { reason: why("TABLERELAY.Check.Unreadable") };
  let ok = false;
  try {
    ok = await ed25519Verify(key.x, sig, bytes);
  } catch {
    ok = false;
  }
  if (!ok) return { reason: why("TABLERELAY.Check.BadSignature") };
  const opened = /** @type {{ room: string, event: Record<string, any> } | null} */ (openSignedBytes(bytes));
  return opened ?? { reason: why("TABLERELAY.Check.NotAnEvent") };
}

/**
 * The faces a result's dice show, by number of faces: an exploded chain shows each face it rolled.
 * @param {Array<Record<string, any>>} dice  a result's `dice` (docs/rules.md)
 * @returns {Array<{ faces: number, value: number }>}
 */
export function signedFaces(dice) {
  /** @type {Array<{ faces: number, value: number }>} */
  const out = [];
  for (const die of Array.isArray(dice) ? dice : []) {
    const faces = Number(die?.faces);
    const values = Array.isArray(die?.chain) ? die.chain : Array.isArray(die?.compounded) ? die.compounded : [die?.value];
    for (const value of values) out.push({ faces, value: Number(value) });
  }
  return out;
}

/**
 * Every die result a message's rolls show, with the term it belongs to (Foundry's Roll#dice: nested terms
 * included).
 * @param {Array<any>} rolls  a ChatMessage's `rolls` (Roll instances)
 * @returns {Array<{ term: any, faces: number, result: number }>}
 */
export function shownDice(rolls) {
  const out = [];
  for (const roll of list(rolls)) {
    for (const term of list(roll?.dice)) {
      for (const r of list(term?.results)) out.push({ term, faces: num(term.faces), result: num(r?.result) });
    }
  }
  return out;
}

/**
 * What a check of these rolls depends on, as text: each roll's total and the results its dice show (a reveal
 * changes both). Read with `shownDice`'s care: a macro's message may hold rolls of any shape.
 * @param {Array<any>} rolls
 */
export function rollsKey(rolls) {
  return JSON.stringify(list(rolls).map((roll) => [roll?.total, shownDice([roll]).map((d) => d.result)]));
}

/**
 * Every die result in rolls' data (Roll#toJSON), nested terms included: the dice of pools, parentheses and
 * functions (`rolls`, `roll`), computed numbers and faces (`_number`, `_faces`). Read from the data rather
 * than from Roll#dice, so what is compared is what the relay's rendering holds, whatever term classes the
 * Foundry it runs in builds from it.
 * @param {Array<any>} rolls
 * @returns {Array<{ term: any, faces: number, result: number }>}
 */
export function renderedDice(rolls) {
  /** @type {Array<{ term: any, faces: number, result: number }>} */
  const out = [];
  /** @param {any} node */
  const walk = (node) => {
    if (Array.isArray(node)) return node.forEach(walk);
    if (node === null || typeof node !== "object") return;
    if (typeof node.faces === "number" && Array.isArray(node.results)) {
      for (const r of node.results) out.push({ term: node, faces: node.faces, result: num(r?.result) });
    }
    for (const key of ["terms", "rolls", "roll", "_number", "_faces"]) walk(node[key]);
  };
  for (const roll of list(rolls)) walk(typeof roll?.toJSON === "function" ? roll.toJSON() : roll);
  return out;
}

/**
 * Do the shown dice match the relay's faces one for one? Each shown result takes one unused face of its
 * size that gives that result (`map` turns a face into what its term shows: a Fate die's −1/0/+1).
 * @param {Array<{ term: any, faces: number, result: number }>} shown
 * @param {Array<{ faces: number, value: number }>} faces
 * @param {(term: any, face: number) => number} map
 * @returns {Reason|null} why not, or null when they match
 */
export function matchDice(shown, faces, map) {
  const unused = [...faces];
  for (const die of shown) {
    const i = unused.findIndex((f) => f.faces === die.faces && map(die.term, f.value) === die.result);
    if (i < 0) return why("TABLERELAY.Check.Die", { faces: die.faces, value: die.result });
    unused.splice(i, 1);
  }
  // A face rolled and not shown is a roll made again and kept quiet.
  if (unused.length) return why("TABLERELAY.Check.Unshown", { count: unused.length });
  return null;
}

/**
 * Does a signed event belong to this message: the room, the epoch and the seq its flags name?
 * @param {{ room: string, event: Record<string, any> }} opened
 * @param {{ room?: string, epoch?: string }} flags
 * @param {number|undefined} seq
 */
function belongs(opened, flags, seq) {
  if (opened.room !== flags.room) return why("TABLERELAY.Check.OtherRoom", { room: opened.room.slice(0, 24) });
  if (opened.event.epoch !== flags.epoch) return why("TABLERELAY.Check.OtherEpoch");
  if (seq !== undefined && opened.event.seq !== seq) return why("TABLERELAY.Check.OtherSeq", { signed: Number(opened.event.seq), seq });
  return null;
}

/**
 * The relay events a message names: a Foundry roll's faces events, or the one event it shows.
 * @param {Record<string, any>} flags
 * @returns {number[]}
 */
function seqsOf(flags) {
  if (Array.isArray(flags.seqs)) return flags.seqs.map(num);
  return flags.seq !== undefined ? [num(flags.seq)] : [];
}

/**
 * The verdict on a message that needs no signature checked, or null: one that says its dice are not the
 * relay's, and a sealed card as posted. A sealed card carries no signature (messages.mjs, sealedFlags: the
 * poster's is the full form's) and shows no dice: nothing to vouch for until its reveal, which is checked.
 * The module draws these at once, with no "checking…" before them.
 * @param {Record<string, any>|undefined} flags
 * @param {Array<any>} rolls
 * @returns {Verdict|null}
 */
export function plainVerdict(flags, rolls) {
  if (!flags || flags.via !== true) return { state: "not-relay", reason: typeof flags?.reason === "string" ? flags.reason : undefined };
  if (flags.sealed === true && flags.sig === undefined) {
    return list(rolls).length ? { state: "failed", reason: why("TABLERELAY.Check.SealedDice"), seqs: seqsOf(flags) } : { state: "none" };
  }
  return null;
}

/**
 * A viewer's check of one message.
 * @param {{ flags: Record<string, any>|undefined, rolls: Array<any>, authorParticipant: string|null, sharedParticipant?: boolean }} message
 *   `authorParticipant`: the relay participant of the message's author (its user's flag); `sharedParticipant`:
 *   another user of the world claims the same one
 * @param {{ keys: Map<string, { x: Uint8Array }>|null }} viewer  the relay's keys (null: none known here)
 * @returns {Promise<Verdict>}
 */
export async function checkMessage(message, viewer) {
  try {
    return await checkClaims(message, viewer);
  } catch {
    // Flags or rolls of a shape no relay client writes (a macro may store anything): a failure, never a mark
    // left at "checking…".
    return { state: "failed", reason: why("TABLERELAY.Check.Unreadable") };
  }
}

/**
 * `checkMessage`, which may throw on flags or rolls of a shape it does not expect.
 * @param {Parameters<typeof checkMessage>[0]} message @param {Parameters<typeof checkMessage>[1]} viewer
 * @returns {Promise<Verdict>}
 */
async function checkClaims({ flags, rolls, authorParticipant, sharedParticipant = false }, { keys }) {
  const plain = plainVerdict(flags, rolls);
  if (plain || !flags) return plain ?? { state: "not-relay" };
  const seqs = seqsOf(flags);
  if (!keys) return { state: "unchecked", reason: why("TABLERELAY.Check.NoKeys"), seqs };
  if (keys.size === 0) return { state: "unchecked", reason: why("TABLERELAY.Check.NotSigning"), seqs };
  const fail = (/** @type {Reason} */ reason) => /** @type {Verdict} */ ({ state: "failed", reason, seqs });
  if (Array.isArray(flags.seqs)) {
    const shown = shownDice(rolls);
    // A Foundry roll whose faces the relay rolled: every faces event signed, this roller's, and every die shown.
    const signatures = Array.isArray(flags.signatures) ? flags.signatures : [];
    if (!seqs.length && !shown.length) return { state: "none" }; // a roll of no dice: nothing to vouch for
    if (signatures.length !== seqs.length) return fail(why("TABLERELAY.Check.NotAllSigned"));
    // Each user sets its own participant flag: two users claiming one participant could pass off each other's
    // faces, so neither is vouched for.
    if (sharedParticipant && seqs.length) return fail(why("TABLERELAY.Check.SharedParticipant"));
    /** @type {Array<{ faces: number, value: number }>} */
    const faces = [];
    for (const [i, stored] of signatures.entries()) {
      const opened = await openVerified(stored, keys);
      if ("reason" in opened) return fail(opened.reason);
      const wrong = belongs(opened, flags, seqs[i]);
      if (wrong) return fail(wrong);
      const event = opened.event;
      if (event.kind !== "roll" || event.sealed === true || event.result?.system !== "faces") return fail(why("TABLERELAY.Check.NotFaces", { seq: seqs[i] }));
      // The faces of one player's roll are theirs alone: another's, reused, would be a roll they did not make.
      if (authorParticipant && event.actor?.id !== authorParticipant) return fail(why("TABLERELAY.Check.OtherRoller", { seq: seqs[i], name: String(event.actor?.name ?? "?") }));
      faces.push(...signedFaces(event.result.dice));
    }
    const mismatch = matchDice(shown, faces, resultFor);
    return mismatch ? fail(mismatch) : { state: "verified", seqs };
  }

  if (flags.revealed !== undefined) {
    // A sealed roll, opened: the reveal is signed, reveals this seq, and its blob holds the dice shown.
    const opened = await openVerified(flags, keys);
    if ("reason" in opened) return fail(opened.reason);
    const wrong = belongs(opened, flags, num(flags.revealed));
    if (wrong) return fail(wrong);
    const reveal = opened.event;
    if (reveal.kind !== "reveal" || reveal.of !== num(flags.seq)) return fail(why("TABLERELAY.Check.NotReveal", { seq: num(flags.seq) }));
    if (typeof flags.commitment === "string" && !(await verifyCommitment(reveal.nonce, reveal.blob, flags.commitment))) {
      return fail(why("TABLERELAY.Check.SealMismatch"));
    }
    let body;
    try {
      body = /** @type {Record<string, any>} */ (decodeMsgpack(reveal.blob));
    } catch {
      return fail(why("TABLERELAY.Check.NotAnEvent"));
    }
    return checkResult(body?.result, rolls, seqs, fail);
  }

  // A relay event posted as it came: the roll with the relay's dice (or a card with a seal's signature).
  const opened = await openVerified(flags, keys);
  if ("reason" in opened) return fail(opened.reason);
  const wrong = belongs(opened, flags, num(flags.seq));
  if (wrong) return fail(wrong);
  const event = opened.event;
  if (event.kind !== "roll") return fail(why("TABLERELAY.Check.NotRoll", { seq: num(flags.seq) }));
  if (flags.sealed === true || event.sealed === true) {
    if (event.sealed !== true || flags.sealed !== true) return fail(why("TABLERELAY.Check.NotSealed"));
    if (list(rolls).length) return fail(why("TABLERELAY.Check.SealedDice"));
    if (typeof flags.commitment === "string" && flags.commitment !== event.commitment) return fail(why("TABLERELAY.Check.OtherSeal"));
    return { state: "verified", seqs };
  }
  const verdict = checkResult(event.result, rolls, seqs, fail, flags.target);
  // A game system's own outcome that differs from the relay's, as its roller's client found it (systems/).
  if (verdict.state === "verified" && typeof flags.mismatch === "string") return fail(why("TABLERELAY.Check.Mismatch", { outcome: flags.mismatch }));
  return verdict;
}

/**
 * The roll a relay event became, against its signed result: the same dice and, where the rules gave one, the
 * same total (the relay's rendering is one Foundry Roll; docs/renderers.md promises both).
 * @param {Record<string, any>|undefined} result
 * @param {Array<any>} rolls
 * @param {number[]} seqs
 * @param {(reason: Reason) => Verdict} fail
 * @param {unknown} [target]  a roll per target (a game system's, sharing the event's dice): that target's total
 * @returns {Verdict}
 */
function checkResult(result, rolls, seqs, fail, target) {
  if (!result || !Array.isArray(result.dice)) return fail(why("TABLERELAY.Check.NotAnEvent"));
  if (list(rolls).length !== 1) return fail(why("TABLERELAY.Check.RollCount", { count: list(rolls).length }));
  const of = typeof target === "number" && Array.isArray(result.targets) ? result.targets[target] : undefined;
  if (target !== undefined && !of) return fail(why("TABLERELAY.Check.NotAnEvent"));
  // A fraction is signed as its decimal string (spec/signing.md), which Number() reads back exactly; a result
  // without a total (NaN here) leaves the dice to speak.
  const total = num((of ?? result).total);
  if (!Number.isNaN(total) && num(rolls[0]?.total) !== total) {
    return fail(why("TABLERELAY.Check.Total", { shown: num(rolls[0]?.total), signed: total }));
  }
  const mismatch = matchDice(renderedDice(rolls), signedFaces(result.dice), (_term, value) => value);
  return mismatch ? fail(mismatch) : { state: "verified", seqs };
}

/**
 * What a message claims to show, one key per relay event and form: a roll is shown once, except that a
 * hidden roll's audience gets it whispered while everyone else gets its sealed card (two forms of one event),
 * and the faces of a Foundry roll belong to that roll alone.
 * @param {Record<string, any>|undefined} flags
 * @returns {string[]}
 */
export function claims(flags) {
  if (!flags || flags.via !== true) return [];
  const at = `${text(flags.room)}:${text(flags.epoch)}:`;
  if (Array.isArray(flags.seqs)) return flags.seqs.map((/** @type {unknown} */ s) => `${at}${num(s)}:faces`);
  if (flags.seq === undefined) return [];
  // A game system's roll per target shows one target of the event each (systems/drawsteel.mjs).
  const target = typeof flags.target === "number" && flags.sealed !== true ? `:target${num(flags.target)}` : "";
  return [`${at}${num(flags.seq)}:${flags.sealed === true ? "sealed" : "open"}${target}`];
}

/**
 * Which message of the chat shows each relay event first: claim (see `claims`) → message id.
 * @param {Iterable<{ id: string, flags: Record<string, any>|undefined }>} messages  the chat, oldest first
 * @returns {Map<string, string>}
 */
export function firstShown(messages) {
  /** @type {Map<string, string>} */
  const first = new Map();
  for (const m of messages) for (const claim of claims(m.flags)) if (!first.has(claim)) first.set(claim, m.id);
  return first;
}

/**
 * The relay events this message shows that an earlier message of the chat already showed (a copy, or a
 * Foundry roll's faces used twice), by seq; empty when none.
 * @param {{ id: string, flags: Record<string, any>|undefined }} message
 * @param {Map<string, string>} first  `firstShown` of the chat
 * @returns {number[]}
 */
export function shownBefore(message, first) {
  const repeated = claims(message.flags)
    .filter((claim) => first.has(claim) && first.get(claim) !== message.id)
    .map((claim) => Number(claim.split(":").at(-2)));
  return [...new Set(repeated)].sort((x, y) => x - y);
}

/** A failed verdict for a message that shows relay events an earlier message already showed. */
export function shownTwice(/** @type {number[]} */ seqs) {
  return /** @type {Verdict} */ ({ state: "failed", reason: why("TABLERELAY.Check.ShownBefore"), seqs });
}
