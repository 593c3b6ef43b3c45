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
//
// This file holds the world and its clients (each client's globals); harness-classes.mjs holds the Foundry
// classes they hand the module (hooks, dice and rolls, chat messages, the page, ApplicationV2) and the
// schema's checks of the data the module writes.

import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { HarnessDocument, HarnessMessage, HarnessRoll, HookBus, actAs, applicationV2, assertMessageData, assertPlainJSON } from "./harness-classes.mjs";
import { HarnessLocalization, manifestLanguages } from "./localization.mjs";

// `ws` as the JS client's own tests resolve it (clients/js's locked dependencies).
const WebSocket = createRequire(new URL("../../js/package.json", import.meta.url))("ws");

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
    this.users = users.map((u) => ({ id: u.id, name: u.name, isGM: Boolean(u.isGM), flags: {}, character: u.character ?? null }));
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
      // The user's assigned character (a game system's actor the test gives the world's user).
      get character() {
        return u.character ?? null;
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
    actAs(this);
    this.world.actingUser = this.userId;
    return fn();
  }

  newRoll(formula, options = {}) {
    actAs(this);
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
