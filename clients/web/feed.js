// Shared by /watch and /table: the page's data. The connection set-up (the token in the fragment, the relay's
// addresses, the session kept per invite, the status line), the names of the room's participants, and the
// wiring of a relay's events and state into the views (feed-render.js, roll-render.js, dom.js draw them).

import { TableRelay } from "../js/tablerelay.js";
import { FEAR_MAX, HOPE_MAX, renderMembers, renderTrackers } from "./feed-render.js";
import { showAlarm } from "./fair-render.js";

// ---- connection ----------------------------------------------------------------------------------------

/** The token from the page's fragment (never part of a request line), or null. */
export function tokenFromFragment() {
  const raw = decodeURIComponent(location.hash.replace(/^#/, "")).trim();
  return raw || null;
}

export function serverUrl() {
  // Beside the page, so a relay published under a path (https://example.org/dice/watch) is reached too.
  const url = new URL("ws", location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.hash = "";
  url.search = "";
  return url.href;
}

/**
 * The relay addresses the page connects to: its own (beside the page), or the cluster nodes listed in the
 * query as `?servers=wss://a.example/ws,wss://b.example/ws`; the client tries the next one on each
 * reconnect (spec/cluster.md). Anything but ws:// or wss:// in the list is ignored.
 */
export function serverUrls(search = location.search) {
  const listed = (new URLSearchParams(search).get("servers") || "")
    .split(",")
    .map((part) => part.trim())
    .filter((part) => {
      try {
        return ["ws:", "wss:"].includes(new URL(part).protocol);
      } catch {
        return false;
      }
    });
  return listed.length ? listed : [serverUrl()];
}

function sessionKey(token) {
  // The signature part identifies the invite without storing the whole token twice.
  return `tablerelay.session.${token.slice(-32)}`;
}

/** True when this browser has joined with this token before (its session is stored). */
export function hasSession(token) {
  try {
    return Boolean(localStorage.getItem(sessionKey(token)));
  } catch {
    return false;
  }
}

/**
 * Connect with the fragment's token, rejoining as the same participant after a reload (the welcome's
 * session token is kept in localStorage, per invite).
 */
export function connectFromPage({ name, formats } = {}) {
  const token = tokenFromFragment();
  if (!token) return null;
  let session = null;
  try {
    session = localStorage.getItem(sessionKey(token));
  } catch {
    session = null; // storage may be off (private mode, sandboxed overlay): every load is a new join
  }
  const relay = new TableRelay(serverUrls(), token, { name, formats, session });
  relay.on("welcome", (welcome) => {
    try {
      if (welcome.session) localStorage.setItem(sessionKey(token), welcome.session);
    } catch {
      /* see above */
    }
  });
  if (typeof window !== "undefined") {
    // Waiting out a backoff is pointless once the network is back or the reader is looking again.
    const hurry = () => {
      if (relay.status === "reconnecting") relay.reconnectNow();
    };
    window.addEventListener("online", hurry);
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") hurry();
    });
  }
  return relay;
}

export function showStatus(el, relay) {
  const words = {
    idle: "Not connected",
    connecting: "Connecting…",
    open: "Live",
    reconnecting: "Reconnecting…",
    closed: "Disconnected",
  };
  const update = (status) => {
    el.dataset.status = status;
    el.textContent = words[status] ?? status;
  };
  update(relay.status);
  relay.on("status", update);
}

// ---- names ---------------------------------------------------------------------------------------------

/** Keeps names for participant ids (members come and go; their Hope stays). */
export class Names {
  constructor() {
    this.map = new Map();
  }
  learn(actor) {
    if (actor?.id && actor.name) this.map.set(actor.id, { name: actor.name, role: actor.role });
  }
  name(id) {
    return this.map.get(id)?.name ?? null;
  }
  role(id) {
    return this.map.get(id)?.role ?? null;
  }
}

// ---- the page ------------------------------------------------------------------------------------------

/** Wires a relay to a feed, trackers and members list; returns the Names registry. */
export function bindPage(relay, { feed, trackers, members, controls, onState }) {
  const names = new Names();
  feed.nameOf = (id) => names.name(id);
  const redraw = () => {
    renderTrackers(trackers, relay.state, names, {
      controls,
      fearMax: relay.room?.fear_max ?? FEAR_MAX,
      hopeMax: relay.room?.hope_max ?? HOPE_MAX,
    });
    if (members) renderMembers(members, relay.state.members);
    onState?.(relay.state);
  };
  relay.on("welcome", (welcome, { fresh }) => {
    names.learn(welcome.you);
    for (const m of welcome.state?.members ?? []) names.learn(m);
    for (const e of welcome.history ?? []) {
      names.learn(e.actor);
      names.learn(e.member);
    }
    if (fresh) feed.reset();
  });
  relay.on("event", (event, { replay }) => {
    names.learn(event.actor);
    names.learn(event.member);
    if (event.kind === "reveal") names.learn(event.roll?.actor);
    feed.add(event, { live: !replay });
  });
  relay.on("state", redraw);
  // Fair dice (spec/fairness.md): a verdict that changes redraws its badge; an alarm raises the red banner.
  relay.on("verdict", (event) => feed.updateVerdict(event));
  relay.on("alarm", (alarm) => showAlarm(alarm));
  return names;
}
