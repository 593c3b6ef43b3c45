// /watch: the spectator feed. The token rides in the URL fragment (/watch#TOKEN), so it never reaches a
// request line or a log. Options: ?overlay=1 (transparent stream overlay), ?limit=N (cards kept), ?name=.
// In overlay mode (an OBS browser source): ?last=N rolls shown large [3], ?fear=0 and ?hope=0 hide those
// trackers (both: no tracker panel at all).
import { h } from "./dom.js";
import { bindPage, connectFromPage, showStatus } from "./feed.js";
import { Feed } from "./feed-render.js";

const params = new URLSearchParams(location.search);
const overlay = params.get("overlay") === "1";
const count = (name) => Number.parseInt(params.get(name) ?? "", 10);
const limit = Math.max(1, Math.min(500, count("last") || count("limit") || (overlay ? 3 : 200)));
if (overlay) {
  document.body.classList.add("overlay");
  const off = (name) => params.get(name) === "0" || params.get(name) === "false";
  document.body.classList.toggle("no-fear", off("fear"));
  document.body.classList.toggle("no-hope", off("hope"));
}

const feedEl = document.getElementById("feed");
const relay = connectFromPage({ name: params.get("name") || undefined });

if (!relay) {
  feedEl.replaceChildren(
    h(
      "div",
      { class: "notice" },
      h("p", {}, "This page needs a spectator link: ", h("code", {}, "/watch#TOKEN"), "."),
      h("p", {}, "Ask the GM for it (", h("code", {}, "tablerelay room create"), " prints one)."),
    ),
  );
  document.getElementById("status").textContent = "No token";
} else {
  // An overlay shows rolls and what reveals them; Fear and Hope changes live in the trackers.
  const only = overlay ? new Set(["roll", "reveal"]) : undefined;
  const feed = new Feed(feedEl, { announcer: document.getElementById("announcer"), limit, members: !overlay, only });
  bindPage(relay, {
    feed,
    trackers: document.getElementById("trackers"),
    members: document.getElementById("members"),
  });
  showStatus(document.getElementById("status"), relay);
  const overlayStatus = document.getElementById("overlay-status");
  relay.on("status", (status) => {
    overlayStatus.textContent = status === "open" ? "" : status === "closed" ? "Disconnected" : "Reconnecting…";
  });
  relay.on("welcome", (welcome) => {
    document.getElementById("room-name").textContent = `· ${welcome.room?.name ?? ""}`;
    document.title = `${welcome.room?.name ?? "tablerelay"} · live rolls`;
  });
  relay.on("close", (error) => {
    feedEl.prepend(h("p", { class: "notice", role: "alert" }, `The server closed the connection: ${error.message}`));
  });
  relay.connect().catch(() => {}); // the close listener explains a refusal
  window.tablerelay = relay; // for the curious (and the browser tests)
}
