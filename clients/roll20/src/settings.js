// The bridge's settings, as the popup (or the userscript's dialog) saves them in the bridge's storage.

/**
 * @typedef {object} Settings
 * @property {string} relayUrl  the relay's WebSocket address, e.g. wss://relay.example/ws
 * @property {string} token     this user's room token (a player invite, a GM token or a session token)
 * @property {string} name      the name to join with (used when the token makes a new participant)
 * @property {"mine" | "all"} post  post only my own events, or everything I may see when nobody else does
 * @property {number} fallbackDelay ms a fallback poster waits for another bridge's post (election.js)
 */

export const SETTINGS_KEY = "settings";

/** @type {Settings} */
export const DEFAULTS = Object.freeze({ relayUrl: "", token: "", name: "", post: "mine", fallbackDelay: 1500 });

/**
 * Settings with defaults filled in and values checked.
 * @param {Partial<Settings> | undefined | null} raw
 * @returns {Settings}
 */
export function normalizeSettings(raw) {
  const s = { ...DEFAULTS, ...(raw ?? {}) };
  const delay = Number(s.fallbackDelay);
  return {
    relayUrl: String(s.relayUrl ?? "").trim(),
    token: String(s.token ?? "").trim(),
    name: String(s.name ?? "").trim().slice(0, 100),
    post: s.post === "all" ? "all" : "mine",
    fallbackDelay: Number.isFinite(delay) && delay >= 0 ? Math.min(delay, 60_000) : DEFAULTS.fallbackDelay,
  };
}

/**
 * A sentence about what is wrong with these settings, or null when they can be used.
 * @param {Settings} s
 */
export function settingsProblem(s) {
  if (!s.relayUrl) return "The relay address is missing.";
  let url;
  try {
    url = new URL(s.relayUrl);
  } catch {
    return "The relay address is not a URL (it looks like wss://relay.example/ws).";
  }
  if (url.protocol !== "ws:" && url.protocol !== "wss:") return "The relay address starts with wss:// (or ws:// for a local relay).";
  if (!s.token) return "The token is missing.";
  return null;
}
