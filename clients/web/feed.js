// Shared by /watch and /table: the connection set-up, the roll feed, and the Fear/Hope trackers.
// Everything users type (names, labels, target names) goes into the DOM as text, never as HTML.

import { TableRelay } from "../js/tablerelay.js";

// ---- tiny DOM helper -----------------------------------------------------------------------------------

/** h("div", {class: "x", onclick: fn}, "text", child) */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "style" && typeof value === "object") {
      for (const [prop, v] of Object.entries(value)) el.style.setProperty(prop.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`), String(v));
    }
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

const str = (v) => (v === null || v === undefined ? "" : String(v)); // numbers and bigints alike

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

// ---- names and colours ---------------------------------------------------------------------------------

export function hueFor(id) {
  let hash = 0;
  for (const ch of str(id)) hash = (hash * 31 + ch.codePointAt(0)) >>> 0;
  return hash % 360;
}

export function avatar(actor) {
  const name = actor?.name || "?";
  const initial = [...name.trim()][0]?.toUpperCase() ?? "?";
  return h("span", { class: "avatar", style: { "--hue": hueFor(actor?.id ?? name) }, "aria-hidden": "true" }, initial);
}

const ROLE_WORDS = { gm: "GM", player: "Player", spectator: "Spectator" };

export function roleTag(role) {
  return h("span", { class: `role-tag ${role}` }, ROLE_WORDS[role] ?? role);
}

function timeOf(ts) {
  const date = new Date(Number(ts));
  return h(
    "time",
    { datetime: date.toISOString() },
    date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }),
  );
}

// ---- systems -------------------------------------------------------------------------------------------

export const SYSTEM_NAMES = {
  "drawsteel.power": ["Draw Steel", "Power roll"],
  "drawsteel.ability": ["Draw Steel", "Ability roll"],
  "daggerheart.duality": ["Daggerheart", "Duality roll"],
  "daggerheart.attack": ["Daggerheart", "Adversary attack"],
  "honors_edge.roll": ["Honor's Edge", "Roll and keep"],
  "honors_edge.skill": ["Honor's Edge", "Skill roll"],
  "honors_edge.damage": ["Honor's Edge", "Damage roll"],
  "nexus.test": ["Nexus", "Skill test"],
  "nexus.check": ["Nexus", "Check"],
  dice: ["Dice", "Formula"],
  faces: ["Foundry VTT", "Dice faces"],
};

export function systemName(system, intent) {
  const [game, roll] = SYSTEM_NAMES[system] ?? [system ?? "Roll", ""];
  if (system === "dice") return `Dice · ${intent?.dialect === "roll20" ? "Roll20" : "Foundry"} formula`;
  return roll ? `${game} · ${roll}` : game;
}

const VISIBILITY_WORDS = {
  gm: "GM roll",
  blind: "Blind roll",
  self: "Self roll",
};

// ---- dice ----------------------------------------------------------------------------------------------

function shapeClass(faces) {
  const f = Number(faces);
  return [4, 6, 8, 10, 12, 20, 100, 2].includes(f) ? `d${f}` : "d6";
}

function faceText(die) {
  if (Number(die.faces) === 3 && Math.abs(Number(die.value)) <= 1) {
    return ["−", "0", "+"][Number(die.value) + 1]; // a Fate die
  }
  return str(die.value);
}

function oneDie(faces, value, { role, kept = true, exploded = false, big = false, fate = false } = {}) {
  const classes = ["die", shapeClass(faces)];
  if (!kept) classes.push("dropped");
  if (exploded) classes.push("exploded");
  if (role === "hope" || role === "fear") classes.push(role);
  if (kept && role !== "hope" && role !== "fear" && Number(value) === Number(faces) && Number(faces) > 2) {
    classes.push("max");
  }
  if (big) classes.push("big");
  const words = [fate ? "Fate die" : `d${str(faces)}`, `showing ${value}`];
  if (role) words.unshift(role);
  if (!kept) words.push("dropped");
  if (exploded) words.push("exploded");
  return h("span", { class: classes.join(" "), role: "img", "aria-label": words.join(" ") }, h("span", {}, value));
}

/** Draws result.dice: kept vs dropped, roles (Hope/Fear), exploding chains. */
export function diceRow(result) {
  const dice = Array.isArray(result?.dice) ? result.dice : [];
  if (!dice.length) return null;
  const big = dice.length <= 3;
  const row = h("div", { class: "dice", role: "group", "aria-label": `${dice.length} ${dice.length === 1 ? "die" : "dice"}` });
  for (const die of dice) {
    const kept = die.kept !== false;
    if (Array.isArray(die.chain) && die.chain.length > 1) {
      // An exploding die: one die for keeping, drawn as its chain of faces.
      const chain = h("span", {
        class: "chain multi",
        role: "group",
        "aria-label": `exploding d${str(die.faces)}: ${die.chain.map(str).join(" + ")} = ${str(die.value)}${kept ? "" : ", dropped"}`,
      });
      die.chain.forEach((face, i) => {
        if (i) chain.append(h("span", { class: "chain-plus", "aria-hidden": "true" }, "+"));
        const last = i === die.chain.length - 1;
        chain.append(oneDie(die.faces, face, { kept, exploded: !last, big }));
      });
      chain.append(h("span", { class: "chain-sum", "aria-hidden": "true" }, `= ${str(die.value)}`));
      row.append(chain);
      continue;
    }
    const role = typeof die.role === "string" ? die.role : undefined;
    const showRole = role && !["d6"].includes(role);
    row.append(
      h(
        "span",
        { class: "die-wrap" },
        oneDie(die.faces, faceText(die), { role, kept, exploded: die.exploded === true, big, fate: die.kind === "fate" }),
        showRole ? h("span", { class: "die-role", "aria-hidden": "true" }, role === "attribute" ? "attr" : role) : null,
      ),
    );
  }
  return row;
}

// ---- outcomes in each game's own terms -----------------------------------------------------------------

const badge = (text, kind = "") => h("span", { class: `badge ${kind}` }, text);
const totalLine = (result, extra) =>
  result?.total === null || result?.total === undefined
    ? null
    : h("span", { class: "total" }, "Total ", h("b", {}, str(result.total)), extra ? ` ${extra}` : "");

const EDGE_WORDS = { edge: "Edge", double_edge: "Double edge", bane: "Bane", double_bane: "Double bane" };

function drawSteelPower(r) {
  const tier = Number(r.tier);
  const badges = [];
  if (r.critical) badges.push(badge("Critical", "crit"));
  if (EDGE_WORDS[r.edge_state]) badges.push(badge(EDGE_WORDS[r.edge_state], r.edge_state.includes("edge") ? "good" : "bad"));
  if (r.automatic) badges.push(badge(`Automatic tier ${str(r.automatic)}`));
  if (r.downgraded) badges.push(badge(`Downgraded from tier ${str(r.tier_rolled)}`));
  if (r.kind === "test") badges.push(badge("Test"));
  return [
    h("span", { class: `headline tier${tier}${r.critical ? " crit" : ""}` }, `Tier ${str(r.tier)}`),
    totalLine(r, r.natural !== undefined ? `(natural ${str(r.natural)})` : ""),
    badges.length ? h("span", { class: "badges" }, badges) : null,
  ];
}

function drawSteelAbility(r) {
  const targets = Array.isArray(r.targets) ? r.targets : [];
  const crit = targets.some((t) => t.critical) || r.critical;
  const first = targets[0] ?? r;
  const parts = [
    h(
      "span",
      { class: `headline tier${Number(first.tier)}${crit ? " crit" : ""}` },
      targets.length > 1 && targets.some((t) => str(t.tier) !== str(first.tier))
        ? `${targets.length} targets`
        : `Tier ${str(first.tier)}`,
    ),
    totalLine(r, r.natural !== undefined ? `(natural ${str(r.natural)})` : ""),
    crit ? h("span", { class: "badges" }, badge("Critical", "crit")) : null,
  ];
  const list = h("ul", { class: "targets", "aria-label": "Outcome per target" });
  for (const t of targets) {
    const dmg = t.damage !== null && t.damage !== undefined ? `${str(t.damage)}${t.damage_type ? ` ${t.damage_type}` : ""} damage` : "";
    const detail = [dmg, t.effect].filter(Boolean).join("; ");
    list.append(
      h(
        "li",
        {},
        h("span", { class: "t-name" }, t.name || "Target"),
        h("span", { class: `badge tier${Number(t.tier)}` }, `Tier ${str(t.tier)}`),
        t.critical ? badge("Critical", "crit") : null,
        detail ? h("span", { class: "t-detail" }, detail) : null,
      ),
    );
  }
  return targets.length ? [...parts, list] : parts;
}

function duality(r) {
  const crit = r.with === "critical";
  const words = crit ? "Critical success" : r.with === "hope" ? "With Hope" : "With Fear";
  const headClass = crit ? "crit" : r.with === "hope" ? "hope" : "fear";
  const badges = [];
  if (r.success === true && !crit) badges.push(badge("Success", "good"));
  if (r.success === false) badges.push(badge("Failure", "bad"));
  if (r.difficulty !== null && r.difficulty !== undefined) badges.push(badge(`Difficulty ${str(r.difficulty)}`));
  if (r.reaction) badges.push(badge("Reaction"));
  for (const effect of r.effects ?? []) {
    const sign = Number(effect.delta) > 0 ? "+" : "";
    badges.push(badge(`${sign}${str(effect.delta)} ${effect.resource === "fear" ? "Fear" : "Hope"}`, effect.resource));
  }
  return [
    h("span", { class: `headline ${headClass}` }, words),
    totalLine(r),
    badges.length ? h("span", { class: "badges" }, badges) : null,
  ];
}

function adversaryAttack(r) {
  const targets = Array.isArray(r.targets) ? r.targets : [];
  const crit = Boolean(r.critical) || targets.some((t) => t.critical);
  const hits = targets.filter((t) => t.hit).length;
  const headline = crit
    ? "Critical hit"
    : targets.length === 0
      ? "Attack"
      : targets.length === 1
        ? targets[0].hit ? "Hit" : "Miss"
        : `${hits} of ${targets.length} hit`;
  const headClass = crit ? "crit" : hits ? "good" : targets.length ? "bad" : "";
  const parts = [
    h("span", { class: `headline ${headClass}` }, headline),
    totalLine(r, r.natural !== undefined ? `(natural ${str(r.natural)})` : ""),
  ];
  const badges = [];
  if (r.mode && r.mode !== "normal") badges.push(badge(r.mode === "advantage" ? "Advantage" : "Disadvantage", r.mode === "advantage" ? "good" : "bad"));
  if (r.spend_fear || (r.requires && r.requires.fear)) badges.push(badge("Spent Fear", "fear"));
  if (badges.length) parts.push(h("span", { class: "badges" }, badges));
  if (targets.length) {
    const list = h("ul", { class: "targets", "aria-label": "Outcome per target" });
    for (const t of targets) {
      list.append(
        h(
          "li",
          {},
          h("span", { class: "t-name" }, t.name || "Target"),
          t.critical ? badge("Critical hit", "crit") : t.hit ? badge("Hit", "good") : badge("Miss", "bad"),
          t.evasion !== undefined ? h("span", { class: "t-detail" }, `Evasion ${str(t.evasion)}`) : null,
        ),
      );
    }
    parts.push(list);
  }
  return parts;
}

function honorsEdge(r) {
  const pool = r.pool || (r.rolled !== undefined ? `${str(r.rolled)}k${str(r.kept)}` : "");
  const hasTn = r.tn !== null && r.tn !== undefined;
  const badges = [];
  if (hasTn) badges.push(badge(`TN ${str(r.tn)}`));
  const success = Number(r.success_margins ?? 0);
  const failure = Number(r.failure_margins ?? 0);
  if (r.success === true && success > 0) badges.push(badge(`${success} success margin${success === 1 ? "" : "s"}`, "good"));
  if (r.success === false && failure > 0) badges.push(badge(`${failure} failure margin${failure === 1 ? "" : "s"}`, "bad"));
  if (Number(r.assist ?? 0) > 0) badges.push(badge(`Assist +${str(r.assist)}`));
  const headline = hasTn
    ? h("span", { class: `headline ${r.success ? "good" : "bad"}` }, r.success ? "Success" : "Failure")
    : h("span", { class: "headline" }, str(r.total));
  return [
    headline,
    hasTn ? totalLine(r, pool ? `(${pool})` : "") : h("span", { class: "total" }, pool ? `${pool}, kept dice summed` : ""),
    badges.length ? h("span", { class: "badges" }, badges) : null,
  ];
}

const LEVEL_WORDS = {
  blunder: ["Blunder", "bad"],
  failure: ["Failure", "bad"],
  weak: ["Weak success", "good"],
  strong: ["Strong success", "good"],
  critical: ["Critical success", "crit"],
};

function nexusTest(r) {
  const [words, kind] = LEVEL_WORDS[r.success_level] ?? [str(r.success_level), ""];
  const diff = r.difference !== undefined ? `${Number(r.difference) >= 0 ? "+" : ""}${str(r.difference)}` : "";
  const badges = [badge(`TN ${str(r.tn)}`)];
  if (diff) badges.push(badge(diff, Number(r.difference) >= 0 ? "good" : "bad"));
  const boons = Number(r.net_boons ?? 0);
  if (boons) badges.push(badge(`${Math.abs(boons)} ${boons > 0 ? "boon" : "bane"}${Math.abs(boons) === 1 ? "" : "s"}`, boons > 0 ? "good" : "bad"));
  return [h("span", { class: `headline ${kind}` }, words), totalLine(r), h("span", { class: "badges" }, badges)];
}

const CHECK_WORDS = { durability: "Durability check", supply: "Supply check", individual: "Check" };

function nexusCheck(r) {
  let outcome = r.outcome;
  let kind = "";
  if (r.kind === "durability") {
    kind = outcome === "ok" ? "good" : "bad";
    outcome = { ok: "Holds", damaged: "Damaged", destroyed: "Destroyed" }[outcome] ?? outcome;
  } else if (r.kind === "supply") {
    kind = outcome === "gone" ? "bad" : outcome === r.die ? "good" : "";
    outcome = outcome === "gone" ? "Supply gone" : outcome === r.die ? `Supply holds at ${r.die}` : `Supply down to ${outcome}`;
  } else if (outcome && typeof outcome === "object") {
    outcome = outcome.outcome ?? JSON.stringify(outcome);
  }
  return [
    h("span", { class: `headline ${kind}` }, str(outcome)),
    h("span", { class: "total" }, `${CHECK_WORDS[r.kind] ?? "Check"}: `, h("b", {}, str(r.value ?? r.total))),
  ];
}

function formula(r) {
  return [h("span", { class: "headline" }, str(r.total)), r.formula ? null : totalLine(r)];
}

/** Faces a VTT asked for: they have no total of their own, the VTT's formula adds them up. */
function faces(r) {
  return [h("span", { class: "total" }, r.for ? ["for ", h("b", {}, str(r.for))] : "faces for a VTT roll")];
}

const OUTCOMES = {
  "drawsteel.power": drawSteelPower,
  "drawsteel.ability": drawSteelAbility,
  "daggerheart.duality": duality,
  "daggerheart.attack": adversaryAttack,
  "honors_edge.roll": honorsEdge,
  "honors_edge.skill": honorsEdge,
  "honors_edge.damage": honorsEdge,
  "nexus.test": nexusTest,
  "nexus.check": nexusCheck,
  dice: formula,
  faces,
};

function isCritical(r) {
  return Boolean(
    r?.critical || r?.with === "critical" || r?.success_level === "critical" || r?.targets?.some?.((t) => t.critical),
  );
}

/** The body of an open roll: dice, outcome, formula, summary. */
export function rollBody(event) {
  const r = event.result ?? {};
  const render = OUTCOMES[r.system] ?? formula;
  let outcome;
  try {
    outcome = render(r);
  } catch {
    outcome = [h("span", { class: "headline" }, str(r.total))]; // an unexpected shape: still show the total
  }
  return [
    event.label ? h("p", { class: "label" }, event.label) : null,
    diceRow(r),
    h("div", { class: "outcome" }, outcome),
    r.formula ? h("div", { class: "formula" }, r.formula) : null,
    r.text ? h("p", { class: "summary" }, struck(r.text)) : null,
  ];
}

/** The rules' summaries mark dropped dice as ~~n~~; show them struck through. */
function struck(text) {
  const parts = String(text).split(/~~(.*?)~~/);
  return parts.map((part, i) => (i % 2 ? h("s", { "aria-label": `${part} dropped` }, part) : part));
}

/** A sentence for screen readers (the live region) about a roll. */
export function rollSentence(event) {
  const who = event.actor?.name ?? "Someone";
  if (event.sealed) return `${who} made a sealed ${VISIBILITY_WORDS[event.visibility]?.toLowerCase() ?? "roll"}.`;
  const text = event.result?.text ?? `total ${str(event.result?.total)}`;
  return `${who} rolled${event.label ? ` ${event.label}` : ""}: ${text}`;
}

// ---- the feed ------------------------------------------------------------------------------------------

/**
 * The roll feed (newest first), following the WAI-ARIA feed pattern: each entry is an article that can be
 * focused; PageDown/PageUp (or j/k) move between them. New rolls are also announced in a live region.
 */
export class Feed {
  constructor(root, { announcer, limit = 200, actions, members = true, only } = {}) {
    this.only = only; // a Set of the event kinds shown (the overlay's rolls), or every kind
    this.root = root;
    this.members = members; // show join/leave lines (never for spectators: a stream's audience comes and goes)
    this.announcer = announcer;
    this.limit = limit;
    this.actions = actions; // (event, card) => element | null: per-card controls (the table page's Reveal)
    this.cards = new Map(); // seq -> card element (rolls)
    this.reveals = new Map(); // seq of a sealed roll -> its reveal event
    root.setAttribute("role", "feed");
    root.setAttribute("aria-busy", "false");
    root.addEventListener("keydown", (e) => this._keys(e));
    this._empty();
  }

  _empty() {
    if (!this.root.children.length) {
      this.root.append(h("p", { class: "feed-empty", "data-empty": "" }, "No rolls yet. They appear here as they happen."));
    }
  }

  reset() {
    this.root.replaceChildren();
    this.cards.clear();
    this.reveals.clear();
    this._empty();
  }

  /** Add an event; `live` ones animate in and are announced. */
  add(event, { live = true } = {}) {
    if (this.only && !this.only.has(event.kind)) return;
    let node = null;
    switch (event.kind) {
      case "roll":
        node = this._rollCard(event);
        this.cards.set(event.seq, node);
        break;
      case "reveal":
        node = this._revealCard(event);
        break;
      case "resource":
        node = this._resourceLine(event);
        break;
      case "join":
      case "leave":
        if (!this.members || (event.member ?? event.actor)?.role === "spectator") return;
        node = this._memberLine(event);
        break;
      case "rename":
      case "merge":
      case "kick":
      case "invites":
      case "archive":
        if (!this.members) return;
        node = this._campaignLine(event);
        break;
      default:
        return;
    }
    markSignature(node, event);
    this.root.querySelector("[data-empty]")?.remove();
    node.dataset.seq = String(event.seq);
    if (live) {
      node.classList.add("fresh");
      setTimeout(() => node.classList.remove("fresh"), 1200);
    }
    this.root.prepend(node);
    while (this.root.children.length > this.limit) {
      const last = this.root.lastElementChild;
      this.cards.delete(Number(last.dataset.seq));
      last.remove();
    }
    this._positions();
    if (live && this.announcer) {
      const sentence =
        event.kind === "roll"
          ? rollSentence(event)
          : event.kind === "reveal"
            ? `Revealed: ${rollSentence({ ...(event.roll ?? {}), actor: event.roll?.actor ?? event.actor })}`
            : null;
      if (sentence) this.announce(sentence);
    }
  }

  announce(sentence) {
    // Replace rather than append so the region stays one short sentence.
    this.announcer.textContent = "";
    setTimeout(() => (this.announcer.textContent = sentence), 30);
  }

  _positions() {
    const articles = this.root.querySelectorAll(":scope > article");
    articles.forEach((a, i) => {
      a.setAttribute("aria-posinset", String(i + 1));
      a.setAttribute("aria-setsize", String(articles.length));
    });
  }

  _keys(e) {
    const current = e.target.closest?.("article");
    if (!current || current.parentElement !== this.root) return;
    let next = null;
    if (e.key === "PageDown" || e.key === "j") next = current.nextElementSibling;
    if (e.key === "PageUp" || e.key === "k") next = current.previousElementSibling;
    while (next && next.tagName !== "ARTICLE") next = e.key === "PageDown" || e.key === "j" ? next.nextElementSibling : next.previousElementSibling;
    if (next) {
      e.preventDefault();
      next.focus();
    }
  }

  _head(event, extraChips = []) {
    const actor = event.actor ?? {};
    const system = event.result?.system ?? event.intent?.system;
    const chips = [...extraChips];
    if (event.visibility && event.visibility !== "public") {
      chips.unshift(h("span", { class: "chip hidden-roll" }, VISIBILITY_WORDS[event.visibility] ?? event.visibility));
    }
    return h(
      "div",
      { class: "card-head" },
      avatar(actor),
      h(
        "div",
        { class: "who" },
        h("div", {}, h("span", { class: "who-name" }, actor.name ?? "Someone"), " ", actor.role ? roleTag(actor.role) : null),
        h("div", { class: "who-line" }, event.sealed ? "Sealed roll" : systemName(system, event.intent)),
      ),
      h("div", { class: "card-meta" }, timeOf(event.ts), chips.length ? h("div", { class: "badges" }, chips) : null, h("span", { class: "sr-only" }, `event ${event.seq}`)),
    );
  }

  _rollCard(event) {
    const id = `roll-${event.seq}`;
    const card = h("article", {
      class: `card roll${!event.sealed && isCritical(event.result) ? " crit" : ""}`,
      tabindex: "0",
      id,
      "aria-label": rollSentence(event),
    });
    card.append(this._head(event));
    if (event.sealed) {
      card.classList.add("sealed");
      card.append(
        h(
          "div",
          { class: "sealed-body" },
          h("span", { class: "die d20 sealed big", role: "img", "aria-label": "sealed die" }, h("span", {}, "?")),
          h(
            "div",
            {},
            h("div", {}, "Sealed until it is revealed"),
            h(
              "div",
              { class: "fingerprint" },
              "Already rolled; fingerprint ",
              h("span", { class: "commitment", title: "SHA-256 of a nonce and the sealed roll: the reveal must match it" }, event.commitment ?? ""),
            ),
          ),
        ),
      );
    } else {
      card.append(...rollBody(event).filter(Boolean));
    }
    const controls = this.actions?.(event, card);
    if (controls) card.append(h("div", { class: "card-actions" }, controls));
    return card;
  }

  _revealCard(event) {
    this.reveals.set(event.of, event);
    const roll = event.roll && typeof event.roll === "object" ? event.roll : null;
    const original = this.cards.get(event.of);
    const verifiedChip =
      event.commitmentVerified === true
        ? h("span", { class: "chip verified", title: "SHA-256 of the revealed roll matches the fingerprint published when it was rolled" }, "✓ Verified")
        : event.commitmentVerified === false
          ? h("span", { class: "chip unverified", title: "The revealed roll does not match the fingerprint published when it was rolled" }, "✗ Does not match")
          : null;
    // The sealed card opens in place too, for whoever scrolls back to it.
    if (original && roll) {
      const opened = this._rollCard({ ...roll, seq: event.of, sealed: false, ts: roll.ts ?? event.ts });
      opened.querySelector(".card-meta")?.append(h("div", { class: "badges" }, h("span", { class: "chip" }, "Revealed"), verifiedChip?.cloneNode(true)));
      opened.classList.add("opened");
      opened.dataset.seq = String(event.of);
      original.replaceWith(opened);
      this.cards.set(event.of, opened);
    } else if (original) {
      original.querySelector(".card-actions")?.remove();
    }
    const card = h("article", {
      class: `card reveal${roll && isCritical(roll.result) ? " crit" : ""}`,
      tabindex: "0",
      "aria-label": `${event.actor?.name ?? "Someone"} revealed ${roll ? rollSentence(roll) : `roll ${event.of}`}${event.commitmentVerified ? " (verified)" : ""}`,
    });
    const revealer = event.actor?.name ?? "Someone";
    card.append(
      this._head(
        { ...(roll ?? {}), actor: roll?.actor ?? event.actor, ts: event.ts, seq: event.seq, visibility: "public", sealed: !roll },
        [h("span", { class: "chip" }, "Revealed"), verifiedChip].filter(Boolean),
      ),
    );
    if (roll) card.append(...rollBody(roll).filter(Boolean));
    card.append(
      h(
        "p",
        { class: "opened-note" },
        `${revealer} revealed this ${VISIBILITY_WORDS[roll?.visibility]?.toLowerCase() ?? "roll"}`,
        original ? " (" : "",
        original ? h("a", { href: `#roll-${event.of}`, onclick: (e) => { e.preventDefault(); this.cards.get(event.of)?.focus(); } }, "see it in the feed") : null,
        original ? ")" : "",
        ".",
      ),
    );
    return card;
  }

  _resourceLine(event) {
    const amount = Math.abs(Number(event.delta));
    const gained = Number(event.delta) >= 0;
    const what = event.name === "fear" ? "Fear" : "Hope";
    const holder = event.name === "hope" ? this.nameOf?.(event.participant) : null;
    const sentence = event.name === "fear"
      ? `Fear ${gained ? "rises" : "falls"} by ${amount}`
      : `${holder ?? "A player"} ${gained ? "gains" : "spends"} ${amount} Hope`;
    const cause = event.cause != null ? ` (from roll ${str(event.cause)})` : "";
    return h(
      "div",
      { class: `line resource ${event.name}`, role: "note" },
      h("span", { class: "dot", "aria-hidden": "true" }),
      h("span", {}, sentence, ": ", h("b", {}, `${what} ${str(event.value)}`), cause),
      timeOf(event.ts),
    );
  }

  _campaignLine(event) {
    const who = (m) => h("b", {}, m?.name ?? "Someone");
    const by = event.actor?.name ?? "The GM";
    const text = {
      rename: () => [by, " renamed ", who({ name: event.was }), " to ", who(event.member)],
      merge: () => [by, " merged ", who(event.merged), " into ", who(event.into), event.hope == null ? "" : ` (Hope ${str(event.hope)})`],
      kick: () => [by, " removed ", who(event.member), event.reason ? `: ${event.reason}` : ""],
      invites: () => [by, " replaced the invite links"],
      archive: () => [by, " archived the room: it is read-only now"],
    }[event.kind]();
    return h("div", { class: `line campaign ${event.kind}`, role: "note" }, h("span", { class: "dot", "aria-hidden": "true" }), h("span", {}, ...text), timeOf(event.ts));
  }

  _memberLine(event) {
    const member = event.member ?? event.actor ?? {};
    return h(
      "div",
      { class: `line ${event.kind}`, role: "note" },
      h("span", { class: "dot", "aria-hidden": "true" }),
      h("span", {}, h("b", {}, member.name ?? "Someone"), event.kind === "join" ? " joined" : " left", member.role ? ` (${ROLE_WORDS[member.role] ?? member.role})` : ""),
      timeOf(event.ts),
    );
  }
}

// ---- signatures ------------------------------------------------------------------------------------------

/**
 * The event's signature check, shown on its card or line: a small quiet mark when it verifies, and an
 * alert that cannot be missed when it does not (a forged or altered roll must never look like a real one).
 * Events the client did not check (verification switched off) get neither.
 */
export function markSignature(node, event) {
  if (event.verified === true) {
    const mark = h("span", { class: "sig-ok", title: `Signed by the server (key ${event.kid}); the signature checks out.` }, "🔏", h("span", { class: "sr-only" }, " signature verified"));
    (node.querySelector(".card-meta") ?? node).append(mark);
  } else if (event.verified === false) {
    node.classList.add("forged");
    node.setAttribute("data-signature", "failed");
    const warning = h(
      "p",
      { class: "sig-warning", role: "alert" },
      h("b", {}, "⚠ Not verified: do not trust this event. "),
      event.verifyError ?? "Its signature does not check out.",
    );
    node.prepend(warning);
  }
}

// ---- Fear and Hope -------------------------------------------------------------------------------------

export const FEAR_MAX = 12;
export const HOPE_MAX = 6;

function pips(count, max, label) {
  const n = Math.max(0, Math.min(max, Number(count) || 0));
  const row = h("div", { class: "pips", role: "meter", "aria-label": label, "aria-valuemin": "0", "aria-valuemax": String(max), "aria-valuenow": String(n) });
  for (let i = 0; i < max; i++) row.append(h("span", { class: `pip${i < n ? " on" : ""}`, "aria-hidden": "true" }));
  return row;
}

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

/** Renders Fear, each player's Hope and the member list; `controls` adds GM/player buttons. */
export function renderTrackers(root, state, names, { controls, fearMax = FEAR_MAX, hopeMax = HOPE_MAX } = {}) {
  const previous = new Map([...root.querySelectorAll("[data-tracker]")].map((el) => [el.dataset.tracker, el.dataset.value]));
  root.replaceChildren();
  const fear = h(
    "div",
    { class: "tracker fear", "data-tracker": "fear", "data-value": str(state.fear) },
    h("div", { class: "tracker-head" }, h("span", { class: "tracker-name" }, "Fear"), h("span", { class: "tracker-value" }, `${str(state.fear)} / ${fearMax}`)),
    pips(state.fear, fearMax, `Fear: ${str(state.fear)} of ${fearMax}`),
    controls?.("fear", null, state.fear) ?? null,
  );
  root.append(fear);
  const ids = new Set(Object.keys(state.hope ?? {}));
  for (const m of state.members ?? []) if (m.role === "player") ids.add(m.id);
  for (const id of ids) {
    const value = state.hope?.[id] ?? 0;
    const name = names.name(id) ?? "Player";
    root.append(
      h(
        "div",
        { class: "tracker hope", "data-tracker": `hope:${id}`, "data-value": str(value) },
        h("div", { class: "tracker-head" }, h("span", { class: "tracker-name", title: name }, name), h("span", { class: "tracker-value" }, `Hope ${str(value)} / ${hopeMax}`)),
        pips(value, hopeMax, `${name}'s Hope: ${str(value)} of ${hopeMax}`),
        controls?.("hope", id, value) ?? null,
      ),
    );
  }
  // A changed tracker pulses its newest pip.
  for (const el of root.querySelectorAll("[data-tracker]")) {
    const before = previous.get(el.dataset.tracker);
    if (before !== undefined && before !== el.dataset.value) {
      const on = el.querySelectorAll(".pip.on");
      (on[on.length - 1] ?? el.querySelector(".pip"))?.classList.add("bump");
    }
  }
}

export function renderMembers(root, members) {
  root.replaceChildren();
  const sorted = [...(members ?? [])].sort((a, b) => (a.role === b.role ? str(a.name).localeCompare(str(b.name)) : a.role === "gm" ? -1 : b.role === "gm" ? 1 : a.role === "player" ? -1 : 1));
  if (!sorted.length) root.append(h("li", { class: "name" }, "Nobody here yet"));
  for (const m of sorted) {
    root.append(h("li", {}, avatar(m), h("span", { class: "name" }, m.name ?? "Someone"), roleTag(m.role)));
  }
}

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
  return names;
}
