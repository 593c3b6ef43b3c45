// Foundry's Localization (game.i18n) for the Node tests, following Foundry v12/v13's client code: the
// translations of the client's language are loaded from the language files packages name in their manifest's
// `languages`, English is loaded as the fallback for any other language, `localize` answers a key it has no
// string for with the key itself, and `format` fills `{placeholders}`. Loading happens in `initialize`, which
// then calls the i18nInit hook, as Foundry does after init: until then every key localizes to itself.
//
// It is stricter than Foundry where a slip would only show up as a wrong word on someone's screen: for the
// module's own keys (TABLERELAY.…) `format` must be given exactly the placeholders the string has, as strings
// (fvtt-types' `Record<string, string>`), and `localize` must not be used on a string that has any.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The module's folder (clients/foundry) and its manifest. */
export const MODULE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const OURS = "TABLERELAY.";

/** `{placeholders}` of a string, as Foundry's format finds them. */
export function placeholders(/** @type {string} */ text) {
  return [...text.matchAll(/{([^}]+)}/g)].map((m) => m[1]);
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** foundry.utils.expandObject: `{"A.B": 1}` becomes `{A: {B: 1}}`; nested objects are expanded too. */
export function expandObject(object) {
  const out = {};
  for (const [key, value] of Object.entries(object)) {
    const path = key.split(".");
    let target = out;
    for (const part of path.slice(0, -1)) target = isObject(target[part]) ? target[part] : (target[part] = {});
    const last = path.at(-1);
    const expanded = isObject(value) ? expandObject(value) : value;
    target[last] = isObject(expanded) && isObject(target[last]) ? mergeObject(target[last], expanded) : expanded;
  }
  return out;
}

/** foundry.utils.mergeObject, in place, for translation dictionaries. */
function mergeObject(target, source) {
  for (const [key, value] of Object.entries(source)) {
    target[key] = isObject(value) && isObject(target[key]) ? mergeObject(target[key], value) : value;
  }
  return target;
}

/** foundry.utils.getProperty. */
function getProperty(object, key) {
  return key.split(".").reduce((o, part) => (isObject(o) ? o[part] : undefined), object);
}

/** Every string of a (nested) translation dictionary, by its dotted key. */
export function flatten(object, prefix = "") {
  const out = {};
  for (const [key, value] of Object.entries(object)) {
    if (isObject(value)) Object.assign(out, flatten(value, `${prefix}${key}.`));
    else out[`${prefix}${key}`] = value;
  }
  return out;
}

/** A language file as Foundry's _loadTranslationFile reads it: JSON, expanded. */
export function readTranslations(/** @type {string} */ path) {
  return expandObject(JSON.parse(readFileSync(path, "utf8")));
}

/**
 * The languages a package's manifest names, with their paths resolved against its folder.
 * @returns {Array<{ lang: string, name?: string, path: string }>}
 */
export function manifestLanguages(root = MODULE_ROOT) {
  const manifest = JSON.parse(readFileSync(resolve(root, "module.json"), "utf8"));
  return (manifest.languages ?? []).map((l) => ({ ...l, path: resolve(root, l.path) }));
}

export class HarnessLocalization {
  /**
   * @param {object} options
   * @param {string} [options.lang]  the client's language (Foundry's core.language setting)
   * @param {Array<{ lang: string, path: string }>} [options.languages]  every language file a package offers
   * @param {{ callAll: (name: string) => unknown }} [options.hooks]  the client's Hooks, for i18nInit
   */
  constructor({ lang = "en", languages = manifestLanguages(), hooks } = {}) {
    this.lang = lang;
    this.languages = languages;
    this.hooks = hooks;
    this.translations = {};
    this._fallback = {};
    this.initialized = false;
  }

  /** Load the client's language (and English behind it), then call i18nInit: Foundry's Localization#initialize. */
  async initialize() {
    const supported = new Set(["en", ...this.languages.map((l) => l.lang)]);
    // Foundry: "Cannot set language …, as it is not in the supported set. Falling back to English".
    if (!supported.has(this.lang)) this.lang = "en";
    this.translations = this.#load(this.lang);
    if (this.lang !== "en") this._fallback = this.#load("en");
    this.initialized = true;
    this.hooks?.callAll("i18nInit");
  }

  #load(/** @type {string} */ lang) {
    const translations = {};
    for (const l of this.languages) if (l.lang === lang) mergeObject(translations, readTranslations(l.path));
    return translations;
  }

  /** The string for a key in the client's language, else in English; undefined when neither has one. */
  #lookup(/** @type {string} */ key) {
    assert.equal(typeof key, "string", "a translation key is a string");
    const value = getProperty(this.translations, key);
    if (typeof value === "string") return value;
    const fallback = getProperty(this._fallback, key);
    return typeof fallback === "string" ? fallback : undefined;
  }

  has(/** @type {string} */ key, fallback = true) {
    if (typeof getProperty(this.translations, key) === "string") return true;
    return fallback && typeof getProperty(this._fallback, key) === "string";
  }

  localize(/** @type {string} */ key) {
    const text = this.#lookup(key);
    if (text === undefined) return key;
    if (key.startsWith(OURS)) assert.deepEqual(placeholders(text), [], `${key} has placeholders: use format, not localize`);
    return text;
  }

  format(/** @type {string} */ key, data = {}) {
    const text = this.#lookup(key);
    if (text === undefined) return key;
    if (key.startsWith(OURS)) {
      const wanted = [...new Set(placeholders(text))].sort();
      assert.deepEqual(Object.keys(data).sort(), wanted, `format(${key}) must be given exactly its placeholders`);
      for (const [name, value] of Object.entries(data)) assert.equal(typeof value, "string", `${key}: {${name}} is a string`);
    }
    return text.replace(/{[^}]+}/g, (k) => data[k.slice(1, -1)]);
  }
}
