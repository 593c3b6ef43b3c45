// Provably fair rolls (spec/fairness.md), checked live: each roll's dice recomputed with WebCrypto
// HMAC-SHA256 from its dice seed once the seed is revealed, each seed's reveal checked against its commitment,
// and a verdict for every roll that carries a `fair` map.
//
// The roll's own `fair` map (signed by the server) keeps its name; the client's verdict is `event.verdict`
// ("awaiting seed", "fair", "unwitnessed", "sealed" or "failed") with `event.verdictReason`. The rules core's
// re-resolution of the result from the draws is the Python verifier's job (`tablerelay verify --fair`); this
// module checks the stream (the draws recomputed equal) and the commitments.

import { toHex } from "./protocol.js";
import { canonicalEncode } from "./signing.js";

const textEncoder = new TextEncoder();
const SEED_DOMAIN = textEncoder.encode("tablerelay-seed-v1\0");
const PENDING_DOMAIN = textEncoder.encode("tablerelay-pending-v1\0");
const KEY_DOMAIN = textEncoder.encode("tablerelay-fair-v1\0");
const BLOCK_TAG = textEncoder.encode("faces");
const WORD_SPACE = 1n << 64n;
/** A dice seed's length in bytes; a roller seed's (and a witness value's) bounds. */
export const SEED_BYTES = 32;
export const CONTRIBUTION_BYTES = Object.freeze([16, 64]);
/** How many bytes the client sends as its roller seed. */
export const ROLLER_SEED_BYTES = 16;

/** The verdicts a roll can have (spec/fairness.md, "Verifying a roll"). */
export const VERDICTS = Object.freeze({
  AWAITING: "awaiting seed",
  FAIR: "fair",
  UNWITNESSED: "unwitnessed",
  SEALED: "sealed",
  FAILED: "failed",
});

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

function u64be(n) {
  const out = new Uint8Array(8);
  let v = BigInt(n);
  for (let i = 7; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

function u32be(n) {
  return new Uint8Array([(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]);
}

const subtle = () => {
  if (!globalThis.crypto?.subtle) throw new Error("WebCrypto is unavailable (a page on plain http?)");
  return globalThis.crypto.subtle;
};

async function sha256Hex(bytes) {
  return toHex(await subtle().digest("SHA-256", bytes));
}

async function hmacKey(key) {
  return subtle().importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

/** 16 fresh bytes from the platform CSPRNG: a roll frame's `seed`. */
export function newRollerSeed() {
  const bytes = new Uint8Array(ROLLER_SEED_BYTES);
  globalThis.crypto.getRandomValues(bytes);
  return bytes;
}

/** A `seed_commit` event's `commit`: hex SHA-256 of the domain, room, 0, u64be(n) and the seed. */
export function seedCommit(room, n, seed) {
  return sha256Hex(concat(SEED_DOMAIN, textEncoder.encode(String(room)), new Uint8Array([0]), u64be(n), seed));
}

/** A `pending` event's `commit`: hex SHA-256 of the domain and canonical({intent, label, nonce}). */
export function pendingCommit(intent, label, nonce) {
  return sha256Hex(concat(PENDING_DOMAIN, canonicalEncode({ intent, label: label ?? null, nonce })));
}

/** True for a byte string whose length is within [low, high]. */
function bytesBetween(value, low, high) {
  return value instanceof Uint8Array && value.length >= low && value.length <= high;
}

const utf8Compare = (a, b) => {
  const x = textEncoder.encode(a);
  const y = textEncoder.encode(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
};

/**
 * The transcript of a roll from its full event: the map its key is derived from.
 * @param {string} room
 * @param {object} event a full roll event (or a reveal's decoded roll) with its `fair` map
 */
export function rollTranscript(room, event) {
  const fair = event.fair;
  return {
    room: String(room),
    n: fair.n,
    roller: event.actor.id,
    visibility: event.visibility,
    intent: event.intent,
    label: event.label ?? null,
    seed: fair.seed ?? null,
    pending: fair.pending ?? null,
    nonce: fair.nonce ?? null,
    witnesses: [...(fair.witnesses ?? [])].map(([pid, value]) => [pid, value]).sort((a, b) => utf8Compare(a[0], b[0])),
  };
}

/** `K = HMAC(S_n, b"tablerelay-fair-v1\0" + canonical(transcript))`: 32 bytes. */
export async function rollKey(seed, transcript) {
  const key = await hmacKey(seed);
  return new Uint8Array(await subtle().sign("HMAC", key, concat(KEY_DOMAIN, canonicalEncode(transcript))));
}

/**
 * The dice of one roll key: `await stream.roll(faces)` gives the next die (1 ≤ faces ≤ 2^64, a number or a
 * bigint) as a number when it fits exactly, else a bigint; `draws` records each as [faces, value].
 */
export class FairDice {
  constructor(key) {
    this._key = hmacKey(key);
    this._block = 0;
    this._words = [];
    this.draws = [];
  }

  async _word() {
    if (!this._words.length) {
      const block = new Uint8Array(
        await subtle().sign("HMAC", await this._key, concat(BLOCK_TAG, u32be(this._block++))),
      );
      const view = new DataView(block.buffer);
      for (let i = 0; i < 4; i++) this._words.push(view.getBigUint64(i * 8, false));
    }
    return this._words.shift();
  }

  async roll(faces) {
    const f = BigInt(faces);
    if (f < 1n || f > WORD_SPACE) throw new RangeError(`a die has 1 to 2**64 faces; got ${faces}`);
    const limit = WORD_SPACE - (WORD_SPACE % f);
    for (;;) {
      const word = await this._word();
      if (word >= limit) continue;
      const big = 1n + (word % f);
      const value = big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
      this.draws.push([faces, value]);
      return value;
    }
  }
}

/** Whether someone outside the operator's side contributed (a roller seed or witness value from a roller who
 * is not a GM, or a witness value from anyone but the roller). A GM's own seed never counts. */
export function outsideContribution(fair, roller, rollerIsGm) {
  if (fair?.seed != null && !rollerIsGm) return true;
  return (fair?.witnesses ?? []).some(([pid]) => pid !== roller || !rollerIsGm);
}

/** The `fair` map's shape, or a sentence saying what is wrong with it. `full`: every key of the full form. */
export function fairProblem(fair, full) {
  if (fair === null || typeof fair !== "object" || Array.isArray(fair)) return "its 'fair' map is not a map";
  for (const key of full ? ["n", "seed", "pending", "nonce", "witnesses", "draws"] : ["n", "pending", "witnesses"]) {
    if (!(key in fair)) return `its 'fair' map has no '${key}'`;
  }
  if (!Number.isInteger(fair.n) && typeof fair.n !== "bigint") return "its seed number is not a whole number";
  const witnesses = fair.witnesses;
  if (!Array.isArray(witnesses) || !witnesses.every((w) => Array.isArray(w) && w.length === 2 && typeof w[0] === "string" && bytesBetween(w[1], ...CONTRIBUTION_BYTES))) {
    return "its witnesses are not a list of [participant id, 16 to 64 bytes]";
  }
  if (!full) return null;
  if (fair.seed !== null && !bytesBetween(fair.seed, ...CONTRIBUTION_BYTES)) return "its roller seed is not 16 to 64 bytes";
  if (fair.pending === null && witnesses.length) return "it names no pending, yet carries witnesses";
  // A roll with neither a pending nor a roller seed carries the server's own nonce (docs/fairness.md), so the
  // same intent on the same seed does not repeat its dice; it never counts as an outside contribution.
  if (fair.pending === null && fair.nonce !== null && (fair.seed !== null || !bytesBetween(fair.nonce, 32, 32))) {
    return "it names no pending, yet carries a nonce beside a roller seed or one that is not 32 bytes";
  }
  const whole = (v) => Number.isInteger(v) || typeof v === "bigint";
  if (!Array.isArray(fair.draws) || !fair.draws.every((d) => Array.isArray(d) && d.length === 2 && whole(d[0]) && whole(d[1]) && BigInt(d[1]) >= 1n && BigInt(d[1]) <= BigInt(d[0]) && BigInt(d[0]) <= WORD_SPACE)) {
    return "its draws are not a list of [faces, value] with 1 <= value <= faces <= 2**64";
  }
  return null;
}

/**
 * Recompute a roll's draws from its revealed dice seed: null when every draw is what the seed and the
 * transcript give, else a sentence naming the first that is not.
 */
export async function streamProblem(room, event, seed) {
  let dice;
  try {
    dice = new FairDice(await rollKey(seed, rollTranscript(room, event)));
  } catch (err) {
    return `its transcript cannot be encoded (${err?.message ?? err})`;
  }
  let i = 0;
  for (const [faces, value] of event.fair.draws) {
    i++;
    const got = await dice.roll(faces);
    if (BigInt(got) !== BigInt(value)) return `draw ${i} is ${value} on a d${faces}; the seed and transcript give ${got}`;
  }
  return null;
}

/** Why a roll on an abandoned seed awaits it for good. */
function abandonedReason(n, at) {
  return `its dice come from seed ${n}, which was abandoned unrevealed when seed ${n + 1} was committed (event ${at}): they cannot be checked`;
}

/**
 * What one client knows of a room's dice seeds, and the verdicts of the rolls it has seen. `TableRelay` feeds
 * it events in seq order; `check` gives each roll its verdict, `seedRevealed` the updates a reveal brings.
 */
export class SeedBook {
  constructor() {
    this.reset(null);
  }

  /** Forget everything (another room's log, or a fresh start after the log was lost). */
  reset(epoch) {
    this.epoch = epoch;
    this.commits = new Map(); // n -> hex commitment
    this.reveals = new Map(); // n -> { seq, seed (when it matches its commit), problem? }
    this.awaiting = new Map(); // n -> Map(seq -> roll event), rolls whose seed is not revealed yet
    this.abandoned = new Map(); // n -> seq of the next seed's commit, made while n was open and unrevealed
    this.latest = 0; // the highest seed number known committed
    this.failures = new Map(); // seq -> why, for failures found outside the seed checks (a dropped roller seed)
  }

  /** Mark roll `seq` failed for good (its own contribution was dropped or replaced), whatever its seed shows. */
  fail(event, reason) {
    this.failures.set(event.seq, reason);
    if (this.failures.size > 1000) this.failures.delete(this.failures.keys().next().value);
    this.awaiting.get(event.fair?.n)?.delete(event.seq);
    event.verdict = VERDICTS.FAILED;
    event.verdictReason = reason;
  }

  /** A welcome's `seed` {n, commit}: the open seed. Returns an alarm sentence, or null. */
  noteOpen(seed) {
    if (!seed || typeof seed !== "object") return null;
    return this._commit(seed.n, seed.commit, null);
  }

  _commit(n, commit, seq) {
    if (typeof commit !== "string") return null;
    const known = this.commits.get(n);
    if (known !== undefined && known !== commit) {
      return `Seed ${n} was committed twice with different commitments${seq ? ` (again at event ${seq})` : ""}.`;
    }
    this.commits.set(n, commit);
    if (n > this.latest) this.latest = n;
    return null;
  }

  /**
   * A `seed_commit` event. Returns an alarm sentence, or null. The next seed committed while this client knows
   * the one before it open abandons that one unrevealed, as a relay must when a room came to it without the
   * open seed's secret (docs/fairness.md, "Where this differs", (7)): its rolls stay "awaiting seed", no alarm.
   */
  seedCommitted(event) {
    const before = Number.isInteger(event.n) ? event.n - 1 : null;
    if (before !== null && this.commits.has(before) && !this.reveals.has(before) && !this.abandoned.has(before)) {
      this.abandoned.set(before, event.seq);
      for (const roll of this.awaiting.get(before)?.values() ?? []) roll.verdictReason = abandonedReason(before, event.seq);
    }
    return this._commit(event.n, event.commit, event.seq);
  }

  /**
   * A `seed_reveal` event: checks it against its commitment and re-judges the rolls that waited for it.
   * Resolves with `{ alarm, updated }`: an alarm sentence (or null) and the roll events whose verdict changed.
   */
  async seedRevealed(room, event) {
    const { n, seed, seq } = event;
    let alarm = null;
    const commit = this.commits.get(n);
    if (this.reveals.has(n)) {
      // The same event again (a fresh welcome's history replays what this client saw) changes nothing.
      if (this.reveals.get(n).seq === seq) return { alarm: null, updated: [] };
      return { alarm: `Seed ${n} was revealed a second time (event ${seq}).`, updated: [] };
    }
    let problem = null;
    if (!bytesBetween(seed, SEED_BYTES, SEED_BYTES)) problem = `seed ${n}'s reveal (event ${seq}) does not hold a 32-byte seed`;
    else if (commit !== undefined && (await seedCommit(room, n, seed)) !== commit.toLowerCase()) {
      problem = `seed ${n}'s reveal (event ${seq}) does not match its commitment`;
    }
    if (problem) alarm = `The server's dice seed ${n} does not match what it committed to: ${problem}.`;
    this.reveals.set(n, { seq, seed: problem ? null : seed, problem, committed: commit !== undefined });
    const waiting = [...(this.awaiting.get(n)?.values() ?? [])];
    this.awaiting.delete(n);
    const updated = [];
    for (const roll of waiting) {
      const before = roll.verdict;
      await this.check(room, roll);
      if (roll.verdict !== before) updated.push(roll);
    }
    return { alarm, updated };
  }

  /**
   * Give a roll event (its full form, a sealed placeholder, or a reveal's decoded roll) its verdict in place:
   * `event.verdict` and `event.verdictReason`. A roll without a `fair` map gets none. Resolves with an alarm
   * sentence when the verdict is "failed", else null.
   */
  async check(room, event) {
    if (!event || event.fair === undefined) return null;
    const seq = event.seq;
    const full = event.sealed !== true;
    const set = (verdict, reason) => {
      event.verdict = verdict;
      event.verdictReason = reason;
      return verdict === VERDICTS.FAILED ? `Roll ${seq} failed its fairness check: ${reason}.` : null;
    };
    if (this.failures.has(seq)) return set(VERDICTS.FAILED, this.failures.get(seq));
    const shape = fairProblem(event.fair, full);
    if (shape) return set(VERDICTS.FAILED, shape);
    const n = event.fair.n;
    const reveal = this.reveals.get(n);
    if (reveal && reveal.seq < seq) return set(VERDICTS.FAILED, `it uses seed ${n} after that seed's reveal (event ${reveal.seq})`);
    const abandoned = this.abandoned.get(n);
    if (abandoned !== undefined && abandoned < seq) return set(VERDICTS.FAILED, `it uses seed ${n} after seed ${n + 1} was committed (event ${abandoned}), abandoning it`);
    if (n > this.latest && this.latest > 0) return set(VERDICTS.FAILED, `it uses seed ${n}, which was never committed before it`);
    if (!full) return set(VERDICTS.SEALED, "a hidden roll, not revealed yet: its dice are checked when it is");
    if (!reveal) {
      let list = this.awaiting.get(n);
      if (!list) this.awaiting.set(n, (list = new Map()));
      list.set(seq, event);
      if (abandoned !== undefined) return set(VERDICTS.AWAITING, abandonedReason(n, abandoned));
      const unseen = this.commits.has(n) ? "" : " (its commitment is older than what this client received)";
      return set(VERDICTS.AWAITING, `its dice come from seed ${n}, not revealed yet${unseen}`);
    }
    if (reveal.problem) return set(VERDICTS.FAILED, reveal.problem);
    const problem = await streamProblem(room, event, reveal.seed);
    if (problem) return set(VERDICTS.FAILED, problem);
    if (!reveal.committed) {
      // The stream is right, but the seed's commitment predates this client's history: whether the seed was
      // fixed before the roll cannot be told here (the room's export can: `tablerelay verify --fair`).
      return set(VERDICTS.AWAITING, `recomputed from seed ${n}, whose commitment is older than what this client received`);
    }
    const count = event.fair.witnesses.length;
    if (outsideContribution(event.fair, event.actor?.id, event.actor?.role === "gm")) {
      const who = count ? `${count} witness value${count === 1 ? "" : "s"}` : "the roller's seed";
      return set(VERDICTS.FAIR, `recomputed from seed ${n} and ${who}`);
    }
    return set(VERDICTS.UNWITNESSED, `recomputed from seed ${n}; nobody outside the server contributed to it`);
  }
}
