// The bridge's own storage: chrome.storage.local in the extension, GM_getValue/GM_setValue in a userscript.
// Never the page's localStorage: Roll20's scripts (and anything else on the page) can read that, and the
// relay token and session must stay out of their reach.

/**
 * @typedef {object} Store
 * @property {(key: string) => Promise<any>} get  the value, or undefined
 * @property {(key: string, value: any) => Promise<void>} set
 */

/**
 * chrome.storage.local (Chromium, and Firefox's `browser.storage.local`, which also answers to `chrome`).
 * @param {any} area a chrome.storage.StorageArea
 * @returns {Store}
 */
export function extensionStore(area) {
  return {
    async get(key) {
      const found = await area.get(key);
      return found[key];
    },
    async set(key, value) {
      await area.set({ [key]: value });
    },
  };
}

/**
 * A userscript manager's storage: GM.getValue (Greasemonkey 4, Violentmonkey, Tampermonkey) when it
 * exists, else the older synchronous GM_getValue. Values are stored as JSON text, which every manager keeps.
 * @param {any} scope the userscript's global scope (where GM / GM_getValue live)
 * @returns {Store}
 */
export function userscriptStore(scope) {
  const gm = scope.GM;
  const read = gm?.getValue ? (k) => gm.getValue(k) : async (k) => scope.GM_getValue(k);
  const write = gm?.setValue ? (k, v) => gm.setValue(k, v) : async (k, v) => scope.GM_setValue(k, v);
  return {
    async get(key) {
      const raw = await read(key);
      if (typeof raw !== "string") return raw ?? undefined;
      try {
        return JSON.parse(raw);
      } catch {
        return undefined;
      }
    },
    async set(key, value) {
      await write(key, JSON.stringify(value));
    },
  };
}

/** @returns {Store} in memory only (tests, and a fallback that forgets on reload). */
export function memoryStore() {
  const map = new Map();
  return {
    async get(key) {
      return map.has(key) ? structuredClone(map.get(key)) : undefined;
    },
    async set(key, value) {
      map.set(key, structuredClone(value));
    },
  };
}
