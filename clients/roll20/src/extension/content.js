// The extension's content script on Roll20's editor page: it runs in the extension's isolated world, reads
// the settings from the extension's storage (the page cannot), and runs the bridge against Roll20's chat.

import { Bridge } from "../bridge.js";
import { Roll20Chat } from "../roll20-chat.js";
import { SETTINGS_KEY } from "../settings.js";
import { extensionStore } from "../storage.js";
import { Overlay } from "../ui/overlay.js";

// Firefox names the API `browser` (and also answers to `chrome`); Chromium only has `chrome`.
const api = globalThis.browser ?? globalThis.chrome;
const store = extensionStore(api.storage.local);

/** @type {Bridge | null} */
let bridge = null;
const overlay = new Overlay(document, { onResource: (name, op, participant) => bridge?.resource(name, op, participant) });

// The popup and the toolbar badge show the status too: tell the background script, and keep the last one.
function report(status, detail) {
  Promise.resolve(api.runtime.sendMessage({ type: "tablerelay-status", status, detail })).catch(() => {});
  store.set("status", { status, detail: detail ?? "", at: Date.now() }).catch(() => {});
}

/** @type {import("../bridge.js").View} */
const view = {
  status(status, detail) {
    overlay.status(status, detail);
    report(status, detail);
  },
  state: (s) => overlay.state(s),
  error: (m) => overlay.error(m),
  note: (m) => overlay.note(m),
  fair: (book) => overlay.fair(book),
};

let generation = 0;
async function run() {
  const mine = ++generation;
  bridge?.stop();
  bridge = null;
  const settings = await store.get(SETTINGS_KEY);
  const chat = new Roll20Chat(document);
  await chat.ready();
  if (mine !== generation) return; // the settings changed again meanwhile
  bridge = new Bridge({ store, chat, settings, view });
  bridge.start().catch((err) => view.status("error", err?.message ?? String(err)));
}

api.storage.onChanged.addListener((changes, area) => {
  if (area === "local" && changes[SETTINGS_KEY]) run();
});
run().catch((err) => view.status("error", err?.message ?? String(err)));
