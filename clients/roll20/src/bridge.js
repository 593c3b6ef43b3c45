// The bridge: one relay connection (the thin JS client) mapped onto one Roll20 chat.
//
// Connection, resume and reveal checks are the JS client's (clients/js); this file only decides what each
// relay event becomes in Roll20's chat, who posts it (election.js), remembers what was posted (posted.js),
// and turns `!tr` commands into roll requests.

import { TableRelay } from "../../js/tablerelay.js";
import { postsFor } from "./chatline.js";
import { CommandError, parseCommand } from "./commands.js";
import { schedule } from "./election.js";
import { FairBook } from "./fairness.js";
import { PostedLog } from "./posted.js";
import { normalizeSettings } from "./settings.js";

/** @typedef {import("./storage.js").Store} Store */
/** @typedef {import("./roll20-chat.js").Roll20Chat} Roll20Chat */
/** @typedef {import("./settings.js").Settings} Settings */
/** @typedef {"off" | "connecting" | "connected" | "reconnecting" | "error"} BadgeStatus */

/**
 * What the bridge shows besides the chat: the overlay in the page (ui/overlay.js) or nothing in tests.
 * @typedef {object} View
 * @property {(status: BadgeStatus, detail?: string) => void} status
 * @property {(state: { fear: number, hope: Record<string, number>, limits: { fear: number, hope: number }, you: { id: string, role: string } | null, names: Record<string, string> }) => void} state
 * @property {(message: string) => void} error
 * @property {(message: string) => void} note  a private line only this player sees (a self roll's result)
 * @property {(book: FairBook) => void} [fair]  fair dice: the verdicts of the rolls linked, and the alarms (a
 *   red banner); called whenever either changes
 */

/** @type {View} */
const NO_VIEW = { status() {}, state() {}, error() {}, note() {} };

// A cheap, stable key for "the session token for this token" without storing the token twice in clear.
async function tokenKey(token) {
  const digest = await globalThis.crypto.subtle.digest("SHA-256", new TextEncoder().encode(token));
  return [...new Uint8Array(digest).slice(0, 12)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

export class Bridge {
  /**
   * @param {object} parts
   * @param {Store} parts.store the extension's or userscript manager's storage
   * @param {Roll20Chat} parts.chat
   * @param {Partial<Settings>} parts.settings
   * @param {View} [parts.view]
   * @param {typeof TableRelay} [parts.Client] the relay client class (tests pass their own WebSocket through options)
   * @param {object} [parts.clientOptions] passed to the client (WebSocket, minDelay …)
   */
  constructor({ store, chat, settings, view = NO_VIEW, Client = TableRelay, clientOptions = {} }) {
    this.store = store;
    this.chat = chat;
    this.settings = normalizeSettings(settings);
    this.view = view;
    this.Client = Client;
    this.clientOptions = clientOptions;
    /** @type {TableRelay | null} */
    this.client = null;
    /** @type {PostedLog | null} */
    this.log = null;
    this.limits = { fear: 12, hope: 6 };
    /** Names of everyone seen in this room (members come and go; Hope stays). */
    this.names = /** @type {Record<string, string>} */ ({});
    this._chain = Promise.resolve();
    this._timers = new Set();
    /** seq -> fallback posts still waiting for it */
    this._waiting = new Map();
    /** The highest seq delivered on this connection's log. */
    this._seen = 0;
    this._stopIntercept = null;
    /** Fair dice (spec/fairness.md): this browser's verdicts on the rolls it links, and its alarms. */
    this.fair = new FairBook();
  }

  /** Connect and start posting. Resolves with the first welcome (rejects if the token is refused). */
  async start() {
    const { relayUrl, token } = this.settings;
    this._stopIntercept = this.chat.intercept((text) => this.command(text));
    if (!relayUrl || !token) {
      this.view.status("off", "Set the relay address and your token in the settings.");
      return null;
    }
    this._sessionKey = `session:${await tokenKey(token)}`;
    const session = (await this.store.get(this._sessionKey)) ?? null;
    const name = this.settings.name || undefined;
    const client = new this.Client(relayUrl, token, { ...this.clientOptions, formats: ["roll20"], session, name });
    this.client = client;
    client.on("status", (status) => this._status(status));
    client.on("close", (error) => this.view.status("error", error.message));
    client.on("error", (error) => {
      if (error.code !== "gap") this.view.error(error.message);
    });
    client.on("welcome", (welcome, info) => {
      this._chain = this._chain.then(() => this._welcome(welcome, info)).catch((e) => this.view.error(String(e)));
    });
    client.on("event", (event, info) => {
      // The members as of this event: the election must see what every other bridge sees at this seq.
      const members = client.state.members.map((m) => ({ ...m }));
      this._remember(event);
      this._chain = this._chain.then(() => this._event(event, info, members)).catch((e) => this.view.error(String(e)));
    });
    client.on("state", () => this._showState());
    // The JS client judges every roll of a fair room as it arrives, again when its seed (or the hidden roll)
    // is revealed, and raises an alarm when the server's dice do not check out.
    client.on("roll", (event) => {
      if (this.fair.note(event)) this.view.fair?.(this.fair);
    });
    client.on("verdict", (event) => {
      if (this.fair.note(event, { add: false })) this.view.fair?.(this.fair);
    });
    client.on("alarm", (alarm) => {
      if (this.fair.alarm(alarm)) this.view.fair?.(this.fair);
    });
    return client.connect();
  }

  /** Disconnect for good and stop every pending fallback post. */
  stop() {
    this._stopIntercept?.();
    for (const timer of this._timers) clearTimeout(timer);
    this._timers.clear();
    this.client?.close();
    this.view.status("off");
  }

  /** Resolves when every event received so far has been dealt with (tests wait on it). */
  settled() {
    return this._chain;
  }

  _status(status) {
    const map = { idle: "off", connecting: "connecting", open: "connected", reconnecting: "reconnecting", closed: "off" };
    if (status !== "closed") this.view.status(/** @type {BadgeStatus} */ (map[status] ?? "connecting"));
  }

  async _welcome(welcome, { fresh }) {
    if (welcome.session && this._sessionKey) await this.store.set(this._sessionKey, welcome.session);
    if (welcome.limits) this.limits = { fear: welcome.limits.fear ?? 12, hope: welcome.limits.hope ?? 6 };
    for (const m of welcome.state?.members ?? []) this.names[m.id] = m.name;
    const roomId = welcome.room.id;
    if (fresh || !this.log || this.log.key !== `posted:${roomId}:${welcome.epoch}`) {
      this.log = await new PostedLog(this.store, roomId, welcome.epoch).load();
      this._waiting.clear();
      this._seen = this.log.upTo;
      this._context = { roomId, epoch: welcome.epoch, relayUrl: this.settings.relayUrl };
    }
    // A room seen for the first time: its history is the past, nothing of it is posted.
    if (!this.log.known) await this.log.through(welcome.seq);
    this._showState();
  }

  _remember(event) {
    if (event.actor?.id && event.actor.name) this.names[event.actor.id] = event.actor.name;
    if (event.member?.id && event.member.name) this.names[event.member.id] = event.member.name;
  }

  async _event(event, info, members) {
    const log = this.log;
    const client = this.client;
    if (!log || !client?.you) return;
    // The replayed history of a fresh welcome: only the part after what this browser dealt with before.
    if (info.replay && (!log.known || event.seq <= log.upTo)) return;
    const me = client.you;
    if (event.kind === "roll" && !event.sealed && event.visibility === "self" && event.actor.id === me.id) {
      // Nobody else may see a self roll, and Roll20 has no message only its sender sees: show it here.
      this.view.note(`Your self roll (#${event.seq}): ${event.result?.text ?? ""}`);
    }
    const ctx = { ...this._context, recall: (seq) => client.event(seq) };
    this._seen = Math.max(this._seen, event.seq);
    for (const post of postsFor(event, ctx)) {
      if (log.has(post.key)) continue;
      const plan = schedule(post, event, members, me, this.settings);
      if (!plan) continue;
      if (plan.at === 0) {
        await this._post(post, log);
        continue;
      }
      // A fallback: until it has run, this event is not "dealt with", so a reload before then takes it up
      // again (and looks at the chat first) instead of losing it.
      this._waiting.set(event.seq, (this._waiting.get(event.seq) ?? 0) + 1);
      const timer = setTimeout(() => {
        this._timers.delete(timer);
        this._chain = this._chain
          .then(() => this._post(post, log, { check: true }))
          .finally(() => this._done(event.seq, log))
          .catch((e) => this.view.error(String(e)));
      }, plan.at);
      this._timers.add(timer);
    }
    await log.through(this._dealtWith());
  }

  /** The last seq up to which every event is dealt with: before the oldest one with a fallback waiting. */
  _dealtWith() {
    let upTo = this._seen;
    for (const seq of this._waiting.keys()) upTo = Math.min(upTo, seq - 1);
    return upTo;
  }

  async _done(seq, log) {
    const left = (this._waiting.get(seq) ?? 1) - 1;
    if (left > 0) this._waiting.set(seq, left);
    else this._waiting.delete(seq);
    if (log === this.log) await log.through(this._dealtWith());
  }

  /** Post unless this browser or any bridge in the game already did. */
  async _post(post, log, { check = false } = {}) {
    await log.refresh();
    if (log.has(post.key)) return;
    // A fallback looks at the chat first; so does any post after a reload (the chat shows what was posted).
    if ((check || log.known) && this.chat.shows(post.tag)) {
      await log.add(post.key);
      return;
    }
    await this.chat.post(post.text);
    await log.add(post.key);
  }

  /** A `!tr …` line from Roll20's chat. */
  async command(text) {
    let parsed;
    try {
      parsed = parseCommand(text);
    } catch (err) {
      this.view.error(err instanceof CommandError ? err.message : String(err));
      return;
    }
    if (!parsed) return;
    if (!this.client) {
      this.view.error("tablerelay is not connected: open its settings and set the relay address and your token.");
      return;
    }
    try {
      await this.client.roll(parsed.intent, { visibility: parsed.visibility, label: parsed.label });
    } catch (err) {
      this.view.error(`${text.trim()}: ${err?.message ?? err}`);
    }
  }

  /**
   * Change Fear or Hope through the relay (the overlay's buttons).
   * @param {"fear" | "hope"} name
   * @param {"gain" | "spend"} op
   * @param {string} [participant]
   */
  async resource(name, op, participant) {
    if (!this.client) return;
    try {
      await this.client.resource(name, op, 1, participant ? { participant } : {});
    } catch (err) {
      this.view.error(err?.message ?? String(err));
    }
  }

  _showState() {
    const client = this.client;
    if (!client) return;
    const state = client.state;
    const hope = Object.fromEntries(Object.entries(state.hope).map(([k, v]) => [k, Number(v)]));
    // A player who joined since the welcome has Hope 0 on the relay (its fold starts every player at 0)
    // but no resource event says so; show the row anyway.
    for (const m of state.members) if (m.role === "player" && !(m.id in hope)) hope[m.id] = 0;
    this.view.state({
      fear: Number(state.fear),
      hope,
      limits: this.limits,
      you: client.you ? { id: client.you.id, role: client.you.role } : null,
      names: { ...this.names },
    });
  }
}
