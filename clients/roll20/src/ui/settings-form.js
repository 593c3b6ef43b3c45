// The settings form: the extension's popup and the userscript's dialog both draw it with this function.

import { normalizeSettings, settingsProblem } from "../settings.js";

/** @typedef {import("../settings.js").Settings} Settings */

export const FORM_STYLE = `
form.tr-settings { font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: #eee; background: #1b1926;
  padding: 12px 14px; width: 320px; box-sizing: border-box; }
form.tr-settings h1 { font-size: 15px; margin: 0 0 8px; }
form.tr-settings label.field { display: block; margin: 8px 0 2px; font-weight: 600; }
form.tr-settings input[type=text], form.tr-settings input[type=password], form.tr-settings input[type=number] {
  width: 100%; box-sizing: border-box; padding: 5px 6px; background: #2a2738; color: #eee; border: 1px solid #57506e; border-radius: 4px; font: inherit; }
form.tr-settings fieldset { border: 1px solid #3d3852; border-radius: 4px; margin: 8px 0; padding: 4px 8px 6px; }
form.tr-settings legend { font-weight: 600; padding: 0 4px; }
form.tr-settings .choice { display: block; margin: 2px 0; }
form.tr-settings .small { color: #aaa; font-size: 12px; }
form.tr-settings .status { margin: 8px 0; } form.tr-settings .problem { color: #ff9c9c; min-height: 1em; }
form.tr-settings button { font: inherit; padding: 4px 14px; background: #5b3fa3; color: #fff; border: 0; border-radius: 4px; cursor: pointer; }
form.tr-settings .badge { padding: 1px 7px; border-radius: 10px; background: #555; }
form.tr-settings .badge.connected { background: #23784a; } form.tr-settings .badge.reconnecting, form.tr-settings .badge.connecting { background: #9a6b12; }
form.tr-settings .badge.error { background: #a02c2c; }
`;

function el(doc, tag, attrs = {}, ...children) {
  const node = doc.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === undefined) continue;
    node.setAttribute(k, v === true ? "" : String(v));
  }
  node.append(...children);
  return node;
}

/**
 * Draw the form into `parent`.
 * @param {Document} doc
 * @param {HTMLElement | ShadowRoot} parent
 * @param {Settings} current
 * @param {(settings: Settings) => Promise<void> | void} onSave
 * @param {{ storage?: string }} [words] where the settings are kept, for the sentence under the token
 * @returns {{ form: HTMLFormElement, showStatus: (status: string, detail?: string) => void }}
 */
export function settingsForm(doc, parent, current, onSave, words = {}) {
  const s = normalizeSettings(current);
  const url = el(doc, "input", { type: "text", id: "tr-relay", name: "relayUrl", value: s.relayUrl, placeholder: "wss://relay.example/ws", autocomplete: "off", spellcheck: "false" });
  const token = el(doc, "input", { type: "password", id: "tr-token", name: "token", value: s.token, placeholder: "paste your token", autocomplete: "off" });
  const name = el(doc, "input", { type: "text", id: "tr-name", name: "name", value: s.name, placeholder: "as the table knows you", autocomplete: "off", maxlength: "100" });
  const mine = el(doc, "input", { type: "radio", name: "post", value: "mine", id: "tr-post-mine", checked: s.post === "mine" });
  const all = el(doc, "input", { type: "radio", name: "post", value: "all", id: "tr-post-all", checked: s.post === "all" });
  const delay = el(doc, "input", { type: "number", id: "tr-delay", name: "fallbackDelay", min: "0", max: "60000", step: "100", value: String(s.fallbackDelay) });
  const badge = el(doc, "span", { class: "badge off", id: "tr-status", role: "status" }, "off");
  const problem = el(doc, "div", { class: "problem", id: "tr-problem", role: "alert" });
  const form = /** @type {HTMLFormElement} */ (
    el(
      doc,
      "form",
      { class: "tr-settings" },
      el(doc, "h1", {}, "tablerelay for Roll20"),
      el(doc, "div", { class: "status" }, "Status: ", badge),
      el(doc, "label", { class: "field", for: "tr-relay" }, "Relay address"),
      url,
      el(doc, "label", { class: "field", for: "tr-token" }, "Your token"),
      token,
      el(doc, "div", { class: "small" }, `Kept in ${words.storage ?? "this extension's storage"}; Roll20's page never sees it.`),
      el(doc, "label", { class: "field", for: "tr-name" }, "Your name (for a new player)"),
      name,
      el(
        doc,
        "fieldset",
        {},
        el(doc, "legend", {}, "Post to Roll20's chat"),
        el(doc, "label", { class: "choice" }, mine, " my own rolls"),
        el(doc, "label", { class: "choice" }, all, " everything I may see, when nobody else posts it"),
      ),
      el(doc, "label", { class: "field", for: "tr-delay" }, "Wait before posting for others (ms)"),
      delay,
      problem,
      el(doc, "button", { type: "submit", id: "tr-save" }, "Save and connect"),
    )
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const next = normalizeSettings({
      relayUrl: url.value,
      token: token.value,
      name: name.value,
      post: all.checked ? "all" : "mine",
      fallbackDelay: Number(delay.value),
    });
    const wrong = settingsProblem(next);
    problem.textContent = wrong ?? "";
    if (wrong) return;
    await onSave(next);
    problem.textContent = "";
  });
  parent.append(form);
  return {
    form,
    showStatus(status, detail) {
      badge.className = `badge ${status}`;
      badge.textContent = status;
      badge.title = detail ?? "";
    },
  };
}
