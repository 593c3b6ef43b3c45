// Fair dice on the pages (spec/fairness.md): each roll's verdict as a small badge with its explanation (on
// hover as a title, on tap or Enter in a line below it), the quiet lines of the room's seed events, and the red
// banner an alarm raises. Icons are drawn in SVG, never font glyphs (a Chromium without emoji fonts shows an
// empty box for a check mark).

import { h, str, timeOf } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";

function svg(...shapes) {
  const el = document.createElementNS(SVG, "svg");
  el.setAttribute("viewBox", "0 0 16 16");
  el.setAttribute("width", "12");
  el.setAttribute("height", "12");
  el.setAttribute("aria-hidden", "true");
  el.setAttribute("focusable", "false");
  el.setAttribute("class", "fair-icon");
  for (const [tag, attrs] of shapes) {
    const shape = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries({ fill: "none", stroke: "currentColor", "stroke-width": "2", "stroke-linecap": "round", "stroke-linejoin": "round", ...attrs })) {
      shape.setAttribute(key, value);
    }
    el.append(shape);
  }
  return el;
}

const ICONS = {
  fair: () => svg(["path", { d: "M3 8.5l3 3 7-7" }]),
  unwitnessed: () => svg(["circle", { cx: "8", cy: "8", r: "5.5" }], ["path", { d: "M5.5 8h5" }]),
  "awaiting seed": () => svg(["circle", { cx: "8", cy: "8", r: "5.5" }], ["path", { d: "M8 5v3.2l2 1.3" }]),
  sealed: () => svg(["rect", { x: "3.5", y: "7", width: "9", height: "6.5", rx: "1" }], ["path", { d: "M5.5 7V5a2.5 2.5 0 0 1 5 0v2" }]),
  failed: () => svg(["path", { d: "M4 4l8 8M12 4l-8 8" }]),
  alarm: () => svg(["path", { d: "M8 2l6.5 12h-13z" }], ["path", { d: "M8 6.5v3.5M8 12.2v.1" }]),
  signed: () => svg(["path", { d: "M8 1.8l5 2v4c0 3-2.2 5.2-5 6.4-2.8-1.2-5-3.4-5-6.4v-4z" }], ["path", { d: "M5.6 8.2l1.7 1.7 3.2-3.4" }]),
};

/** A small SVG icon by name (fair, unwitnessed, awaiting seed, sealed, failed, alarm, signed). */
export const icon = (name) => (ICONS[name] ?? ICONS.unwitnessed)();

const WORDS = {
  fair: "Fair",
  unwitnessed: "Unwitnessed",
  "awaiting seed": "Awaiting seed",
  sealed: "Sealed",
  failed: "Fairness failed",
};

/** What a verdict means, in a sentence or two for a player. */
export function verdictExplanation(event) {
  const n = event.fair?.n;
  const reason = event.verdictReason ? ` (${event.verdictReason})` : "";
  switch (event.verdict) {
    case "fair":
      return `Fair: recomputed in this browser from the server's dice seed ${str(n)}, committed before the roll, and a contribution from outside the server${reason}. Nobody could pick these dice.`;
    case "unwitnessed":
      return `Unwitnessed: recomputed from the server's dice seed ${str(n)}, committed before the roll, but nobody outside the server contributed to it${reason}. Whoever runs the server could have chosen the seed with this roll in mind.`;
    case "awaiting seed":
      return `Awaiting seed: the server committed to dice seed ${str(n)} before this roll; once the seed is revealed this browser recomputes the dice${reason}.`;
    case "sealed":
      return "Sealed: a hidden roll; its dice are checked when it is revealed.";
    case "failed":
      return `Fairness check failed: ${event.verdictReason ?? "the dice do not follow from the committed seed"}. Do not trust this roll.`;
    default:
      return "";
  }
}

/** The badge of a roll's verdict, or null for a roll without one (a server without fair dice). */
export function verdictBadge(event) {
  if (event?.verdict === undefined) return null;
  const verdict = event.verdict;
  const explanation = verdictExplanation(event);
  const witnessed = verdict === "fair" && Array.isArray(event.fair?.witnesses) ? event.fair.witnesses.length : 0;
  const badge = h(
    "button",
    {
      type: "button",
      class: `fair-badge ${verdict.replace(/\s+/g, "-")}`,
      "data-verdict": verdict,
      title: explanation,
      "aria-label": `${WORDS[verdict] ?? verdict}. ${explanation}`,
      "aria-expanded": "false",
    },
    (ICONS[verdict] ?? ICONS.unwitnessed)(),
    h("span", { class: "fair-word" }, WORDS[verdict] ?? verdict),
    witnessed ? h("span", { class: "fair-count" }, ` · ${witnessed} witness${witnessed === 1 ? "" : "es"}`) : null,
  );
  // A tap (no hover on a phone) shows the explanation under the card's head; a second tap hides it.
  badge.addEventListener("click", () => {
    const card = badge.closest("article") ?? badge.parentElement;
    let note = card.querySelector(":scope > .fair-note");
    const open = badge.getAttribute("aria-expanded") === "true";
    if (open) {
      note?.remove();
      badge.setAttribute("aria-expanded", "false");
      return;
    }
    note ??= h("p", { class: "fair-note", role: "note" });
    note.textContent = explanation;
    note.dataset.verdict = verdict;
    card.querySelector(":scope > .card-head")?.after(note);
    badge.setAttribute("aria-expanded", "true");
  });
  return badge;
}

/** Put (or replace) a roll card's verdict badge; its open explanation follows. */
export function markVerdict(card, event) {
  if (!card) return;
  const old = card.querySelector(".fair-badge");
  const badge = verdictBadge(event);
  card.dataset.verdict = event.verdict ?? "";
  if (!badge) return;
  const wasOpen = old?.getAttribute("aria-expanded") === "true";
  card.querySelector(":scope > .fair-note")?.remove();
  if (old) old.replaceWith(badge);
  else (card.querySelector(".card-meta") ?? card).append(badge);
  card.classList.toggle("fair-failed", event.verdict === "failed");
  if (wasOpen) badge.click();
}

/** The quiet line of a `seed_commit` or `seed_reveal` event. */
export function seedLine(event) {
  const committed = event.kind === "seed_commit";
  const title = committed
    ? `The server committed to dice seed ${str(event.n)} (SHA-256 ${str(event.commit)}); the rolls that follow use it, and its reveal must match.`
    : `Dice seed ${str(event.n)} is public now: every roll that used it can be recomputed.`;
  return h(
    "div",
    { class: `line seed ${event.kind}`, role: "note", title },
    h("span", { class: "dot", "aria-hidden": "true" }),
    h("span", {}, `Dice seed ${str(event.n)} ${committed ? "committed" : "revealed"}`),
    timeOf(event.ts),
  );
}

/**
 * A `pending` event as a quiet line: a GM's or hidden roll announced, with how many witnesses were asked. Its id
 * is the event's `roll-SEQ`, so an alarm about it ("announced but never made", "not asked") links here.
 */
export function pendingLine(event) {
  const asked = Array.isArray(event.asked) ? event.asked.length : 0;
  const who = event.actor?.name ?? "Someone";
  const witnesses = asked ? `${asked} witness${asked === 1 ? "" : "es"} asked` : "no witness asked";
  const title =
    `${who}'s roll is bound to its intent before anyone answers; the players asked send random bytes that go ` +
    "into its dice, and each checks that its bytes are in the roll.";
  return h(
    "div",
    { class: "line seed pending", role: "note", title, id: `roll-${event.seq}` },
    h("span", { class: "dot", "aria-hidden": "true" }),
    h("span", {}, `${who}'s roll announced: ${witnesses}`),
    timeOf(event.ts),
  );
}

/**
 * Show an alarm in the page's red banner (made on first use, under the top bar), newest first; the same
 * message is shown once.
 */
export function showAlarm(alarm) {
  let banner = document.getElementById("fair-alarm");
  if (!banner) {
    banner = h(
      "section",
      { id: "fair-alarm", class: "alarm-banner", role: "alert", "aria-label": "Fairness alarm" },
      h("div", { class: "alarm-head" }, ICONS.alarm(), h("b", {}, "Fairness alarm: the server's dice cannot be trusted.")),
      h("ul", { class: "alarm-list" }),
    );
    const top = document.querySelector(".topbar");
    if (top) top.after(banner);
    else document.body.prepend(banner);
  }
  const list = banner.querySelector(".alarm-list");
  if ([...list.children].some((li) => li.dataset.message === alarm.message)) return;
  const item = h("li", { "data-message": alarm.message }, alarm.message);
  if (alarm.seq != null) {
    item.append(" ", h("a", { href: `#roll-${alarm.seq}` }, "see it"));
  }
  list.prepend(item);
}
