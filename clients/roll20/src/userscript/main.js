// The userscript (Tampermonkey, Violentmonkey, Greasemonkey): the same bridge as the extension, with the
// userscript manager's storage instead of the extension's, and the settings in a dialog of the overlay
// (a userscript has no popup). Open it with the overlay's ⚙ button or the manager's menu.

import { Bridge } from "../bridge.js";
import { Roll20Chat } from "../roll20-chat.js";
import { SETTINGS_KEY } from "../settings.js";
import { userscriptStore } from "../storage.js";
import { Overlay } from "../ui/overlay.js";
import { FORM_STYLE, settingsForm } from "../ui/settings-form.js";

/* global GM, GM_getValue, GM_setValue, GM_registerMenuCommand */
// Userscript managers hand these to the script as variables of the function they wrap it in (Tampermonkey,
// Violentmonkey), not always as properties of the window, so they are read by name here; the bundle keeps
// them as free identifiers.
const scope = {
  GM: typeof GM === "object" ? GM : undefined,
  GM_getValue: typeof GM_getValue === "function" ? GM_getValue : undefined,
  GM_setValue: typeof GM_setValue === "function" ? GM_setValue : undefined,
  GM_registerMenuCommand: typeof GM_registerMenuCommand === "function" ? GM_registerMenuCommand : undefined,
};
const store = userscriptStore(scope);

/** @type {Bridge | null} */
let bridge = null;
/** @type {{ showStatus: (status: string, detail?: string) => void } | null} */
let dialogForm = null;

const overlay = new Overlay(document, {
  onResource: (name, op, participant) => bridge?.resource(name, op, participant),
  onSettings: () => openSettings(),
});

/** @type {import("../bridge.js").View} */
const view = {
  status(status, detail) {
    overlay.status(status, detail);
    dialogForm?.showStatus(status, detail);
  },
  state: (s) => overlay.state(s),
  error: (m) => overlay.error(m),
  note: (m) => overlay.note(m),
  fair: (book) => overlay.fair(book),
};

async function openSettings() {
  const existing = overlay.root.querySelector("dialog.tr-dialog");
  if (existing) return;
  const dialog = document.createElement("dialog");
  dialog.className = "tr-dialog";
  const style = document.createElement("style");
  style.textContent = `${FORM_STYLE} dialog.tr-dialog { padding: 0; border: 1px solid #4b4560; border-radius: 8px; background: #1b1926; }
    dialog.tr-dialog .close { position: absolute; right: 6px; top: 6px; }`;
  const close = document.createElement("button");
  close.type = "button";
  close.className = "close";
  close.textContent = "×";
  close.setAttribute("aria-label", "Close");
  const shut = () => {
    dialog.close();
    dialog.remove();
    dialogForm = null;
  };
  close.addEventListener("click", shut);
  dialog.append(style, close);
  const settings = await store.get(SETTINGS_KEY);
  dialogForm = settingsForm(document, dialog, settings, async (next) => {
    await store.set(SETTINGS_KEY, next);
    shut();
    run();
  }, { storage: "your userscript manager's storage" });
  overlay.root.append(dialog);
  dialog.showModal();
}

async function run() {
  bridge?.stop();
  bridge = null;
  const settings = await store.get(SETTINGS_KEY);
  const chat = new Roll20Chat(document);
  await chat.ready();
  bridge = new Bridge({ store, chat, settings, view });
  bridge.start().catch((err) => view.status("error", err?.message ?? String(err)));
}

scope.GM_registerMenuCommand?.("tablerelay settings", () => openSettings());
run().catch((err) => view.status("error", err?.message ?? String(err)));
