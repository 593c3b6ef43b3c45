// The Foundry classes and data checks behind the harness's clients (harness.mjs), for the Node tests: a hook
// registry, dice and rolls following Foundry v13's DiceTerm and Roll, chat messages, the page the panel draws
// into, ApplicationV2, and the checks Foundry's ChatMessage schema makes on the data the module writes
// (foundry-vtt-types v13). Like harness.mjs, it is not Foundry: it reproduces the contracts the module relies on.

import assert from "node:assert/strict";
import { randomInt } from "node:crypto";

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

export function assertPlainJSON(value, where) {
  assert.doesNotThrow(() => JSON.stringify(value), `${where} must be JSON`);
  assert.deepEqual(JSON.parse(JSON.stringify(value)), value, `${where} must survive a JSON round trip (no bytes, no undefined)`);
}

/** The checks Foundry's ChatMessage schema makes on creation and update data. */
export function assertMessageData(data, world, { update = false } = {}) {
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

/** The client whose globals a new die reads (its settings and dice configuration): the one acting now. */
let harnessRollEnv = null;

/** Make `client` the acting one for the dice made from now on (FoundryClient#as and #newRoll). */
export function actAs(client) {
  harnessRollEnv = client;
}

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

/** A chat message of a `World`: its data as the schema allows it, who may change it, and its hooks. */
export class HarnessMessage {
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
export class HarnessElement {
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
export class HarnessDocument {
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
export function applicationV2(client) {
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
