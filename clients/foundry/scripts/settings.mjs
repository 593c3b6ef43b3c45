// The module's settings: registered at init (the relay's address, which rolls go through it, what happens
// when it cannot be reached, the mark's wording, and this browser's token and resume cursor), the connection
// window that sets the address and the token, and the choices' labels worded once translations are loaded.

import { connectionFormHTML } from "./ui.mjs";

/** @typedef {import("./module.mjs").TableRelayModule} TableRelayModule */

export const MODULE_ID = "tablerelay";

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

/** Register the settings and the connection window (init): a new address or token reconnects. */
export function registerSettings(/** @type {TableRelayModule} */ module) {
  const { settings } = module.game;
  const reconnect = () => module.connect();
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
    onChange: () => module.applyDefaultMethod(),
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
  // The game systems whose own rolls the relay resolves (scripts/systems/): the world's system's may be turned
  // off for the world (registered only with that system, so other worlds' settings are unchanged).
  const systems = /** @type {const} */ ([
    ["daggerheart", "daggerheartRolls", "TABLERELAY.Settings.daggerheartRolls.Name", "TABLERELAY.Settings.daggerheartRolls.Hint"],
    ["draw-steel", "drawSteelRolls", "TABLERELAY.Settings.drawSteelRolls.Name", "TABLERELAY.Settings.drawSteelRolls.Hint"],
  ]);
  for (const [system, key, name, hint] of systems) {
    if (module.game.system?.id !== system) continue;
    settings.register(MODULE_ID, key, {
      name,
      hint,
      scope: "world",
      config: true,
      type: Boolean,
      default: true,
    });
  }
  // Tokens are secrets: stored in this browser only (client scope), never in world data every client gets.
  settings.register(MODULE_ID, "token", { scope: "client", config: false, type: String, default: "", onChange: reconnect });
  // The session token and the last event seen, so a reload rejoins as the same participant and resumes.
  settings.register(MODULE_ID, "cursor", { scope: "client", config: false, type: Object, default: {} });
  const ApplicationV2 = module.env.foundry?.applications?.api?.ApplicationV2;
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
export function localizeChoices(/** @type {TableRelayModule} */ module) {
  for (const key of /** @type {const} */ (["rolls", "unreachable"])) {
    // fvtt-types types the registry's `choices` from the value type, which the Map's entries leave unknown.
    const choices = /** @type {Record<string, string> | undefined} */ (
      /** @type {unknown} */ (module.game.settings.settings.get(`${MODULE_ID}.${key}`)?.choices)
    );
    if (!choices) continue;
    for (const [value, label] of Object.entries(choices)) choices[value] = module.text(label);
  }
}

/** What the connection form shows (never the token itself). */
export function connectionValues(/** @type {TableRelayModule} */ module) {
  return {
    relayUrl: module.setting("relayUrl"),
    hasToken: Boolean(module.setting("token")),
    isGM: Boolean(module.game.user.isGM),
    status: module.status,
    participant: module.client?.you?.id ?? null,
  };
}

/**
 * The connection form's submit: the GM may change the address; anyone may paste or forget a token.
 * @param {{ relayUrl?: unknown, token?: unknown }} values  the form's fields (FormDataExtended#object)
 * @param {boolean} forget
 */
export async function saveConnection(/** @type {TableRelayModule} */ module, values, forget = false) {
  const { settings } = module.game;
  if (module.game.user.isGM && typeof values.relayUrl === "string" && values.relayUrl !== module.setting("relayUrl")) {
    if (values.relayUrl && !relayAddress(values.relayUrl)) {
      module.notify("error", "TABLERELAY.Notify.BadAddress");
      return;
    }
    await settings.set(MODULE_ID, "relayUrl", values.relayUrl.trim());
  }
  const token = typeof values.token === "string" ? values.token.trim() : "";
  if (forget) await settings.set(MODULE_ID, "token", "");
  else if (token) await settings.set(MODULE_ID, "token", token);
  module.connect();
}
