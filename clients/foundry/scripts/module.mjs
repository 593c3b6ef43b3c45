// The module at run time: the object Foundry's hooks call (init, ready), the hooks it listens to, and its API
// for macros and other modules. Its concerns each have their file, whose functions take this object:
//   settings.mjs    the settings, the connection window and the relay's address
//   connection.mjs  the relay connection (status, resume cursor), the Fear and Hope panel, Fear mirrored
//   dice.mjs        Foundry's dice through the relay: the fulfillment method, Roll#evaluate, faces requests
//   posting.mjs     relay events posted as ChatMessages, and reveals turning sealed cards into the roll
//   marks.mjs       each message's mark: this client's check of it against the relay's signatures
//   fairness.mjs    each relay roll's fair dice verdict beside that mark, and the alarms' notice and banner
//
// Everything Foundry is reached through `env` (in Foundry, globalThis), so the Node tests can run several
// Foundry clients side by side in one process, each with its own harness of the globals.

import { CommandError, parseCommand } from "./commands.mjs";
import { connect, connectedClient, guardFear, renderPanel } from "./connection.mjs";
import { applyDefaultMethod, installDice, markOwnRoll, requestFaces, rollsThroughRelay, tellOutage } from "./dice.mjs";
import { FacesBroker } from "./fulfillment.mjs";
import { decorate, unshown, verdict } from "./marks.mjs";
import { messagesFor, users } from "./posting.mjs";
import { installDaggerheart } from "./systems/daggerheart.mjs";
import { installDrawSteel } from "./systems/drawsteel.mjs";
import { MODULE_ID, connectionValues, localizeChoices, registerSettings, saveConnection } from "./settings.mjs";

export { FACES_TIMEOUT_MS } from "./dice.mjs";
export { MODULE_ID, relayAddress } from "./settings.mjs";

/**
 * Foundry's globals as foundry-vtt-types declares them (tests/foundry_types checks this file against them).
 * `game` is the ready one (tests/foundry_types/module-env.d.ts assumes the ready hook ran): the module reaches
 * the parts Foundry sets up later than init (the user, users, messages, ui.notifications) only after ready.
 * @typedef {object} FoundryEnv
 * @property {typeof game} game
 * @property {typeof Hooks} Hooks
 * @property {typeof CONFIG} CONFIG
 * @property {typeof ChatMessage} ChatMessage
 * @property {typeof ui} ui
 * @property {typeof foundry} foundry
 * @property {Document|null} [document]
 * @property {typeof foundry.dice.Roll} [Roll]
 * @property {typeof WebSocket} [WebSocket]
 */

export class TableRelayModule {
  /** @param {FoundryEnv} env  Foundry's globals (in Foundry, globalThis itself) */
  constructor(env) {
    this.env = env;
    /** @type {import("./client.mjs").TableRelay|null} */
    this.client = null;
    this.status = "idle";
    /** events this client has posted (room:epoch:seq), so one event is never posted twice while a create is in flight */
    this.posted = new Set();
    this.previousMethod = "";
    this.outage = false;
    /** @type {{ fear?: number, hope?: number }} the room's caps, from the welcome */
    this.limits = {};
    /** the room's last seq as of the latest welcome: no genuine message shows a later one yet */
    this.head = 0;
    /** the relay rolls fair dice in this room (its welcome names an open dice seed): the GM's panel offers its reveal */
    this.fairDice = false;
    /** @type {Promise<unknown>} relay events are posted one after another, in seq order */
    this.posting = Promise.resolve();
    /** @type {Map<string, import("./marks.mjs").Check>} this client's checks of chat messages, by message and content */
    this.checks = new Map();
    /** @type {{ source: unknown, keys: Promise<Map<string, { x: Uint8Array }>|null>, failed?: number } | null} the relay's keys, where they came from, and when they could not be had */
    this.keys = null;
    /** @type {Map<string, string>|null} which message shows each relay event first (check.firstShown), until the chat changes */
    this.shownIndex = null;
    /** @type {WeakMap<object, import("./systems/relayed.mjs").Claim>} game systems' rolls the relay resolves, until they evaluate */
    this.claims = new WeakMap();
    /** @type {Set<string>} relay events (room:epoch:seq) a game system's own message shows: never posted as relay rolls here */
    this.claimed = new Set();
    /** @type {Set<Promise<unknown>>} claimed rolls still on their way to the relay */
    this.inFlight = new Set();
    /** @type {Array<(roll: any) => import("./systems/relayed.mjs").Claim|undefined>} system modules that claim a roll as it evaluates */
    this.claimers = [];
    /** @type {WeakMap<object, string>} game systems' rolls the relay gives faces but does not resolve, and why */
    this.unresolved = new WeakMap();
    /** @type {number|undefined} the Fear the Daggerheart system's setting last showed from the relay (connection.mjs) */
    this.fearShown = undefined;
    /** @type {import("./systems/drawsteel.mjs").PowerPrompt|null} a Draw Steel dialog's final choices, waiting for its rolls */
    this.powerPrompt = null;
    /** @type {Map<string, { seq: number, ts: number, actor: { id: string, name: string }, values: number[] }>} faces events received, by room:epoch:seq */
    this.faces = new Map();
    /** @type {Map<string, import("./fairness.mjs").Judgement>} this client's verdicts on the fair dice of the rolls it received, by room:epoch:seq */
    this.judgements = new Map();
    /** @type {Map<string, Set<{ slot: Element, keys: string[], check: import("./check.mjs").Verdict|null }>>} the cards' verdict marks drawn (and their signature checks), by the roll they show, to redraw */
    this.fairSlots = new Map();
    /** @type {Array<{ message: string, seq: number|null }>} this session's fairness alarms, newest first (the red banner) */
    this.alarms = [];
    this.broker = new FacesBroker({
      request: (request) => requestFaces(this, request),
      connected: () => this.connected,
      policy: () => this.setting("unreachable") === "refuse" ? "refuse" : "fallback",
      onUnavailable: (reason) => tellOutage(this, reason),
      text: (key, data) => this.text(key, data),
    });
    const module = this;
    /** The API for macros and other modules: game.modules.get("tablerelay").api */
    this.api = Object.freeze({
      /**
       * Roll an intent through the relay; resolves with the stored event (its `result` is the resolved roll).
       * @param {import("./client.mjs").Intent} intent
       * @param {{ visibility?: "public"|"gm"|"blind"|"self", label?: string }} [options]
       */
      roll: (intent, options = {}) => module.roll(intent, options),
      /**
       * This client's own check of a chat message against the relay's signatures (what its mark shows).
       * @param {ChatMessage.Implementation} message
       */
      check: (message) => module.verdict(message),
      /**
       * The relay's rolls of faces for Foundry rolls that no chat message of this world shows, of those this
       * client received in full (a GM, all but players' self rolls): a roll made and not shown, or one still on its way.
       */
      unshown: () => module.unshown(),
      reveal: (/** @type {number} */ seq) => connectedClient(module).reveal(seq),
      /** GM only: reveal the room's open dice seed now (spec/fairness.md); every card waiting for it gets its verdict. */
      revealSeed: () => connectedClient(module).revealSeed(),
      resource: (/** @type {"fear"|"hope"} */ name, /** @type {"gain"|"spend"|"set"} */ op, /** @type {number} */ n, options = {}) =>
        connectedClient(module).resource(name, op, n, options),
      get connected() {
        return module.connected;
      },
      get status() {
        return module.status;
      },
      get state() {
        return module.client?.state ?? null;
      },
      get client() {
        return module.client;
      },
    });
  }

  get connected() {
    return this.client?.status === "open";
  }

  get game() {
    return this.env.game;
  }

  /**
   * A sentence of lang/*.json in this client's language. Only for what runs after i18nInit (Foundry loads
   * translations after the init hook: init → i18nInit → setup → ready); what is registered during init
   * passes the keys themselves, which Foundry localizes when it renders them.
   * @param {string} key
   * @param {Record<string, string>} [data]  the sentence's `{placeholders}`
   */
  text(key, data) {
    const { i18n } = this.game;
    return data ? i18n.format(key, data) : i18n.localize(key);
  }

  /**
   * A notification, worded in this client's language.
   * @param {"info"|"warn"|"error"} level @param {string} key @param {Record<string, string>} [data]
   */
  notify(level, key, data) {
    this.env.ui.notifications[level](this.text(key, data));
  }

  /**
   * One of the module's settings, typed as module-env.d.ts declares it.
   * @template {ClientSettings.KeyFor<typeof MODULE_ID>} K
   * @param {K} key
   * @returns {ClientSettings.SettingInitializedType<typeof MODULE_ID, K>}
   */
  setting(key) {
    return this.game.settings.get(MODULE_ID, key);
  }

  // ---- start-up ---------------------------------------------------------------------------------------

  init() {
    registerSettings(this);
    installDice(this);
    installDaggerheart(this);
    installDrawSteel(this);
    const { Hooks } = this.env;
    Hooks.once("i18nInit", () => localizeChoices(this));
    Hooks.on("chatMessage", (/** @type {unknown} */ _log, /** @type {string} */ text) => this.#chatCommand(text));
    Hooks.on("preCreateChatMessage", (/** @type {ChatMessage.Implementation} */ message) => markOwnRoll(this, message));
    const v13 = Number(this.game.release?.generation ?? 13) >= 13;
    // v13 hands the hook an HTMLElement, v12 a jQuery object.
    Hooks.on(v13 ? "renderChatMessageHTML" : "renderChatMessage", (/** @type {any} */ message, /** @type {any} */ html) =>
      decorate(this, message, html?.jquery ? html[0] : html),
    );
    Hooks.on("updateSetting", (/** @type {Setting.Implementation} */ setting) => guardFear(this, setting));
    for (const hook of /** @type {const} */ (["createChatMessage", "updateChatMessage", "deleteChatMessage"])) {
      Hooks.on(hook, () => (this.shownIndex = null));
    }
    Hooks.on("userConnected", () => this.renderPanel());
    const entry = this.game.modules.get(MODULE_ID);
    if (entry) entry.api = this.api;
  }

  ready() {
    this.renderPanel();
    this.connect();
  }

  // ---- settings and the connection (settings.mjs, connection.mjs) ------------------------------------

  /** What the connection form shows (never the token itself). */
  connectionValues() {
    return connectionValues(this);
  }

  /**
   * The connection form's submit: the GM may change the address; anyone may paste or forget a token.
   * @param {{ relayUrl?: unknown, token?: unknown }} values  the form's fields (FormDataExtended#object)
   * @param {boolean} forget
   */
  async saveConnection(values, forget = false) {
    return saveConnection(this, values, forget);
  }

  /** Open the connection the settings name (closing any other). */
  connect() {
    connect(this);
  }

  /** Draw the panel of status, Fear and Hope again. */
  renderPanel() {
    renderPanel(this);
  }

  // ---- rolls (dice.mjs) -------------------------------------------------------------------------------

  /** Foundry's dice default to the relay while rolls go through it (a user's per-die choice still wins). */
  applyDefaultMethod() {
    applyDefaultMethod(this);
  }

  /** Every roll goes through the relay: the world says so and this browser is set up for it. */
  rollsThroughRelay() {
    return rollsThroughRelay(this);
  }

  /**
   * @param {import("./client.mjs").Intent} intent
   * @param {{ visibility?: "public"|"gm"|"blind"|"self", label?: string }} options
   */
  async roll(intent, { visibility = "public", label } = {}) {
    return connectedClient(this).roll(intent, { visibility, label });
  }

  // ---- chat commands ----------------------------------------------------------------------------------

  /** chatMessage: `/tr …` goes to the relay; returning false keeps Foundry from handling the line. */
  #chatCommand(/** @type {string} */ text) {
    let parsed;
    try {
      parsed = parseCommand(text);
    } catch (err) {
      if (err instanceof CommandError) {
        this.notify("error", "TABLERELAY.Notify.Error", { message: this.text(err.key, err.data) });
        return false;
      }
      throw err;
    }
    if (!parsed) return true;
    // The relay's own error sentences are shown as the relay words them.
    this.roll(parsed.intent, { visibility: parsed.visibility, label: parsed.label }).catch((/** @type {Error} */ err) =>
      this.notify("error", "TABLERELAY.Notify.Error", { message: err.message }),
    );
    return false;
  }

  // ---- the chat (posting.mjs, marks.mjs) --------------------------------------------------------------

  /** Foundry's users as the poster and audience rules see them. */
  users() {
    return users(this);
  }

  /**
   * Messages whose flags name a relay event of this room (a roll's, or the one its reveal turned).
   * @param {string} room @param {string} epoch @param {number} seq
   */
  messagesFor(room, epoch, seq) {
    return messagesFor(this, room, epoch, seq);
  }

  /** Wait until every relay event received so far is posted (or skipped). */
  settled() {
    return this.posting;
  }

  /**
   * This client's check of a message against the relay's signatures (what its mark shows), kept per message
   * and content.
   * @param {ChatMessage.Implementation} message
   * @returns {Promise<import("./check.mjs").Verdict>}
   */
  verdict(message) {
    return verdict(this, message);
  }

  /** The relay's faces that no chat message of this world shows (see the API's `unshown`), oldest first. */
  unshown() {
    return unshown(this);
  }
}
