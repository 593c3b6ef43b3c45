// A small harness of the Foundry VTT globals the module touches, for the Node tests.
//
// It is not Foundry. It reproduces the contracts the module relies on, as Foundry v13's own code and the
// foundry-vtt-types v13 definitions state them, and it asserts the shapes those types declare on every
// call the module makes (ChatMessage creation and update data, settings, flags). A `World` stands in for the
// Foundry server: users, world settings and chat messages are shared by every client of the world, and a
// whispered message reaches only its author, its recipients and the GMs, as Foundry's server sends them.
// `game.i18n` is Foundry's Localization (localization.mjs), loading the language files module.json names;
// the settings window, the dice configuration and ApplicationV2 windows render their texts the way Foundry
// localizes them. docs/foundry.md lists what this harness does not cover.

import assert from "node:assert/strict";
import { randomInt } from "node:crypto";
import { createRequire } from "node:module";
import { HarnessLocalization, manifestLanguages } from "./localization.mjs";

// `ws` as the JS client's own tests resolve it (clients/js's locked dependencies).
const WebSocket = createRequire(new URL("../../js/package.json", import.meta.url))("ws");

/** ChatMessage fields (foundry-vtt-types v13, BaseChatMessage schema) the module may write. */
const MESSAGE_FIELDS = new Set(["author", "speaker", "content", "flavor", "rolls", "whisper", "blind", "flags", "sound", "style", "timestamp", "emote"]);
const SPEAKER_FIELDS = new Set(["alias", "actor", "token", "scene"]);

/** A Foundry-style hook registry: on, once, call (stops at false) and callAll. */
export class HookBus {
  constructor() {
    /** @type {Map<string, Array<{ fn: Function, once: boolean }>>} */
    this.listeners = new Map();
  }
  on(name, fn) {
    assert.equal(typeof fn, "function", `Hooks.on(${name}) needs a function`);
    if (!this.listeners.has(name)) this.listeners.set(name, []);
    this.listeners.get(name).push({ fn, once: false });
  }
  once(name, fn) {
    this.on(name, fn);
    this.listeners.get(name).at(-1).once = true;
  }
  callAll(name, ...args) {
    for (const l of [...(this.listeners.get(name) ?? [])]) {
      if (l.once) this.listeners.set(name, this.listeners.get(name).filter((x) => x !== l));
      l.fn(...args);
    }
    return true;
  }
  call(name, ...args) {
    for (const l of [...(this.listeners.get(name) ?? [])]) {
      if (l.fn(...args) === false) return false;
    }
    return true;
  }
}

function assertPlainJSON(value, where) {
  assert.doesNotThrow(() => JSON.stringify(value), `${where} must be JSON`);
  assert.deepEqual(JSON.parse(JSON.stringify(value)), value, `${where} must survive a JSON round trip (no bytes, no undefined)`);
}

/** The checks Foundry's ChatMessage schema makes on creation and update data. */
function assertMessageData(data, world, { update = false } = {}) {
  assert.equal(typeof data, "object");
  for (const key of Object.keys(data)) assert.ok(MESSAGE_FIELDS.has(key), `ChatMessage has no field '${key}'`);
  if (data.speaker !== undefined) {
    for (const key of Object.keys(data.speaker)) assert.ok(SPEAKER_FIELDS.has(key), `speaker has no field '${key}'`);
    if (data.speaker.alias !== undefined) assert.equal(typeof data.speaker.alias, "string");
  }
  for (const key of ["content", "flavor"]) if (data[key] !== undefined) assert.equal(typeof data[key], "string", `${key} is a string`);
  if (data.whisper !== undefined) {
    assert.ok(Array.isArray(data.whisper), "whisper is an array of user ids");
    for (const id of data.whisper) assert.ok(world.users.some((u) => u.id === id), `whisper names an unknown user ${id}`);
  }
  if (data.blind !== undefined) assert.equal(typeof data.blind, "boolean", "blind is a boolean");
  if (data.rolls !== undefined) {
    assert.ok(Array.isArray(data.rolls), "rolls is an array");
    for (const roll of data.rolls) {
      const json = typeof roll === "string" ? JSON.parse(roll) : roll instanceof HarnessRoll ? roll.toJSON() : roll;
      assertRollJSON(json);
    }
  }
  if (data.flags !== undefined) {
    assert.equal(typeof data.flags, "object");
    for (const [scope, value] of Object.entries(data.flags)) {
      assert.equal(typeof value, "object", `flags.${scope} is an object`);
      assertPlainJSON(value, `flags.${scope}`);
    }
  }
  if (!update) assert.ok(data.content !== undefined || data.rolls?.length, "a message needs content or rolls");
}

/** Roll#toJSON's shape (foundry-vtt-types v13 Roll.Data), as Roll.fromData reads it. */
export function assertRollJSON(json) {
  assert.equal(json.class, "Roll", "a roll's class");
  assert.equal(typeof json.formula, "string", "a roll's formula");
  assert.ok(Array.isArray(json.terms), "a roll's terms");
  assert.equal(json.evaluated, true, "a stored roll is evaluated");
  assert.equal(typeof json.total, "number", "a roll's total");
  for (const term of json.terms) {
    assert.equal(typeof term.class, "string", "every term names its class");
    if (term.class === "Die") {
      assert.ok(Number.isInteger(term.faces) && Number.isInteger(term.number), "a die's number and faces");
      for (const r of term.results) {
        assert.ok(Number.isInteger(r.result), "a die result is a number");
        assert.equal(typeof r.active, "boolean");
      }
    }
  }
}

let harnessRollEnv = null;

/**
 * A die term following Foundry v13's DiceTerm: each die is asked of the fulfillment method configured for
 * its denomination (the per-die setting, else CONFIG.Dice.fulfillment.defaultMethod), one at a time, in
 * order; a handler answering undefined falls back to Foundry's own random face.
 */
export class HarnessDie {
  constructor({ number = 1, faces = 6, modifiers = [], results = [] } = {}) {
    this._number = number;
    this._faces = faces;
    this.modifiers = modifiers;
    this.results = results;
    this.env = harnessRollEnv;
  }
  get number() {
    return this._number;
  }
  get faces() {
    return this._faces;
  }
  get denomination() {
    return `d${this.faces}`;
  }
  get total() {
    return this.results.filter((r) => r.active).reduce((t, r) => t + r.result, 0);
  }
  randomFace() {
    return randomInt(1, this.faces + 1);
  }
  async _roll(options) {
    const { game, CONFIG } = this.env;
    const config = game.settings.get("core", "diceConfiguration");
    const method = config[this.denomination] || CONFIG.Dice.fulfillment.defaultMethod;
    const { handler } = CONFIG.Dice.fulfillment.methods[method] ?? {};
    return handler?.(this, options);
  }
  async roll(options = {}) {
    const roll = { result: undefined, active: true };
    roll.result = await this._roll(options);
    if (roll.result === undefined) roll.result = this.randomFace();
    assert.ok(Number.isInteger(roll.result) && roll.result >= 1 && roll.result <= this.faces, `a d${this.faces} shows ${roll.result}`);
    this.results.push(roll);
    return roll;
  }
  async evaluate(options) {
    for (let n = this.results.length; n < Math.abs(this.number); n++) await this.roll(options);
    for (const m of this.modifiers) {
      if (m === "x") {
        // Explode: every die showing its maximum adds one more die, which may explode in turn.
        for (let i = 0; i < this.results.length && i < 100; i++) {
          if (this.results[i].result === this.faces && !this.results[i].exploded) {
            this.results[i].exploded = true;
            await this.roll(options);
          }
        }
      } else if (/^kh\d*$/.test(m)) {
        const keep = Number(m.slice(2) || 1);
        const sorted = [...this.results].sort((a, b) => b.result - a.result);
        for (const [i, r] of sorted.entries()) if (i >= keep) Object.assign(r, { active: false, discarded: true });
      }
    }
  }
  toJSON() {
    const json = { class: "Die", options: {}, evaluated: true, number: this.number, faces: this.faces, modifiers: this.modifiers, results: this.results };
    // A computed number or size ("(1d4)d6"): DiceTerm#toJSON adds the inner Roll's data, as _fromData read it.
    if (this.computed) Object.assign(json, this.computed);
    return json;
  }
}

/** A Roll with Foundry's evaluate/toJSON/fromData contract, over formulas like `2d20kh + 1d6x + 3`. */
export class HarnessRoll {
  constructor(formula, data = {}, options = {}) {
    this.formula = formula;
    this.data = data;
    this.options = options;
    this._evaluated = false;
    this.terms = formula.split(/\s*\+\s*/).map((part) => {
      const m = /^(\d+)d(\d+)((?:kh\d*|x)*)$/.exec(part.trim());
      if (m) return new HarnessDie({ number: Number(m[1]), faces: Number(m[2]), modifiers: m[3].match(/kh\d*|x/g) ?? [] });
      assert.match(part.trim(), /^\d+$/, `the harness reads dice and numbers only: ${part}`);
      return { number: Number(part), toJSON: () => ({ class: "NumericTerm", options: {}, evaluated: true, number: Number(part) }) };
    });
  }
  get dice() {
    return this.terms.filter((t) => t instanceof HarnessDie);
  }
  get total() {
    return this._evaluated ? this.terms.reduce((t, term) => t + (term instanceof HarnessDie ? term.total : term.number), 0) : undefined;
  }
  async evaluate(options = {}) {
    assert.equal(this._evaluated, false, "a roll is evaluated once");
    for (const term of this.terms) if (term instanceof HarnessDie) await term.evaluate(options);
    this._evaluated = true;
    return this;
  }
  toJSON() {
    return { class: "Roll", options: this.options, dice: [], formula: this.formula, terms: this.terms.map((t) => t.toJSON()), total: this.total, evaluated: true };
  }
  static fromData(json) {
    assertRollJSON(json);
    const roll = Object.create(HarnessRoll.prototype);
    Object.assign(roll, { formula: json.formula, data: {}, options: json.options ?? {}, _evaluated: true, _json: json });
    roll.terms = json.terms.map((t) =>
      t.class === "Die"
        ? Object.assign(new HarnessDie({ number: t.number, faces: t.faces, modifiers: t.modifiers, results: t.results }), {
            computed: Object.fromEntries(["_number", "_faces"].filter((k) => t[k]).map((k) => [k, t[k]])),
          })
        : { number: t.number ?? 0, toJSON: () => t },
    );
    Object.defineProperty(roll, "total", { value: json.total });
    return roll;
  }
}

/** The stand-in for a Foundry server: users, world settings and chat messages shared by its clients. */
export class World {
  /**
   * @param {Array<{ id: string, name: string, isGM?: boolean }>} users
   * @param {object} [options]
   * @param {string} [options.system]
   * @param {string} [options.language]  the language its clients play in (Foundry's core.language)
   * @param {Array<{ lang: string, name?: string, path: string }>} [options.languages]  language files beyond
   *   module.json's, as a translation module's manifest would add them
   */
  constructor(users, { system = "dnd5e", language = "en", languages = [] } = {}) {
    this.users = users.map((u) => ({ id: u.id, name: u.name, isGM: Boolean(u.isGM), flags: {} }));
    this.active = new Set();
    this.worldSettings = new Map();
    this.messages = [];
    this.clients = new Set();
    this.system = system;
    this.language = language;
    this.languages = [...manifestLanguages(), ...languages];
    this.nextId = 1;
  }

  /** Messages a user's client holds: public ones, and whispers to, from or (for a GM) about anyone. */
  visibleTo(userId) {
    const user = this.users.find((u) => u.id === userId);
    return this.messages.filter((m) => !m.whisper.length || m.author === userId || m.whisper.includes(userId) || user.isGM);
  }

  /**
   * A Foundry client for this user, with its own globals (and its own browser storage). `document: true`
   * gives it a page body the module's panel can render into; `generation` is Foundry's major version.
   */
  client(userId, { storage = new Map(), document = false, generation = 13 } = {}) {
    const client = new FoundryClient(this, userId, storage, { document, generation });
    this.clients.add(client);
    this.active.add(userId);
    return client;
  }

  /** The clients Foundry's server sends a message (and its changes) to. */
  recipients(message) {
    return [...this.clients].filter((c) => this.visibleTo(c.userId).includes(message));
  }

  /** A message's create, update or delete hook, on each of its recipients. */
  announce(hook, message, recipients = this.recipients(message)) {
    for (const c of recipients) c.Hooks.callAll(hook, message, {}, message.author);
  }

  leave(client) {
    this.clients.delete(client);
    if (![...this.clients].some((c) => c.userId === client.userId)) this.active.delete(client.userId);
  }
}

class HarnessMessage {
  constructor(world, data, author) {
    Object.assign(this, { id: `msg${world.nextId++}`, author, speaker: {}, content: "", flavor: "", whisper: [], blind: false, flags: {}, rolls: [] });
    this.world = world;
    this.#apply(data);
  }
  #apply(data) {
    for (const [key, value] of Object.entries(data)) {
      if (key === "rolls") this.rolls = value.map((r) => HarnessRoll.fromData(typeof r === "string" ? JSON.parse(r) : r.toJSON()));
      else if (key === "flags") this.flags = { ...this.flags, ...structuredClone(value) };
      else this[key] = structuredClone(value);
    }
  }
  get isOwner() {
    const user = this.world.users.find((u) => u.id === this.world.actingUser);
    return this.author === this.world.actingUser || Boolean(user?.isGM);
  }
  /** Changes made before the message exists (preCreateChatMessage's updateSource): no hook, no owner check. */
  applySource(data) {
    assertMessageData(data, this.world, { update: true });
    this.#apply(data);
  }
  async update(data) {
    assert.ok(this.isOwner, "only the author or a GM may update a message");
    this.applySource(data);
    this.updates = (this.updates ?? 0) + 1;
    this.world.announce("updateChatMessage", this);
    return this;
  }
  async delete() {
    assert.ok(this.isOwner, "only the author or a GM may delete a message");
    const recipients = this.world.recipients(this);
    this.world.messages = this.world.messages.filter((m) => m !== this);
    this.world.announce("deleteChatMessage", this, recipients);
  }
}

/** A page element, enough for the module's panel: an id, its HTML, children and listeners. */
class HarnessElement {
  constructor(tag) {
    Object.assign(this, { tagName: tag.toUpperCase(), id: "", innerHTML: "", children: [], listeners: {} });
  }
  appendChild(element) {
    this.children.push(element);
    return element;
  }
  addEventListener(type, fn) {
    (this.listeners[type] ??= []).push(fn);
  }
}

/** The page, as far as the module's panel reaches it. */
class HarnessDocument {
  constructor() {
    this.body = new HarnessElement("body");
  }
  createElement(tag) {
    return new HarnessElement(tag);
  }
  getElementById(id) {
    return this.body.children.find((e) => e.id === id) ?? null;
  }
}

/**
 * Foundry's ApplicationV2, as far as the module's connection form uses it: options merged over the class's
 * DEFAULT_OPTIONS, a `title` that localizes `window.title` (ApplicationV2#title), and a render that asks
 * `_renderHTML` for the content and hands it to `_replaceHTML`.
 */
function applicationV2(client) {
  return class ApplicationV2 {
    static DEFAULT_OPTIONS = {};
    constructor(options = {}) {
      const defaults = this.constructor.DEFAULT_OPTIONS ?? {};
      this.options = { ...defaults, ...options, window: { ...defaults.window, ...options.window } };
      this.content = null;
    }
    get title() {
      return client.game.i18n.localize(this.options.window.title ?? "");
    }
    async render() {
      assert.ok(client.game.i18n.initialized, "a window renders after the translations are loaded");
      const result = await this._renderHTML({}, {});
      this.content = new HarnessElement("section");
      this._replaceHTML(result, this.content, {});
      return this;
    }
  };
}

/** One browser: Foundry's globals as the module sees them. */
export class FoundryClient {
  constructor(world, userId, storage, { document = false, generation = 13 } = {}) {
    this.world = world;
    this.userId = userId;
    this.storage = storage; // client-scoped settings: this browser's localStorage
    this.notifications = [];
    this.Hooks = new HookBus();
    const client = this;
    const registered = new Map();
    const userDoc = (u) => ({
      id: u.id,
      name: u.name,
      isGM: u.isGM,
      get active() {
        return world.active.has(u.id);
      },
      getFlag: (scope, key) => u.flags[scope]?.[key],
      setFlag: async (scope, key, value) => {
        assert.equal(u.id, userId, "a player may only set flags on their own user");
        assertPlainJSON(value, `user flag ${scope}.${key}`);
        u.flags[scope] = { ...(u.flags[scope] ?? {}), [key]: value };
      },
    });
    const settings = {
      // Foundry's registries: each entry is the registered config with its namespace and key.
      settings: registered,
      get menus() {
        return client.menus;
      },
      register(namespace, key, config) {
        assert.ok(["world", "client", "user"].includes(config.scope), `setting ${key} has a scope`);
        assert.equal(typeof config.config, "boolean", `setting ${key} says whether it shows in the settings form`);
        registered.set(`${namespace}.${key}`, Object.assign(config, { namespace, key }));
      },
      registerMenu(namespace, key, config) {
        assert.equal(typeof config.type, "function", "a settings menu opens an application class");
        client.menus.set(`${namespace}.${key}`, Object.assign(config, { namespace, key: `${namespace}.${key}` }));
      },
      get(namespace, key) {
        const id = `${namespace}.${key}`;
        if (id === "core.rollMode") return client.rollMode;
        if (id === "core.diceConfiguration") return client.diceConfiguration;
        const config = registered.get(id);
        if (!config) throw new Error(`The setting ${id} is not registered`);
        const store = config.scope === "world" ? world.worldSettings : client.storage;
        return store.has(id) ? structuredClone(store.get(id)) : structuredClone(config.default);
      },
      async set(namespace, key, value) {
        const id = `${namespace}.${key}`;
        const config = registered.get(id);
        if (!config) throw new Error(`The setting ${id} is not registered`);
        if (config.scope === "world") {
          assert.ok(world.users.find((u) => u.id === userId).isGM, `only a GM may change the world setting ${id}`);
        }
        if (config.choices) assert.ok(value in config.choices, `${id} must be one of its choices`);
        if (config.type === String) assert.equal(typeof value, "string", `${id} is a string`);
        if (config.type === Boolean) assert.equal(typeof value, "boolean", `${id} is a boolean`);
        if (config.type === Number) assert.equal(typeof value, "number", `${id} is a number`);
        assertPlainJSON(value, `setting ${id}`);
        const store = config.scope === "world" ? world.worldSettings : client.storage;
        store.set(id, structuredClone(value));
        if (config.scope === "world") {
          for (const c of world.clients) c.Hooks.callAll("updateSetting", { key: id, value });
          for (const c of world.clients) c.registeredOnChange(id, value);
        } else {
          config.onChange?.(value);
        }
        return value;
      },
    };
    this.registeredOnChange = (id, value) => registered.get(id)?.onChange?.(value);
    this.menus = new Map();
    this.rollMode = "publicroll";
    this.diceConfiguration = {};
    const modules = new Map([["tablerelay", { id: "tablerelay", active: true }]]);
    this.game = {
      release: { generation },
      i18n: new HarnessLocalization({ lang: world.language, languages: world.languages, hooks: this.Hooks }),
      system: { id: world.system },
      get user() {
        return userDoc(world.users.find((u) => u.id === userId));
      },
      users: {
        get contents() {
          return world.users.map(userDoc);
        },
      },
      settings,
      messages: {
        get contents() {
          return world.visibleTo(userId);
        },
      },
      modules: { get: (id) => modules.get(id) },
    };
    this.CONFIG = {
      Dice: {
        fulfillment: {
          defaultMethod: "",
          dice: { d4: {}, d6: {}, d8: {}, d10: {}, d12: {}, d20: {}, d100: {} },
          methods: { mersenne: { label: "Mersenne Twister", interactive: false }, manual: { label: "Manual", interactive: true } },
        },
      },
    };
    this.ChatMessage = {
      create: async (data) => {
        assertMessageData(data, world);
        const message = new HarnessMessage(world, data, userId);
        // preCreateChatMessage runs on the creating client, which may still change the message's source.
        message.updateSource = (changes) => message.applySource(changes);
        world.actingUser = userId;
        client.Hooks.callAll("preCreateChatMessage", message, data, {}, userId);
        delete message.updateSource;
        world.messages.push(message);
        world.announce("createChatMessage", message);
        return message;
      },
    };
    this.ui = {
      notifications: {
        info: (m) => client.notifications.push(["info", m]),
        warn: (m) => client.notifications.push(["warn", m]),
        error: (m) => client.notifications.push(["error", m]),
      },
    };
    const Roll = class extends HarnessRoll {};
    this.Roll = Roll;
    this.foundry = { dice: { Roll }, applications: { api: { ApplicationV2: applicationV2(this) } } };
    this.WebSocket = WebSocket;
    this.document = document ? new HarnessDocument() : null;
  }

  /**
   * What Foundry's settings window (SettingsConfig#_prepareCategoryData) shows this user of the module's
   * settings and menus. Both v12 and v13 localize a setting's name and hint there, and their templates the
   * menus' name, label and hint (core's own menus are named by keys). v13 makes a StringField of `choices`,
   * whose options its template localizes; v12's template was not read, so for generation 12 the harness shows
   * the labels as registered, the case in which only the module's own wording (at i18nInit) helps.
   */
  settingsConfig(namespace = "tablerelay") {
    const { i18n, user, settings } = this.game;
    assert.ok(i18n.initialized, "the settings window opens after the translations are loaded");
    const menus = [...settings.menus.values()]
      .filter((m) => m.namespace === namespace && (!m.restricted || user.isGM))
      .map((m) => ({ key: m.key, label: i18n.localize(m.name), buttonText: i18n.localize(m.label), hint: i18n.localize(m.hint), type: m.type }));
    const entries = [...settings.settings.values()]
      .filter((s) => s.namespace === namespace && s.config && (user.isGM || s.scope !== "world"))
      .map((s) => {
        const entry = { id: `${s.namespace}.${s.key}`, label: i18n.localize(s.name ?? ""), hint: i18n.localize(s.hint ?? "") };
        if (s.choices) {
          const word = (label) => (this.game.release.generation >= 13 ? i18n.localize(label) : label);
          entry.choices = Object.fromEntries(Object.entries(s.choices).map(([value, label]) => [value, word(label)]));
        }
        return entry;
      });
    return { menus, settings: entries };
  }

  /** The dice configuration's method labels (DiceConfig's template localizes them, as core's are keys). */
  diceConfig() {
    assert.ok(this.game.i18n.initialized, "the dice configuration opens after the translations are loaded");
    const { methods } = this.CONFIG.Dice.fulfillment;
    return Object.fromEntries(Object.entries(methods).map(([id, m]) => [id, this.game.i18n.localize(m.label)]));
  }

  /** Open a settings menu's window, as the settings window's button does: its title and its HTML. */
  async openMenu(key) {
    const menu = this.game.settings.menus.get(key);
    assert.ok(menu, `no settings menu ${key}`);
    const app = await new menu.type().render(true);
    return { title: app.title, html: app.content.innerHTML, app };
  }

  /** Run `fn` as this client (the harness's Roll class and message permissions follow the acting user). */
  as(fn) {
    harnessRollEnv = this;
    this.world.actingUser = this.userId;
    return fn();
  }

  newRoll(formula, options = {}) {
    harnessRollEnv = this;
    this.world.actingUser = this.userId;
    return new this.Roll(formula, {}, options);
  }

  /** A chat line typed by this user: true when Foundry would go on to handle it itself. */
  chat(text) {
    this.world.actingUser = this.userId;
    return this.Hooks.call("chatMessage", {}, text, {});
  }

  /**
   * What this user's screen shows for a message once the module's check of it has ended: the mark is drawn
   * when the check ends (in Foundry, into the rendered element; here the render is simply made again).
   */
  async renderedChecked(message) {
    await this.module?.verdict(message);
    return this.rendered(message);
  }

  /** What this user's screen shows for a message: its HTML after the render hook. */
  rendered(message) {
    return this.render(message).html();
  }

  /**
   * The element a render hook gets, kept: what it shows now (`html()`), and later, after whatever the hook
   * left to change in it. Enough of a DOM for the module: HTML added at the end, and an element found by an
   * attribute (`[data-…]`) whose innerHTML may be set.
   */
  render(message) {
    const parts = [];
    const element = {
      innerHTML: `<div class="message-content">${message.content}</div>`,
      html: () => parts.join(""),
      insertAdjacentHTML: (_where, html) => parts.push(html),
      querySelector: (selector) => {
        const attribute = /^\[([\w-]+)\]$/.exec(selector)?.[1];
        const at = attribute ? parts.findIndex((p) => new RegExp(`^<div ${attribute}>`).test(p)) : -1;
        if (at < 0) return null;
        const open = `<div ${attribute}>`;
        return {
          set innerHTML(html) {
            parts[at] = `${open}${html}</div>`;
          },
        };
      },
    };
    this.Hooks.callAll("renderChatMessageHTML", message, element, {});
    return element;
  }
}
