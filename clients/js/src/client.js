// The client itself: `TableRelay`, a connection to one room (connection.js) that checks and delivers the
// events it receives, in seq order and each once, keeps the room's state from them (state.js), and offers the
// requests (roll, reveal, Fear and Hope, campaign management) as promises.

import { RelayConnection } from "./connection.js";
import { SeedBook, VERDICTS, newRollerSeed } from "./fairness.js";
import { TableRelayError, decodeMsgpack } from "./protocol.js";
import { STATE_KINDS, applyToState, welcomeState } from "./state.js";
import { checkReveal, importKeys, verifyEvent } from "./verification.js";
import { WitnessBook } from "./witness.js";

const FATAL_ERROR_CODES = new Set(["unauthorized", "forbidden", "not_found"]);
const RECENT_EVENTS = 1000; // events kept so acks (also retried ones) can resolve to their event
const ROLL_SEEDS = 1000; // roller seeds kept by roll id, so a retry of the same id sends the same bytes
const RATE_LIMIT_RETRIES = 3; // a request refused as rate_limited is sent again after 0.5 s, 1 s, 2 s

/**
 * A connection to one room of a tablerelay server. Reconnects by itself and resumes from the last event
 * it saw, so listeners receive every event exactly once, in seq order.
 */
export class TableRelay extends RelayConnection {
  /**
   * @param {string | string[]} url the server's WebSocket address, e.g. "wss://relay.example/ws", or the
   *   addresses of several relay nodes of one cluster: each reconnect tries the next one (spec/cluster.md)
   * @param {string} token a room token (GM, player invite, spectator, or a session token)
   * @param {import("../tablerelay.d.ts").TableRelayOptions} [options]
   */
  constructor(url, token, options = {}) {
    super(url, token, options);
    this._verify = options.verify !== false;
    // Keys to trust instead of the ones the server announces in its welcome (pinned, e.g. fetched once
    // from /.well-known/tablerelay-keys.json of the server you mean).
    this._pinnedKeys = options.keys ?? null;
    this._keyTable = null;
    /** The server's published keys, from the last welcome (a JWK list). */
    this.keys = [];

    this.room = null;
    this.you = null;
    /** The room's state, kept current from welcomes and resource/join/leave events. */
    this.state = { fear: 0, hope: {}, members: [] };
    this._chain = Promise.resolve();
    this._recent = new Map(); // seq -> event, the last RECENT_EVENTS events
    this._commitments = new Map(); // seq of a sealed roll -> its commitment
    // Fair dice (spec/fairness.md): the room's seeds and the rolls waiting for theirs, the roller seeds this
    // client sent (by roll id), and those of its own sealed rolls still to check (by seq).
    this._seeds = new SeedBook();
    this._rollSeeds = new Map();
    this._ownSealed = new Map();
    // The pending events this client saw and the witness values it sent for them (src/witness.js).
    this._witness = new WitnessBook({
      fail: (roll, reason) => this._seeds.fail(roll, reason),
      overdue: (seq) => this._alarm(this._witness.overdue(seq), this._recent.get(seq) ?? { seq }),
    });
    if (Number.isFinite(options.witnessMarginMs)) this._witness.marginMs = options.witnessMarginMs;
    /** Every fairness alarm raised since this client was made, oldest first. */
    this.alarms = [];
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
      this.state = welcomeState(frame);
      this.seq = 0;
      // The same log (a resume the server could not fill): what was committed still binds; another: forget.
      if (this._seeds.epoch !== frame.epoch) this._seeds.reset(frame.epoch);
      else this._seeds.awaiting.clear();
    }
    this._alarm(this._seeds.noteOpen(frame.seed), null);
    // The commitments of the seeds its history's rolls use, which may be older than the history.
    for (const seed of Array.isArray(frame.seeds) ? frame.seeds : []) this._alarm(this._seeds.noteOpen(seed), null);
    this._witness.welcome(frame, fresh);
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
    this.state = welcomeState(frame);
    if (frame.archived === true) this.state.archived = true;
    this._emit("state", this.state);
    this._startHeartbeat();
    this._flush();
    // Pendings still open after the history (announced while away, or answers lost with the last socket).
    this._answerWitnesses();
    this._witness.arm();
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
    const changed = await this._judge(event);
    this.seq = event.seq;
    this._remember(event);
    if (!info.replay) this._applyToState(event);
    this._emit(event.kind, event, info);
    this._emit("event", event, info);
    for (const [roll, alarm] of changed) this._verdictChanged(roll, alarm);
    if (!info.replay && STATE_KINDS.has(event.kind)) {
      this._emit("state", this.state);
    }
    const waiting = this._awaitingEvent.get(event.seq);
    if (waiting) {
      this._awaitingEvent.delete(event.seq);
      for (const request of waiting) request.resolve(event);
    }
  }

  _checkReveal(event) {
    return checkReveal(event, this._commitments.get(event.of));
  }

  // ---- fair dice (spec/fairness.md) ---------------------------------------------------------------------

  /**
   * Give a roll its verdict, or take in a seed event; raises the alarms. Resolves with the earlier rolls
   * whose verdict this event changed (a seed's reveal, a hidden roll's reveal) and their alarms, to be
   * announced after the event itself.
   */
  async _judge(event) {
    const room = this.room?.id;
    try {
      if (event.kind === "roll") {
        this._alarm(await this._seeds.check(room, event), event);
        for (const alarm of await this._witness.roll(event, this._me())) this._alarm(alarm, event);
      } else if (event.kind === "pending") {
        for (const alarm of this._witness.pending(event, this._me())) this._alarm(alarm, event);
        if (this._welcomedOnSocket && this._witness.liveAfter < event.seq) {
          // Live: answer at once (the roll waits for it); a welcome's history is answered after it is read.
          this._answerWitnesses();
          this._witness.arm();
        }
      } else if (event.kind === "seed_commit") {
        this._alarm(this._seeds.seedCommitted(event), event);
      } else if (event.kind === "seed_reveal") {
        const { alarm, updated } = await this._seeds.seedRevealed(room, event);
        this._alarm(alarm, event);
        return updated.map((roll) => [roll, roll.verdict === VERDICTS.FAILED ? `Roll ${roll.seq} failed its fairness check: ${roll.verdictReason}.` : null]);
      } else if (event.kind === "reveal" && event.roll && typeof event.roll === "object" && event.roll.fair !== undefined) {
        let alarm = (await this._seeds.check(room, event.roll)) ?? this._ownSeedAlarm(this._ownSealed.get(event.of), event.roll);
        this._ownSealed.delete(event.of);
        const problem = alarm ? null : await this._witness.revealed(event.roll, this._me());
        if (problem) {
          this._seeds.fail(event.roll, problem);
          alarm = `Roll ${event.of} failed its fairness check: ${problem}.`;
        }
        return [[event.roll, alarm]];
      }
    } catch (err) {
      this._emit("error", new TableRelayError("internal", `The fairness check failed: ${err?.message ?? err}`));
    }
    return [];
  }

  /** Who this client is, for the witness checks. */
  _me() {
    return { id: this.you?.id, role: this.you?.role, witness: this.witness };
  }

  /**
   * Send a witness value (16 fresh CSPRNG bytes) for every open pending that asks this client and has none
   * yet; the server's answer is noted, so the roll can be held to it.
   */
  _answerWitnesses() {
    for (const record of this._witness.toAnswer(this._me())) {
      const frame = { t: "witness", id: this._newId(), pending: record.seq, value: record.value };
      const answered = (answer) => {
        const failed = this._witness.answered(record.seq, answer, this._me());
        if (failed) this._verdictChanged(failed.roll, `Roll ${failed.roll.seq} failed its fairness check: ${failed.reason}.`);
      };
      this._request(frame).then(
        () => answered("ack"),
        (err) => answered(["disconnected", "closed", "timeout"].includes(err?.code) ? "lost" : String(err?.code)),
      );
      if (!this._pending.get(frame.id)?.sent) {
        // Not on the wire (the socket is going): offered again with the same bytes after the next welcome.
        this._pending.delete(frame.id);
        answered("lost");
      }
    }
  }

  /** The socket is gone: the witness timers stop until the next welcome (a missed roll is not a dropped one). */
  _socketClosed() {
    this._witness.disconnected();
  }

  /** A roll's verdict changed after it was delivered: the copy this client keeps follows, listeners hear it. */
  _verdictChanged(roll, alarm) {
    const kept = this._recent.get(roll.seq);
    if (kept && kept !== roll && kept.verdict !== undefined) {
      kept.verdict = roll.verdict;
      kept.verdictReason = roll.verdictReason;
    }
    this._alarm(alarm, roll);
    this._emit("verdict", roll);
  }

  _alarm(message, event) {
    if (!message) return;
    const alarm = { message, seq: event?.seq ?? null, event: event ?? null };
    this.alarms.push(alarm);
    if (this.alarms.length > 100) this.alarms.shift();
    this._emit("alarm", alarm);
  }

  /** The roller seed this client sent for `roll`, checked against the one the roll carries: an alarm or null. */
  _ownSeedAlarm(sent, roll) {
    if (!sent || !roll || roll.sealed === true || !roll.fair || typeof roll.fair !== "object") return null;
    if (roll.fair.pending != null) return null; // a witnessed roll's transcript holds no roller seed
    const got = roll.fair.seed;
    if (got instanceof Uint8Array && got.length === sent.length && got.every((b, i) => b === sent[i])) return null;
    this._seeds.fail(roll, got == null ? "the roller seed this client sent was left out" : "the roller seed this client sent was replaced");
    return `Roll ${roll.seq} failed its fairness check: ${roll.verdictReason}.`;
  }

  _checkOwnSeed(sent, event) {
    if (!event || typeof event !== "object" || event.fair === undefined) return; // a server without fair dice
    if (event.sealed === true) {
      this._ownSealed.set(event.seq, sent); // checked when the roll is revealed
      if (this._ownSealed.size > ROLL_SEEDS) this._ownSealed.delete(this._ownSealed.keys().next().value);
      return;
    }
    const alarm = this._ownSeedAlarm(sent, event);
    if (alarm) this._verdictChanged(event, alarm);
  }

  _remember(event) {
    this._recent.set(event.seq, event);
    if (this._recent.size > RECENT_EVENTS) this._recent.delete(this._recent.keys().next().value);
  }

  _applyToState(event) {
    applyToState(this.state, event);
    if (event.kind === "rename" && event.member && this.you?.id === event.member.id) this.you = event.member;
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

  /**
   * Roll: resolves with the stored event (the full roll, or a sealed placeholder for a blind roll you are
   * not the GM of). Rejects with a TableRelayError carrying the server's code and message.
   * If the connection drops before the answer, the roll is sent again with the same id after the resume,
   * and the server answers with the first result: never a second roll.
   */
  roll(intent, { visibility = "public", label, id, seed } = {}) {
    const frame = { t: "roll", id: id ?? this._newId(), intent, visibility };
    if (label !== undefined && label !== null && label !== "") frame.label = label;
    // The roller's contribution to its dice (spec/fairness.md): 16 fresh bytes from the CSPRNG, the same
    // bytes for every send of the same id (a resend after a drop sends this very frame again).
    frame.seed = seed ?? this._rollSeeds.get(frame.id) ?? newRollerSeed();
    this._rollSeeds.set(frame.id, frame.seed);
    if (this._rollSeeds.size > ROLL_SEEDS) this._rollSeeds.delete(this._rollSeeds.keys().next().value);
    return this._request(frame).then((event) => {
      this._checkOwnSeed(frame.seed, event);
      return event;
    });
  }

  /**
   * GM only: reveal the room's open dice seed now (the next one is committed at once). Resolves with the
   * `seed_reveal` event; every roll that waited for the seed gets its verdict (listen to "verdict").
   */
  revealSeed() {
    return this._request({ t: "seed", id: this._newId(), op: "reveal" });
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

  /** The last events seen (up to 1000), by seq. */
  event(seq) {
    return this._recent.get(seq);
  }
}
