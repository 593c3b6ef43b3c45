// The extension's background script: it only paints the toolbar badge of each Roll20 tab with that tab's
// connection status, which the content script reports.

const api = globalThis.browser ?? globalThis.chrome;

const BADGE = {
  connected: { text: "on", color: "#23784a" },
  connecting: { text: "…", color: "#9a6b12" },
  reconnecting: { text: "…", color: "#9a6b12" },
  error: { text: "!", color: "#a02c2c" },
  off: { text: "", color: "#555555" },
};

api.runtime.onMessage.addListener((message, sender) => {
  if (message?.type !== "tablerelay-status" || sender.tab?.id === undefined) return;
  const tabId = sender.tab.id;
  const badge = BADGE[message.status] ?? BADGE.off;
  api.action.setBadgeText({ tabId, text: badge.text });
  api.action.setBadgeBackgroundColor({ tabId, color: badge.color });
  api.action.setTitle({ tabId, title: `tablerelay: ${message.status}${message.detail ? ` (${message.detail})` : ""}` });
});
