// The toolbar popup: the settings form, saved to the extension's storage (the content script picks the
// change up and reconnects), and the last status a Roll20 tab reported.

import { SETTINGS_KEY } from "../settings.js";
import { extensionStore } from "../storage.js";
import { FORM_STYLE, settingsForm } from "../ui/settings-form.js";

const api = globalThis.browser ?? globalThis.chrome;
const store = extensionStore(api.storage.local);

async function main() {
  const style = document.createElement("style");
  style.textContent = FORM_STYLE;
  document.head.append(style);
  const settings = await store.get(SETTINGS_KEY);
  const form = settingsForm(document, document.body, settings, async (next) => {
    await store.set(SETTINGS_KEY, next);
  });
  const last = await store.get("status");
  if (last) form.showStatus(last.status, last.detail);
  api.storage.onChanged.addListener((changes, area) => {
    const status = changes.status?.newValue;
    if (area === "local" && status) form.showStatus(status.status, status.detail);
  });
}

main();
