// The module at run time: settings, the relay connection, dice fulfillment, chat commands, relay events
// posted as ChatMessages, the Fear and Hope panel and the API.
//
// Everything Foundry is reached through `env` (in Foundry, globalThis), so the Node tests can run several
// Foundry clients side by side in one process, each with its own harness of the globals.

import { isPosted, posterFor, visibilityOf } from "./audience.mjs";
import { TableRelay, TableRelayError, eventPageUrl, importKeys } from "./client.mjs";
import { checkMessage, firstShown, plainVerdict, rollsKey, shownBefore, shownTwice } from "./check.mjs";
import { CommandError, parseCommand } from "./commands.mjs";
import { FacesBroker, METHOD } from "./fulfillment.mjs";
import { FLAG_SCOPE, revealUpdate, rollMessages, signatureOf } from "./messages.mjs";
import { connectionFormHTML, markHTML, panelHTML } from "./ui.mjs";

export const MODULE_ID = "tablerelay";
/** How long a faces request may take before the roll falls back or is refused. */
export const FACES_TIMEOUT_MS = 8000;
/** Faces events kept for `unshown`, the newest. */
const FACES_KEPT = 1000;
/** How long the relay's published keys may take to arrive. */
const KEYS_TIMEOUT_MS = 10_000;
/** Checks of chat messages kept, the newest: a message shown again after that is checked again. */
const KEPT_CHECKS = 1000;
/** How long a message this client could not check (no keys) waits before it is checked again. */
const UNCHECKED_RETRY_MS = 30_000;

/**
 * One check of a message by this client: its verdict once made, and the keys it was made with.
 * @typedef {{ promise: Promise<import("./check.mjs").Verdict>, value?: import("./check.mjs").Verdict, keys: Promise<Map<string, { x: Uint8Array }>|null> }} Check
 */

/**
 * The relay's WebSocket address from what a GM typed: `relay.example.org`, `https://relay.example.org` and
 * `wss://relay.example.org/ws` all name the same socket.
 * @param {string} text
 * @returns {string} the ws(s) URL, or "" when there is nothing usable
 */
export function relayAddress(text) {
  let value = String(text ?? "").trim();
  if (!value) return "";
  if (!/^[a-z]+:\/\//i.test(value)) value = `wss://${value}`;
  let url;
  try {
    url = new URL(value);
  } catch {
    return "";
  }
  if (url.protocol === "http:") url.protocol = "ws:";
  else if (url.protocol === "https:") url.protocol = "wss:";
  if (url.protocol !== "ws:" && url.protocol !== "wss:") return "";
  if (url.pathname === "/" || url.pathname === "") url.pathname = "/ws";
  url.hash = "";
  return url.toString();
}

/** A short, non-secret key of a token: a stored session or resume cursor belongs to one token. */
function tokenKey(/** @type {string} */ token) {
  return token.slice(-12);
}

/** A promise that rejects after `ms` unless `promise` settles first, with the sentence `message()` words. */
function withTimeout(/** @type {Promise<any>} */ promise, /** @type {number} */ ms, /** @type {() => string} */ message) {
  /** @type {any} */
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(message())), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * The module's message data (rolls as Roll instances) as fvtt-types' ChatMessage data.
 * @param {import("./messages.mjs").MessageData} data
 * @returns {ChatMessage.CreateData}
 */
function messageData(data) {
  // @ts-expect-error fvtt-types 13.340.1 takes only JSON strings in `rolls`; Foundry v13's JSONField#_cast stringifies a Roll
  return data;
}

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
    /** @type {TableRelay|null} */
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
    /** @type {Promise<unknown>} relay events are posted one after another, in seq order */
    this.posting = Promise.resolve();
    /** @type {Map<string, Check>} this client's checks of chat messages, by message and content */
    this.checks = new Map();
    /** @type {{ source: unknown, keys: Promise<Map<string, { x: Uint8Array }>|null>, failed?: number } | null} the relay's keys, where they came from, and when they could not be had */
    this.keys = null;
    /** @type {Map<string, string>|null} which message shows each relay event first (check.firstShown), until the chat changes */
    this.shownIndex = null;
    /** @type {Map<string, { seq: number, ts: number, actor: { id: string, name: string }, values: number[] }>} faces events received, by room:epoch:seq */
    this.faces = new Map();
    this.broker = new FacesBroker({
      request: (request) => this.#requestFaces(request),
      connected: () => this.connected,
      policy: () => this.setting("unreachable") === "refuse" ? "refuse" : "fallback",
      onUnavailable: (reason) => this.#tellOutage(reason),
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
      reveal: (/** @type {number} */ seq) => module.#need().reveal(seq),
      resource: (/** @type {"fear"|"hope"} */ name, /** @type {"gain"|"spend"|"set"} */ op, /** @type {number} */ n, options = {}) =>
        module.#need().resource(name, op, n, options),
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
    this.#registerSettings();
    const fulfillment = this.env.CONFIG.Dice.fulfillment;
    fulfillment.methods[METHOD] = {
      // A translation key, as core's own methods have ("DICE.FULFILLMENT.Mersenne"): Foundry's DiceConfig
      // (v12's and v13's) hands the labels to its template unchanged, which localizes them when it renders,
      // after the translations are loaded.
      label: "TABLERELAY.Fulfillment.Label",
      icon: '<i class="fa-solid fa-tower-broadcast"></i>',
      interactive: false,
      handler: (term) => this.broker.face(term),
      // fvtt-types requires a resolver, but Foundry v13 reads one only for an interactive method
      // (Roll.resolverImplementation: `method.resolver ?? RollResolver`), and its own non-interactive
      // "mersenne" has none. Naming Foundry's default resolver satisfies the type and changes nothing.
      resolver: this.env.foundry?.applications?.dice?.RollResolver,
    };
    this.previousMethod = fulfillment.defaultMethod;
    this.#wrapEvaluate();
    const { Hooks } = this.env;
    Hooks.once("i18nInit", () => this.#localizeChoices());
    Hooks.on("chatMessage", (/** @type {unknown} */ _log, /** @type {string} */ text) => this.#chatCommand(text));
    Hooks.on("preCreateChatMessage", (/** @type {ChatMessage.Implementation} */ message) => this.#markOwnRoll(message));
    const v13 = Number(this.game.release?.generation ?? 13) >= 13;
    // v13 hands the hook an HTMLElement, v12 a jQuery object.
    Hooks.on(v13 ? "renderChatMessageHTML" : "renderChatMessage", (/** @type {any} */ message, /** @type {any} */ html) =>
      this.#decorate(message, html?.jquery ? html[0] : html),
    );
    Hooks.on("updateSetting", (/** @type {Setting.Implementation} */ setting) => this.#guardFear(setting));
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

  #registerSettings() {
    const { settings } = this.game;
    const reconnect = () => this.connect();
    // Names, hints and menu texts are translation keys: the settings window localizes them as it renders
    // (v12's and v13's SettingsConfig call game.i18n.localize on name and hint; their templates localize the
    // menus'). During init the translations are not loaded yet, so a string localized here would be the key.
    settings.register(MODULE_ID, "relayUrl", {
      name: "TABLERELAY.Settings.relayUrl.Name",
      hint: "TABLERELAY.Settings.relayUrl.Hint",
      scope: "world",
      config: true,
      type: String,
      default: "",
      onChange: reconnect,
    });
    settings.register(MODULE_ID, "rolls", {
      name: "TABLERELAY.Settings.rolls.Name",
      hint: "TABLERELAY.Settings.rolls.Hint",
      scope: "world",
      config: true,
      type: String,
      choices: { all: "TABLERELAY.Settings.rolls.Choices.all", commands: "TABLERELAY.Settings.rolls.Choices.commands" },
      default: "all",
      onChange: () => this.applyDefaultMethod(),
    });
    settings.register(MODULE_ID, "unreachable", {
      name: "TABLERELAY.Settings.unreachable.Name",
      hint: "TABLERELAY.Settings.unreachable.Hint",
      scope: "world",
      config: true,
      type: String,
      choices: { fallback: "TABLERELAY.Settings.unreachable.Choices.fallback", refuse: "TABLERELAY.Settings.unreachable.Choices.refuse" },
      default: "fallback",
    });
    settings.register(MODULE_ID, "showVerified", {
      name: "TABLERELAY.Settings.showVerified.Name",
      hint: "TABLERELAY.Settings.showVerified.Hint",
      scope: "world",
      config: true,
      type: Boolean,
      default: true,
    });
    // Tokens are secrets: stored in this browser only (client scope), never in world data every client gets.
    settings.register(MODULE_ID, "token", { scope: "client", config: false, type: String, default: "", onChange: reconnect });
    // The session token and the last event seen, so a reload rejoins as the same participant and resumes.
    settings.register(MODULE_ID, "cursor", { scope: "client", config: false, type: Object, default: {} });
    const module = this;
    const ApplicationV2 = this.env.foundry?.applications?.api?.ApplicationV2;
    if (ApplicationV2) {
      class ConnectionForm extends ApplicationV2 {
        static DEFAULT_OPTIONS = {
          id: "tablerelay-connection",
          tag: "form",
          // ApplicationV2#title localizes this key when the window renders.
          window: { title: "TABLERELAY.Connection.Title", icon: "fa-solid fa-tower-broadcast" },
          position: { width: 520 },
          form: {
            closeOnSubmit: true,
            /**
             * @param {SubmitEvent|Event} event
             * @param {HTMLFormElement} _form
             * @param {FormDataExtended} data  its `object` holds the form's fields
             */
            handler: (event, _form, data) => {
              // Which button submitted the form: "forget" drops the token.
              const submitter = "submitter" in event ? event.submitter : null;
              return module.saveConnection(data.object, submitter?.getAttribute("name") === "forget");
            },
          },
        };

        async _renderHTML() {
          return connectionFormHTML(module.connectionValues(), module.game.i18n);
        }

        /** @param {string} result @param {HTMLElement} content */
        _replaceHTML(result, content) {
          content.innerHTML = result;
        }
      }
      settings.registerMenu(MODULE_ID, "connection", {
        name: "TABLERELAY.Settings.connection.Name",
        label: "TABLERELAY.Settings.connection.Label",
        hint: "TABLERELAY.Settings.connection.Hint",
        icon: "fa-solid fa-tower-broadcast",
        type: ConnectionForm,
        restricted: false,
      });
    }
  }

  /**
   * i18nInit: the settings' choice labels, registered as keys during init, worded now that translations are
   * loaded. v13's SettingsConfig makes a StringField of a setting's `choices` and its template localizes the
   * labels (core's own settings give keys as choices); for v12's template (settings-config-category.html)
   * that could not be confirmed, so the module does it itself, once, before any settings window can open
   * (i18nInit runs before setup and ready). Where Foundry localizes them too, a worded label localizes to
   * itself.
   */
  #localizeChoices() {
    for (const key of /** @type {const} */ (["rolls", "unreachable"])) {
      // fvtt-types types the registry's `choices` from the value type, which the Map's entries leave unknown.
      const choices = /** @type {Record<string, string> | undefined} */ (
        /** @type {unknown} */ (this.game.settings.settings.get(`${MODULE_ID}.${key}`)?.choices)
      );
      if (!choices) continue;
      for (const [value, label] of Object.entries(choices)) choices[value] = this.text(label);
    }
  }

  /** What the connection form shows (never the token itself). */
  connectionValues() {
    return {
      relayUrl: this.setting("relayUrl"),
      hasToken: Boolean(this.setting("token")),
      isGM: Boolean(this.game.user.isGM),
      status: this.status,
      participant: this.client?.you?.id ?? null,
    };
  }

  /**
   * The connection form's submit: the GM may change the address; anyone may paste or forget a token.
   * @param {{ relayUrl?: unknown, token?: unknown }} values  the form's fields (FormDataExtended#object)
   * @param {boolean} forget
   */
  async saveConnection(values, forget = false) {
    const { settings } = this.game;
    if (this.game.user.isGM && typeof values.relayUrl === "string" && values.relayUrl !== this.setting("relayUrl")) {
      if (values.relayUrl && !relayAddress(values.relayUrl)) {
        this.notify("error", "TABLERELAY.Notify.BadAddress");
        return;
      }
      await settings.set(MODULE_ID, "relayUrl", values.relayUrl.trim());
    }
    const token = typeof values.token === "string" ? values.token.trim() : "";
    if (forget) await settings.set(MODULE_ID, "token", "");
    else if (token) await settings.set(MODULE_ID, "token", token);
    this.connect();
  }

  // ---- the connection ---------------------------------------------------------------------------------

  connect() {
    if (this.client) {
      this.client.close();
      this.client = null;
    }
    const url = relayAddress(this.setting("relayUrl"));
    const token = this.setting("token");
    if (!url || !token) {
      this.#setStatus("idle");
      this.applyDefaultMethod();
      return;
    }
    const cursor = this.setting("cursor") ?? {};
    const mine = cursor.key === tokenKey(token);
    const client = new TableRelay(url, token, {
      formats: ["foundry"],
      name: this.game.user.name,
      session: mine && cursor.session ? cursor.session : undefined,
      WebSocket: this.env.WebSocket ?? globalThis.WebSocket,
    });
    if (mine && typeof cursor.epoch === "string") {
      // Resume where this browser left off: the events missed while it was away arrive as news.
      Object.assign(client, { epoch: cursor.epoch, seq: Number(cursor.seq) || 0 });
    }
    this.client = client;
    client.on("status", (/** @type {string} */ status) => {
      if (this.client !== client) return;
      this.#setStatus(status);
    });
    client.on("welcome", (/** @type {any} */ frame) => {
      if (this.client !== client) return;
      this.limits = frame.limits ?? {};
      this.head = Number.isInteger(frame.seq) ? frame.seq : 0;
      void this.#welcomed(client);
    });
    client.on("event", (event, info) => {
      if (this.client !== client) return;
      this.#saveCursor(client);
      this.env.Hooks.callAll("tablerelay.event", event, info);
      this.#noteFaces(client, event);
      this.posting = this.posting
        .then(() => this.#onEvent(client, event, info))
        .catch((/** @type {Error} */ err) => this.notify("error", "TABLERELAY.Notify.PostFailed", { seq: String(event.seq), error: err.message }));
    });
    client.on("state", () => {
      if (this.client !== client) return;
      this.renderPanel();
      this.#mirrorFear(Number(client.state.fear));
    });
    client.connect().catch((/** @type {Error} */ err) => {
      if (this.client !== client) return;
      this.notify("error", "TABLERELAY.Notify.TokenRefused", { error: err.message });
    });
    this.applyDefaultMethod();
  }

  /** Foundry's dice default to the relay while rolls go through it (a user's per-die choice still wins). */
  applyDefaultMethod() {
    const fulfillment = this.env.CONFIG.Dice.fulfillment;
    if (this.rollsThroughRelay()) fulfillment.defaultMethod = METHOD;
    else if (fulfillment.defaultMethod === METHOD) fulfillment.defaultMethod = this.previousMethod;
  }

  /** Every roll goes through the relay: the world says so and this browser is set up for it. */
  rollsThroughRelay() {
    return this.setting("rolls") === "all" && Boolean(relayAddress(this.setting("relayUrl"))) && Boolean(this.setting("token"));
  }

  #setStatus(/** @type {string} */ status) {
    const was = this.status;
    this.status = status;
    if (status === "open" && this.outage) {
      this.outage = false;
      this.notify("info", "TABLERELAY.Notify.Reconnected");
    } else if (status === "reconnecting" && was === "open") {
      this.notify("warn", "TABLERELAY.Notify.Lost");
    }
    this.renderPanel();
  }

  async #welcomed(/** @type {TableRelay} */ client) {
    if (this.client !== client || !client.you) return;
    this.#saveCursor(client);
    const user = this.game.user;
    if (user.getFlag(MODULE_ID, "participant") !== client.you.id) {
      // Other clients find this user's relay rolls (and who posts them) by this flag.
      await user.setFlag(MODULE_ID, "participant", client.you.id);
    }
    this.renderPanel();
    this.#mirrorFear(Number(client.state.fear));
  }

  #saveCursor(/** @type {TableRelay} */ client) {
    const token = this.setting("token");
    if (!token || !client.epoch) return;
    const cursor = { key: tokenKey(token), session: client.session, epoch: client.epoch, seq: client.seq };
    void this.game.settings.set(MODULE_ID, "cursor", cursor);
  }

  #need() {
    if (!this.client || !this.connected) {
      throw new TableRelayError("disconnected", this.text("TABLERELAY.Error.NotConnected"));
    }
    return this.client;
  }

  /**
   * @param {import("./client.mjs").Intent} intent
   * @param {{ visibility?: "public"|"gm"|"blind"|"self", label?: string }} options
   */
  async roll(intent, { visibility = "public", label } = {}) {
    return this.#need().roll(intent, { visibility, label });
  }

  // ---- dice fulfillment -------------------------------------------------------------------------------

  /** Wrap Roll#evaluate so every face a roll is known to need is asked for in one request. */
  #wrapEvaluate() {
    const Roll = this.env.foundry?.dice?.Roll ?? this.env.Roll;
    const original = Roll.prototype.evaluate;
    const module = this;
    Roll.prototype.evaluate = function evaluateThroughRelay(/** @type {any} */ options = {}) {
      if (!module.rollsThroughRelay() || options.minimize || options.maximize) return original.call(this, options);
      return module.#evaluate(this, options, original);
    };
  }

  /**
   * @param {any} roll
   * @param {any} options
   * @param {(options: any) => Promise<any>} original
   */
  async #evaluate(roll, options, original) {
    if (roll.options?.tablerelay) return original.call(roll, options); // evaluated through us already (a nested call)
    /** @type {Partial<Record<string, string>>} the fulfillment method per denomination (d4 … d100) */
    const config = this.game.settings.get("core", "diceConfiguration") ?? {};
    const fallback = this.env.CONFIG.Dice.fulfillment.defaultMethod;
    const methodOf = (/** @type {any} */ t) => config[t.denomination] || fallback;
    const terms = (roll.dice ?? []).filter((/** @type {any} */ t) => methodOf(t) === METHOD);
    const mode = roll.options?.rollMode ?? this.game.settings.get("core", "rollMode");
    let visibility = visibilityOf(mode);
    // Foundry evaluates a blind roll in the roller's own browser, so the roller's client must see its faces.
    if (visibility === "blind") visibility = "gm";
    const about = { formula: String(roll.formula ?? "").slice(0, 200), visibility };
    const context = await this.broker.prefetch(terms, about);
    // Dice the user set to another method (typed in by hand, say) make the whole roll not the relay's: its
    // message says so itself, as every other client's check of it would.
    const others = (roll.dice ?? []).filter((/** @type {any} */ t) => methodOf(t) !== METHOD);
    if (others.length && context.via) {
      const dice = [...new Set(others.map((/** @type {any} */ t) => `${t.denomination} (${methodOf(t)})`))].join(", ");
      Object.assign(context, { via: false, reason: this.text("TABLERELAY.Reason.OtherMethod", { dice }) });
    }
    roll.options = { ...(roll.options ?? {}), tablerelay: context };
    return original.call(roll, options);
  }

  /** @param {import("./fulfillment.mjs").Request} request */
  async #requestFaces({ dice, about }) {
    const client = this.#need();
    /** @type {import("./client.mjs").Intent} */
    const intent = { system: "faces", dice };
    if (about.formula) intent.formula = about.formula;
    const rolled = client.roll(intent, { visibility: about.visibility, label: about.label });
    const event = await withTimeout(rolled, FACES_TIMEOUT_MS, () =>
      this.text("TABLERELAY.Reason.Timeout", { seconds: String(FACES_TIMEOUT_MS / 1000) }),
    );
    if (event.sealed || !event.result) throw new Error(this.text("TABLERELAY.Reason.Sealed"));
    const room = client.room?.id;
    return {
      seq: event.seq,
      epoch: event.epoch,
      room,
      values: event.result.dice.map((/** @type {{ value: number }} */ d) => d.value),
      signature: room ? signatureOf(event, room) : null,
    };
  }

  #tellOutage(/** @type {string} */ reason) {
    const refuse = this.setting("unreachable") === "refuse";
    if (refuse) this.notify("error", "TABLERELAY.Notify.OutageRefused", { reason });
    else if (!this.outage) this.notify("warn", "TABLERELAY.Notify.OutageFallback", { reason });
    this.outage = true;
  }

  /** preCreateChatMessage: a roll evaluated here carries where its faces came from, for every client to see. */
  #markOwnRoll(/** @type {ChatMessage.Implementation} */ message) {
    if (message.flags?.[FLAG_SCOPE]) return;
    const rolls = message.rolls ?? [];
    if (!rolls.length || !this.rollsThroughRelay()) return;
    const contexts = rolls.map((r) => r.options?.tablerelay);
    const via = contexts.every((c) => c?.via === true);
    /** @type {import("./messages.mjs").MessageFlags} */
    const flags = { via, seqs: contexts.flatMap((c) => c?.seqs ?? []) };
    const signatures = contexts.flatMap((c) => c?.signatures ?? []);
    if (signatures.length) flags.signatures = signatures;
    const known = contexts.find((c) => c?.room);
    if (known) Object.assign(flags, { room: known.room, epoch: known.epoch });
    // The reason is stored in the message's flags, so it is in the language of the client that rolled.
    if (!via) flags.reason = contexts.find((c) => c?.reason)?.reason ?? this.text("TABLERELAY.Reason.WithoutRelay");
    message.updateSource({ flags: { [FLAG_SCOPE]: flags } });
  }

  /**
   * renderChatMessage(HTML): the mark that says where a message's dice came from, as this client checked it.
   * The check is asynchronous (WebCrypto): a message first shows "checking…", then its verdict in place.
   */
  #decorate(/** @type {ChatMessage.Implementation} */ message, /** @type {HTMLElement|undefined} */ element) {
    if (!element) return;
    const flags = message.flags?.[FLAG_SCOPE];
    const hasRolls = (message.rolls?.length ?? 0) > 0;
    if (!flags && !(hasRolls && this.setting("rolls") === "all")) return;
    const socket = relayAddress(this.setting("relayUrl"));
    const room = typeof flags?.room === "string" ? flags.room : "";
    const options = {
      showVerified: Boolean(this.setting("showVerified")),
      page: socket && room ? (/** @type {number} */ seq) => eventPageUrl(socket, room, seq) : undefined,
    };
    // A copy of an event the chat already shows is caught here, not with the kept check: the chat changes.
    const repeated = shownBefore({ id: String(message.id), flags }, this.#firstShown());
    const known = repeated.length ? shownTwice(repeated) : (plainVerdict(flags, message.rolls ?? []) ?? this.#kept(this.#checkKey(message))?.value);
    const target = element.querySelector(".message-content") ?? element;
    target.insertAdjacentHTML("beforeend", `<div data-tablerelay-mark>${markHTML(known ?? { state: "checking" }, flags, options, this.game.i18n)}</div>`);
    if (known) return;
    const slot = target.querySelector?.("[data-tablerelay-mark]");
    void this.verdict(message).then((verdict) => {
      if (slot) slot.innerHTML = markHTML(verdict, flags, options, this.game.i18n);
    });
  }

  /**
   * A faces event, kept (the newest FACES_KEPT) so `unshown` can tell which of them no message shows.
   * @param {TableRelay} client @param {any} event
   */
  #noteFaces(client, event) {
    if (event?.kind !== "roll" || event.sealed === true || event.result?.system !== "faces" || !client.room?.id) return;
    this.faces.set(`${client.room.id}:${event.epoch}:${event.seq}`, {
      seq: Number(event.seq),
      ts: Number(event.ts),
      actor: { id: String(event.actor?.id ?? ""), name: String(event.actor?.name ?? "") },
      values: (event.result.dice ?? []).map((/** @type {{ value: number }} */ d) => Number(d.value)),
    });
    if (this.faces.size > FACES_KEPT) this.faces.delete(/** @type {string} */ (this.faces.keys().next().value));
  }

  /**
   * The relay's faces that no chat message of this world shows (see the API's `unshown`), oldest first.
   * The room's dense seq is what shows every roll; this is that, for the faces a Foundry roll asked for.
   */
  unshown() {
    const shown = this.#firstShown();
    return [...this.faces.entries()].filter(([key]) => !shown.has(`${key}:faces`)).map(([, faces]) => faces);
  }

  /**
   * Which message shows each relay event first, made once for the whole chat and again after it changes (a
   * chat log renders its messages one by one: each looking through all the others would cost the square).
   */
  #firstShown() {
    if (!this.shownIndex) {
      /** @type {ChatMessage.Stored[]} */
      const chat = this.game.messages.contents;
      this.shownIndex = firstShown(chat.map((m) => ({ id: String(m.id), flags: m.flags?.[FLAG_SCOPE] })));
    }
    return this.shownIndex;
  }

  /** What a check depends on: the message, its flags and the dice it shows (a reveal changes both). */
  #checkKey(/** @type {ChatMessage.Implementation} */ message) {
    return `${message.id}|${JSON.stringify(message.flags?.[FLAG_SCOPE] ?? null)}|${rollsKey(message.rolls)}`;
  }

  /**
   * This client's check of a message against the relay's signatures, with the keys it got from the relay
   * itself (check.mjs says what is checked). A verdict is kept per message and content.
   * @param {ChatMessage.Implementation} message
   * @returns {Promise<import("./check.mjs").Verdict>}
   */
  verdict(message) {
    const key = this.#checkKey(message);
    const kept = this.#kept(key);
    if (kept) return kept.promise;
    const rolls = message.rolls ?? [];
    const keys = this.#relayKeys();
    /** @type {Check} */
    const entry = {
      promise: keys.then((found) => checkMessage({ flags: message.flags?.[FLAG_SCOPE], rolls, ...this.#authorOf(message) }, { keys: found })),
      keys,
    };
    this.checks.set(key, entry);
    // A long session renders thousands of messages; the oldest checks go first (Foundry shows the newest).
    if (this.checks.size > KEPT_CHECKS) this.checks.delete(/** @type {string} */ (this.checks.keys().next().value));
    void entry.promise.then((verdict) => (entry.value = verdict));
    return entry.promise;
  }

  /**
   * A kept check of this message, unless it could not be made (no keys then) and the keys have changed since
   * (a welcome came, or a failed fetch is due again): then the message is checked again.
   * @param {string} key  the message's `#checkKey`
   */
  #kept(key) {
    const kept = this.checks.get(key);
    if (!kept) return undefined;
    if (kept.value?.state === "unchecked" && kept.keys !== this.#relayKeys()) {
      this.checks.delete(key);
      return undefined;
    }
    return kept;
  }

  /**
   * The relay participant of the user who wrote a message (its `tablerelay.participant` flag, or null), and
   * whether another user claims the same one.
   * @param {ChatMessage.Implementation} message
   */
  #authorOf(message) {
    const author = this.#authorUser(message);
    const flag = author?.getFlag(MODULE_ID, "participant");
    const participant = typeof flag === "string" ? flag : null;
    /** @type {User.Stored[]} */
    const users = this.game.users.contents;
    const shared = participant !== null && users.some((u) => u.id !== author?.id && u.getFlag(MODULE_ID, "participant") === participant);
    return { authorParticipant: participant, sharedParticipant: shared };
  }

  /**
   * The relay's public keys: from this client's welcome when it has one, else from the relay's published key
   * set (a player without a token can still check); null when neither is reachable.
   * @returns {Promise<Map<string, { x: Uint8Array }>|null>}
   */
  #relayKeys() {
    const client = this.client;
    const source = client?.you ? client.keys : relayAddress(this.setting("relayUrl"));
    const kept = this.keys;
    // Keys that could not be had are asked for again after a while, not at every message.
    if (kept?.source === source && !(kept.failed !== undefined && Date.now() - kept.failed > UNCHECKED_RETRY_MS)) return kept.keys;
    /** @type {Promise<Map<string, { x: Uint8Array }>|null>} */
    let keys;
    if (Array.isArray(source)) keys = importKeys(source);
    else if (source) keys = this.#fetchKeys(String(source));
    else keys = Promise.resolve(null);
    /** @type {NonNullable<TableRelayModule["keys"]>} */
    const made = { source, keys };
    this.keys = made;
    void keys.then((found) => {
      if (!found) made.failed = Date.now();
    });
    return keys;
  }

  /** The relay's /.well-known/tablerelay-keys.json, beside its socket's address. */
  async #fetchKeys(/** @type {string} */ socket) {
    const url = new URL(".well-known/tablerelay-keys.json", socket.replace(/^ws/, "http"));
    try {
      // A relay that does not answer leaves the marks unchecked, not "checking…" for good.
      const response = await globalThis.fetch(url, { signal: AbortSignal.timeout(KEYS_TIMEOUT_MS) });
      return response.ok ? await importKeys(await response.json()) : null;
    } catch {
      return null;
    }
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

  // ---- relay events into Foundry's chat ---------------------------------------------------------------

  /** Foundry's users as the poster and audience rules see them. */
  users() {
    // fvtt-types types `contents` as `readonly unknown[] & User.Stored[]`, whose map sees unknown elements.
    /** @type {User.Stored[]} */
    const users = this.game.users.contents;
    return users.map((u) => ({
      id: u.id,
      isGM: Boolean(u.isGM),
      active: Boolean(u.active),
      participant: u.getFlag(MODULE_ID, "participant") ?? null,
    }));
  }

  /**
   * Messages whose flags name a relay event of this room (a roll's, or the one its reveal turned). Flags are
   * the poster's claim, so whether the event is posted is `#mayPost`'s to say.
   * @param {string} room @param {string} epoch @param {number} seq
   */
  messagesFor(room, epoch, seq) {
    /** @type {ChatMessage.Stored[]} */
    const messages = this.game.messages.contents;
    return messages.filter((m) => {
      const f = m.flags?.[FLAG_SCOPE];
      return f && f.room === room && f.epoch === epoch && (f.seq === seq || f.revealed === seq);
    });
  }

  /**
   * Could `message` be an event's post: written by a GM, or by the user whose relay participant is `roller`
   * (the ones who post it: audience.mjs, posterFor)? Another player's macro naming the next seq must not keep
   * the real roll out of the chat.
   */
  #mayPost(/** @type {ChatMessage.Stored} */ message, /** @type {string|undefined} */ roller) {
    const user = this.#authorUser(message);
    if (!user) return false;
    return user.isGM || (roller !== undefined && user.getFlag(MODULE_ID, "participant") === roller);
  }

  /** The User who wrote a message, if this world knows them. */
  #authorUser(/** @type {ChatMessage.Implementation} */ message) {
    /** @type {any} v12+ hands the author as a User, the harness as its id */
    const author = message.author;
    const id = typeof author === "string" ? author : author?.id;
    /** @type {User.Stored[]} */
    const users = this.game.users.contents;
    return users.find((u) => u.id === id);
  }

  /** The highest relay seq this world's chat holds for the room, or 0; a seq past the room's head is a macro's. */
  #highestPosted(/** @type {string} */ room, /** @type {string} */ epoch) {
    let highest = 0;
    for (const m of this.game.messages.contents) {
      const f = m.flags?.[FLAG_SCOPE];
      if (!f || f.room !== room || f.epoch !== epoch) continue;
      for (const seq of [f.seq, f.revealed]) if (typeof seq === "number" && Number.isInteger(seq) && seq <= this.head && seq > highest) highest = seq;
    }
    return highest;
  }

  /** Wait until every relay event received so far is posted (or skipped). */
  settled() {
    return this.posting;
  }

  async #onEvent(/** @type {TableRelay} */ client, /** @type {any} */ event, /** @type {{ replay: boolean }} */ info) {
    if (!isPosted(event)) return;
    const room = client.room?.id;
    if (!room) return;
    // A fresh welcome's history is the past: post from it only what this world missed after its last post.
    if (info.replay) {
      const highest = this.#highestPosted(room, event.epoch);
      if (highest === 0 || event.seq <= highest) return;
    }
    if (posterFor(event, this.users()) !== this.game.user.id) return;
    const key = `${room}:${event.epoch}:${event.seq}`;
    const roller = event.kind === "reveal" ? event.roll?.actor?.id : event.actor?.id;
    if (this.posted.has(key) || this.messagesFor(room, event.epoch, event.seq).some((m) => this.#mayPost(m, roller))) return;
    this.posted.add(key);
    if (event.kind === "roll") await this.#postRoll(room, event);
    else await this.#postReveal(room, event);
  }

  /** A Foundry Roll from the relay's rendering, or null when the event carries none. */
  #rollOf(/** @type {any} */ event) {
    const data = event.foundry?.rolls?.[0];
    if (!data) return null;
    const Roll = this.env.foundry?.dice?.Roll ?? this.env.Roll;
    return Roll.fromData(typeof data === "string" ? JSON.parse(data) : data);
  }

  async #postRoll(/** @type {string} */ room, /** @type {any} */ event) {
    const users = this.users();
    const roll = event.sealed ? null : this.#rollOf(event);
    for (const data of rollMessages(event, { room, users, roll, i18n: this.game.i18n })) {
      await this.env.ChatMessage.create(messageData(data));
    }
  }

  async #postReveal(/** @type {string} */ room, /** @type {any} */ reveal) {
    const roll = this.#rollOf(reveal);
    if (!roll) return;
    // Every message naming the roll, whoever wrote it: the card is turned into the roll, and the rest (the
    // audience's whisper, or a macro's claim) removed. The roller's user may no longer be the roll's
    // participant (merged since), so the author is not asked here.
    const posted = this.messagesFor(room, reveal.epoch, reveal.of);
    const mine = posted.filter((m) => m.isOwner);
    // messagesFor found these by their flags, so each has them.
    const target = mine.find((m) => m.flags[FLAG_SCOPE]?.sealed) ?? mine[0];
    if (target) {
      await target.update(messageData(revealUpdate(reveal, { room, roll, original: target.flags[FLAG_SCOPE] ?? {} })));
      // One message per roll once it is public: the audience's whispered copy (or a second card) goes.
      for (const m of mine) if (m !== target) await m.delete();
      return;
    }
    const original = { room, epoch: reveal.epoch, seq: reveal.of, kind: "roll" };
    await this.env.ChatMessage.create(
      messageData({
        speaker: { alias: reveal.roll?.actor?.name ?? reveal.actor?.name ?? "tablerelay" },
        ...revealUpdate(reveal, { room, roll, original }),
      }),
    );
  }

  // ---- Fear and Hope ----------------------------------------------------------------------------------

  /** The first active GM mirrors the relay into Foundry, so one client writes and the others read. */
  #leadGM() {
    const gms = this.users().filter((u) => u.active && u.isGM).map((u) => u.id).sort();
    return gms[0] === this.game.user.id;
  }

  /**
   * The Daggerheart system's Fear setting, when that system is active.
   * @returns {ClientSettings.KeyFor<"daggerheart">|null}
   */
  #fearSetting() {
    if (this.game.system?.id !== "daggerheart") return null;
    // The system names its setting in CONFIG.DH; module-env.d.ts declares it under the name the system uses.
    return /** @type {ClientSettings.KeyFor<"daggerheart">} */ (
      String(this.env.CONFIG.DH?.SETTINGS?.gameSettings?.Resources?.Fear ?? "ResourcesFear")
    );
  }

  #mirrorFear(/** @type {number} */ fear) {
    const key = this.#fearSetting();
    if (!key || !this.#leadGM() || !this.connected) return;
    let current;
    try {
      current = this.game.settings.get("daggerheart", key);
    } catch {
      return; // the system's version has no such setting: nothing to mirror into
    }
    if (current !== fear) void this.game.settings.set("daggerheart", key, fear);
  }

  /** The system's Fear is read-only from Foundry's side: a change made there is put back to the relay's. */
  #guardFear(/** @type {Setting.Implementation} */ setting) {
    const key = this.#fearSetting();
    if (!key || setting?.key !== `daggerheart.${key}` || !this.client || !this.connected) return;
    const fear = Number(this.client.state.fear);
    if (Number(setting.value) === fear || !this.#leadGM()) return;
    this.notify("warn", "TABLERELAY.Notify.FearKept");
    void this.game.settings.set("daggerheart", key, fear);
  }

  renderPanel() {
    const document = this.env.document;
    if (!document?.body) return;
    let host = document.getElementById("tablerelay-panel");
    if (!host) {
      host = document.createElement("div");
      host.id = "tablerelay-panel";
      host.addEventListener("click", (/** @type {MouseEvent} */ e) => this.#panelClick(e));
      document.body.appendChild(host);
    }
    const state = this.client?.state ?? { fear: 0, hope: {}, members: [] };
    // Fear and Hope are counts: the client's Int (number|bigint) as the panel's numbers.
    /** @type {Record<string, number>} */
    const hope = {};
    for (const [id, value] of Object.entries(state.hope)) hope[id] = Number(value);
    /** @type {Record<string, string>} */
    const names = {};
    for (const u of this.game.users.contents) {
      const participant = u.getFlag(MODULE_ID, "participant");
      if (participant) names[participant] = u.name;
    }
    host.innerHTML = panelHTML(
      { fear: Number(state.fear), hope, members: state.members },
      { isGM: Boolean(this.game.user.isGM), status: this.status, limits: this.limits, names },
      this.game.i18n,
    );
  }

  #panelClick(/** @type {MouseEvent} */ e) {
    const button = /** @type {HTMLElement|null} */ (/** @type {HTMLElement|null} */ (e.target)?.closest?.("button[data-action]") ?? null);
    if (!button) return;
    const [name, op] = String(button.dataset.action).split("-");
    const participant = button.dataset.participant;
    const options = name === "hope" && participant ? { participant } : {};
    this.api
      .resource(/** @type {"fear"|"hope"} */ (name), /** @type {"gain"|"spend"} */ (op), 1, options)
      .catch((/** @type {Error} */ err) => this.notify("error", "TABLERELAY.Notify.Error", { message: err.message }));
  }
}

