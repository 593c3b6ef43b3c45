// The feed's rendering: the roll feed (cards for rolls and reveals, lines for Fear and Hope, members and
// campaign changes), each event's signature mark, and the Fear and Hope trackers and member list. What users
// typed goes in as text (dom.js's h), never as HTML.

import { ROLE_WORDS, avatar, h, roleTag, str, timeOf } from "./dom.js";
import { VISIBILITY_WORDS, isCritical, rollBody, rollSentence, systemName } from "./roll-render.js";
import { icon, markVerdict, pendingLine, seedLine } from "./fair-render.js";

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
      case "seed_commit":
      case "seed_reveal":
        node = seedLine(event); // fair dice (spec/fairness.md): a quiet line; the rolls carry the verdicts
        break;
      case "pending":
        node = pendingLine(event); // a witnessed roll announced: a quiet line an alarm can link to
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
    markVerdict(card, event);
    return card;
  }

  /** A roll's verdict changed (its dice seed, or the hidden roll, was revealed): its card's badge follows. */
  updateVerdict(event) {
    markVerdict(this.cards.get(event.seq), event);
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
    const mark = h("span", { class: "sig-ok", title: `Signed by the server (key ${event.kid}); the signature checks out.` }, icon("signed"), h("span", { class: "sr-only" }, " signature verified"));
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
