// Witnessing (spec/fairness.md, "Witnesses" and "A client checks live"): the `pending` events this client
// received, the random values it sent for the ones that asked it, and the checks that hold the relay to
// them. `TableRelay` (client.js) feeds it events in seq order and sends what it says to send; every check
// that fails gives a sentence the client raises as an alarm.
//
// What is checked, and why each is a check of the relay rather than of the network:
// - a value this client sent appears, unchanged, under its id in the roll naming that pending (the full
//   roll or a sealed placeholder's `fair.witnesses`): dropping or replacing it would let the relay pick
//   between dice it had already seen;
// - a roll names a pending this client received (it sees every event in seq order while connected), only
//   one roll names it, by the same roller, with the same visibility and seed, with values only from those
//   asked, and with a nonce that matches the pending's commit (for a hidden roll: at its reveal): a
//   second pending or a second nonce for the same roll is a re-roll after seeing the witnesses' values;
// - a pending gets its roll within `witness_wait_ms` plus a margin while this client is connected;
// - a witness-capable player is offered every witnessed roll made while it is connected (unless 16 others
//   were asked): a relay that leaves out the honest players could take its values from accomplices only.

import { toHex } from "./protocol.js";
import { CONTRIBUTION_BYTES, pendingCommit } from "./fairness.js";

/** The `witness_wait_ms` a welcome that does not name one implies (the server's default). */
export const DEFAULT_WITNESS_WAIT_MS = 250;
/** How long past `witness_wait_ms` a pending may wait for its roll before the alarm: storing and signing. */
export const DEFAULT_WITNESS_MARGIN_MS = 5000;
/** How many witnesses a roll asks at most (spec/fairness.md): past it, being left out is no sign. */
export const MAX_ASKED = 16;
/** How many pendings are remembered (the oldest are forgotten first). */
const KEPT = 1000;
const SEALED = new Set(["gm", "blind", "self"]);

const sameBytes = (a, b) => a instanceof Uint8Array && b instanceof Uint8Array && a.length === b.length && a.every((x, i) => x === b[i]);

/** A fresh witness value: 16 bytes from the platform CSPRNG. */
export function newWitnessValue() {
  const bytes = new Uint8Array(CONTRIBUTION_BYTES[0]);
  globalThis.crypto.getRandomValues(bytes);
  return bytes;
}

/** Whether a roll is witnessed when witnesses are online: hidden, or made by a GM. */
export function isWitnessed(roll) {
  return SEALED.has(roll?.visibility) || roll?.actor?.role === "gm";
}

/**
 * One client's witnessing of one room. `me` is the client ({you, witness}); the sentences it returns are
 * alarms, and `fail(roll, reason)` marks a roll failed for good.
 */
export class WitnessBook {
  /**
   * @param {{ fail: (roll: object, reason: string) => void, overdue: (seq: number) => void }} hooks `fail`
   *   marks a roll failed for good; `overdue` is called when a pending's timer runs out
   */
  constructor(hooks) {
    this._fail = hooks.fail;
    this._onOverdue = hooks.overdue;
    this._timers = new Map(); // pending seq -> timer, only while connected
    this.waitMs = DEFAULT_WITNESS_WAIT_MS;
    this.marginMs = DEFAULT_WITNESS_MARGIN_MS;
    this.reset(null);
  }

  /** Forget every pending (another room's log). */
  reset(epoch) {
    this.disarm();
    this.epoch = epoch;
    /**
     * The pendings seen, by seq: the event, who it asked, the value this client sent (null: none) and the
     * server's answer to it ("sent", "ack", "lost" or an error code), whether it arrived live, and the seq of
     * the roll that named it (null: none yet).
     * @type {Map<number, {seq: number, event: object, asked: string[], askedMe: boolean, value: Uint8Array | null,
     *   answer: string | null, live: boolean, rolled: number | null, overdue?: boolean}>}
     */
    this.pendings = new Map();
    this.viewStart = Infinity; // the first seq of the unbroken stream this client holds
    this.liveAfter = Infinity; // events above this seq arrived on a socket after its welcome
  }

  /**
   * A welcome, before its history is read: `fresh` when that history starts a new view (anything but a whole
   * resume). Events after its `seq` are live; the relay's `witness_wait_ms` comes with it.
   */
  welcome(frame, fresh) {
    if (frame.epoch !== this.epoch) this.reset(frame.epoch);
    const wait = frame.witness_wait_ms;
    if (Number.isInteger(wait) && wait >= 0) this.waitMs = wait;
    const history = frame.history ?? [];
    const firstSeq = history.length ? history[0].seq : (frame.seq ?? 0) + 1;
    if (fresh || !Number.isFinite(this.viewStart)) this.viewStart = firstSeq;
    this.liveAfter = frame.seq ?? 0;
  }

  /** The socket closed: nothing above the next welcome's seq is live until then, and no timer runs. */
  disconnected() {
    this.liveAfter = Infinity;
    this.disarm();
  }

  /** Start the timer of every open pending that has none (a roll is due within the wait plus the margin). */
  arm() {
    for (const record of this.pendings.values()) {
      if (record.rolled !== null || record.overdue || this._timers.has(record.seq)) continue;
      const timer = setTimeout(() => {
        this._timers.delete(record.seq);
        this._onOverdue(record.seq);
      }, this.waitMs + this.marginMs);
      timer.unref?.();
      this._timers.set(record.seq, timer);
    }
  }

  /** Stop every timer: a client that is not connected cannot tell a roll that was not made from one it missed. */
  disarm() {
    for (const timer of this._timers?.values() ?? []) clearTimeout(timer);
    this._timers?.clear();
  }

  _live(seq) {
    return seq > this.liveAfter;
  }

  /** A `pending` event: returns alarm sentences. `me`: {id, role, witness} of this client. */
  pending(event, me) {
    const alarms = [];
    if (!this.pendings.has(event.seq)) {
      const asked = Array.isArray(event.asked) ? event.asked : [];
      this.pendings.set(event.seq, {
        seq: event.seq,
        event,
        asked,
        value: null,
        answer: null,
        live: this._live(event.seq),
        rolled: null,
        askedMe: asked.includes(me.id),
      });
      if (this.pendings.size > KEPT) this.pendings.delete(this.pendings.keys().next().value);
      if (this._offeredToMe(me, event.seq) && !asked.includes(me.id) && asked.length < MAX_ASKED) {
        alarms.push(
          `The relay asked ${asked.length ? asked.join(", ") : "nobody"} to witness the roll it announced as event ${event.seq}, ` +
            "but not this client, which was connected and ready to: that roll's dice could come from values the server chose.",
        );
      }
    }
    return alarms;
  }

  /** Whether this client, a witness-capable player, was connected when event `seq` was made. */
  _offeredToMe(me, seq) {
    return me.witness && me.role === "player" && this._live(seq);
  }

  /** The pendings this client should answer now: asked, open (no roll yet), no value sent or its send lost. */
  toAnswer(me) {
    if (!me.witness) return [];
    const due = [];
    for (const record of this.pendings.values()) {
      if (record.rolled !== null || !record.askedMe) continue;
      if (record.answer !== null && record.answer !== "lost") continue;
      record.value ??= newWitnessValue(); // a send lost with its socket goes again with the same bytes
      record.answer = "sent";
      due.push(record);
    }
    return due;
  }

  /**
   * The server's answer to a witness frame: "ack", an error code, or "lost" (the socket closed first). When
   * the roll came first, its check of this client's value is made now: returns `{roll, reason}` when it
   * fails, else null.
   */
  answered(seq, answer, me) {
    const record = this.pendings.get(seq);
    if (!record || record.answer !== "sent") return null;
    record.answer = answer;
    const waiting = record.waiting;
    record.waiting = null;
    if (!waiting) return null;
    const reason = this._myValueProblem(record, waiting.witnesses, me);
    if (!reason) return null;
    this._fail(waiting.roll, reason);
    return { roll: waiting.roll, reason };
  }

  /** The timer ran out on pending `seq`: an alarm sentence if it still has no roll. */
  overdue(seq) {
    const record = this.pendings.get(seq);
    if (!record || record.rolled !== null || record.overdue) return null;
    record.overdue = true;
    return (
      `Roll ${seq} was announced (a pending event) but never made: no roll named it within ` +
      `${this.waitMs + this.marginMs} ms while this client was connected. A relay that throws a roll away after ` +
      "seeing its witnesses' values can choose its dice."
    );
  }

  /**
   * A roll event (full or sealed). Returns alarm sentences; a failed check also marks the roll failed.
   * `me`: {id, role, witness}.
   */
  async roll(event, me) {
    const fair = event.fair;
    if (!fair || typeof fair !== "object" || Array.isArray(fair)) return [];
    const alarms = [];
    const fail = (reason) => {
      this._fail(event, reason);
      alarms.push(`Roll ${event.seq} failed its fairness check: ${reason}.`);
    };
    const p = fair.pending;
    if (p === null || p === undefined) {
      if (isWitnessed(event) && this._offeredToMe(me, event.seq)) {
        fail("it was made without asking any witness, although this client was connected and ready to witness it");
      }
      return alarms;
    }
    const record = this.pendings.get(p);
    if (!record) {
      if (p >= this.viewStart && p < event.seq) fail(`it names pending ${p}, which this client never received as a pending event`);
      else if (p >= event.seq) fail(`it names pending ${p}, which is not before it`);
      return alarms;
    }
    const pending = record.event;
    if (record.rolled !== null && record.rolled !== event.seq) {
      fail(`pending ${p} was already made as roll ${record.rolled}: a second roll for one pending is a re-roll`);
      return alarms;
    }
    record.rolled = event.seq;
    clearTimeout(this._timers.get(p));
    this._timers.delete(p);
    if (pending.roller !== event.actor?.id) fail(`pending ${p} announced a roll by ${pending.roller}, but ${event.actor?.id} made it`);
    else if (pending.visibility !== event.visibility) fail(`pending ${p} announced a ${pending.visibility} roll, but it is ${event.visibility}`);
    else if (pending.n !== fair.n) fail(`pending ${p} announced seed ${pending.n}, but it uses seed ${fair.n}`);
    if (alarms.length) return alarms;
    const witnesses = Array.isArray(fair.witnesses) ? fair.witnesses : [];
    const stranger = witnesses.find((w) => Array.isArray(w) && !record.asked.includes(w[0]));
    if (stranger) {
      fail(`it carries a witness value from ${stranger[0]}, whom pending ${p} did not ask`);
      return alarms;
    }
    if (record.value && record.answer === "sent") {
      // The roll came before the server's answer to this client's value (it may: the answer waits for the
      // store), and which check applies depends on that answer (a second tab's "conflict", a "late" one).
      record.waiting = { roll: event, witnesses };
    } else {
      const problem = this._myValueProblem(record, witnesses, me);
      if (problem) {
        fail(problem);
        return alarms;
      }
    }
    if (event.sealed !== true) {
      const commit = await this._commitProblem(record, event);
      if (commit) fail(commit);
    }
    return alarms;
  }

  /** Whether the value this client sent for the pending is in the roll as sent: a reason when it is not. */
  _myValueProblem(record, witnesses, me) {
    if (!record.value || record.answer === null || record.answer === "lost") return null;
    const mine = witnesses.filter((w) => Array.isArray(w) && w[0] === me.id);
    if (record.answer === "ack") {
      // Taken: exactly these bytes must be in the roll under this client's id.
      if (!mine.length) return `the witness value this client sent for pending ${record.seq} was left out`;
      if (mine.length > 1 || !sameBytes(mine[0][1], record.value)) {
        return `the witness value this client sent for pending ${record.seq} was replaced (sent ${toHex(record.value).slice(0, 8)}…)`;
      }
      return null;
    }
    // Refused ("already witnessed", "too late"): when the roll carries a value under this participant's id,
    // another socket of it (a second tab) answered first, and that socket checks its own bytes.
    if (mine.length) return null;
    // Announced while this client was away (it came in a welcome's history): it may really have come too late.
    if (record.answer === "not_found" && !record.live) return null;
    const late = record.answer === "not_found" ? " (the relay said it came after the roll was made)" : "";
    return `the witness value this client sent for pending ${record.seq} was left out${late}`;
  }

  /** A full roll's nonce against its pending's commit (the roll is bound to what was announced). */
  async _commitProblem(record, roll) {
    const fair = roll.fair;
    if (!(fair.nonce instanceof Uint8Array)) return `it names pending ${record.seq} but carries no nonce`;
    const got = await pendingCommit(roll.intent, roll.label, fair.nonce);
    if (got !== String(record.event.commit).toLowerCase()) {
      return `its intent, label and nonce do not match pending ${record.seq}'s commitment: it is not the roll that was announced`;
    }
    return null;
  }

  /**
   * A hidden roll revealed (`roll` is the reveal's decoded roll): the value and commit checks its placeholder
   * could not have. Returns a reason the roll fails, or null.
   */
  async revealed(roll, me) {
    const p = roll?.fair?.pending;
    if (p === null || p === undefined) return null;
    const record = this.pendings.get(p);
    if (!record) return null;
    const problem = this._myValueProblem(record, Array.isArray(roll.fair.witnesses) ? roll.fair.witnesses : [], me);
    return problem ?? (await this._commitProblem(record, roll));
  }
}
