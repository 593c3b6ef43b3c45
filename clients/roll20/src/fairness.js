// Fair dice (spec/fairness.md) in the bridge: the verdict of each roll it links into Roll20's chat, as the JS
// client finds it (clients/js/src/fairness.js recomputes the dice in this browser), kept for the overlay's list
// with the words and icons the relay's pages use (clients/web/fair-render.js), and the alarms the client raises.
//
// A chat line cannot change once posted, and a verdict changes (a seed's reveal turns "awaiting seed" into
// "fair" or "failed"), so the verdict lives in the overlay, beside the chat, and on the relay's page each line
// links to. Icons are SVG: a font glyph (a check mark) is an empty box in a browser without an emoji font.

/** @typedef {{ seq: number, label: string, verdict: string, reason: string, witnesses: number, n: number | null }} Judgement */

/** How many rolls the overlay lists, the newest first. */
export const SHOWN = 6;
/** How many alarms the banner lists, the newest first. */
export const ALARMS_SHOWN = 5;

/**
 * A roll's verdict as the bridge keeps it, or null for a roll without one (a relay without fair dice).
 * @param {any} event  a roll event the JS client judged (`event.verdict`, `event.verdictReason`)
 * @returns {Judgement | null}
 */
export function judgementOf(event) {
  if (typeof event?.verdict !== "string" || typeof event.seq !== "number") return null;
  const fair = event.fair && typeof event.fair === "object" ? event.fair : {};
  return {
    seq: event.seq,
    label: typeof event.label === "string" ? event.label : "",
    verdict: event.verdict,
    reason: String(event.verdictReason ?? ""),
    // A GM's own value for the GM's roll (a hidden roll asks its roller too) is no witness (spec/fairness.md).
    witnesses: event.verdict === "fair" && Array.isArray(fair.witnesses)
      ? fair.witnesses.filter((w) => !(event.actor?.role === "gm" && Array.isArray(w) && w[0] === event.actor?.id)).length
      : 0,
    n: Number.isInteger(fair.n) ? fair.n : null,
  };
}

/**
 * The short word and the explanation of a verdict, as the relay's pages word them.
 * @param {Judgement} j
 * @returns {{ word: string, explanation: string, kind: string }} `kind`: the icon and style (an unknown verdict
 *   is shown as failed, never as fair)
 */
export function verdictWords(j) {
  const n = j.n === null ? "?" : String(j.n);
  const reason = j.reason ? ` (${j.reason})` : "";
  switch (j.verdict) {
    case "fair": {
      const count = j.witnesses ? ` · ${j.witnesses} witness${j.witnesses === 1 ? "" : "es"}` : "";
      return {
        kind: "fair",
        word: `Fair${count}`,
        explanation: `Fair: recomputed in this browser from the server's dice seed ${n}, committed before the roll, and a contribution from outside the server${reason}. Nobody could pick these dice.`,
      };
    }
    case "unwitnessed":
      return {
        kind: "unwitnessed",
        word: "Unwitnessed",
        explanation: `Unwitnessed: recomputed from the server's dice seed ${n}, committed before the roll, but nobody outside the server contributed to it${reason}. Whoever runs the server could have chosen the seed with this roll in mind.`,
      };
    case "awaiting seed":
      return {
        kind: "awaiting seed",
        word: "Awaiting seed",
        explanation: `Awaiting seed: the server committed to dice seed ${n} before this roll; once the seed is revealed this browser recomputes the dice${reason}.`,
      };
    case "sealed":
      return { kind: "sealed", word: "Sealed", explanation: "Sealed: a hidden roll; its dice are checked when it is revealed." };
    default:
      return {
        kind: "failed",
        word: "Fairness failed",
        explanation: `Fairness check failed: ${j.reason || j.verdict}. Do not trust this roll.`,
      };
  }
}

/**
 * The icons' shapes on a 16×16 grid (the pages' own), stroked in the text's colour.
 * @type {Readonly<Record<string, Array<[string, Record<string, string>]>>>}
 */
export const ICONS = Object.freeze({
  fair: [["path", { d: "M3 8.5l3 3 7-7" }]],
  unwitnessed: [["circle", { cx: "8", cy: "8", r: "5.5" }], ["path", { d: "M5.5 8h5" }]],
  "awaiting seed": [["circle", { cx: "8", cy: "8", r: "5.5" }], ["path", { d: "M8 5v3.2l2 1.3" }]],
  sealed: [["rect", { x: "3.5", y: "7", width: "9", height: "6.5", rx: "1" }], ["path", { d: "M5.5 7V5a2.5 2.5 0 0 1 5 0v2" }]],
  failed: [["path", { d: "M4 4l8 8M12 4l-8 8" }]],
  alarm: [["path", { d: "M8 2l6.5 12h-13z" }], ["path", { d: "M8 6.5v3.5M8 12.2v.1" }]],
});

const SVG = "http://www.w3.org/2000/svg";

/**
 * An SVG icon element by name (an unknown one draws as failed).
 * @param {Document} doc
 * @param {string} name
 * @param {number} [size]
 */
export function svgIcon(doc, name, size = 12) {
  const el = doc.createElementNS(SVG, "svg");
  for (const [k, v] of Object.entries({ viewBox: "0 0 16 16", width: String(size), height: String(size), "aria-hidden": "true", focusable: "false", class: "fair-icon" })) {
    el.setAttribute(k, v);
  }
  for (const [tag, attrs] of ICONS[name] ?? ICONS.failed) {
    const shape = doc.createElementNS(SVG, tag);
    const all = { fill: "none", stroke: "currentColor", "stroke-width": "2", "stroke-linecap": "round", "stroke-linejoin": "round", ...attrs };
    for (const [k, v] of Object.entries(all)) shape.setAttribute(k, String(v));
    el.append(shape);
  }
  return el;
}

/**
 * The verdicts of the rolls this bridge linked, the newest SHOWN, and this session's alarms: what the
 * overlay draws. A later verdict of a roll replaces its earlier one in place.
 */
export class FairBook {
  constructor() {
    /** @type {Map<number, Judgement>} by seq, oldest first */
    this.rolls = new Map();
    /** @type {{ message: string, seq: number | null }[]} newest first */
    this.alarms = [];
  }

  /**
   * A roll's verdict, first (`add`) or changed. A change of a roll no longer listed is not listed again: a
   * seed's reveal judges every roll it made, and the list stays the newest rolls. Returns whether it changed.
   * @param {any} event @param {{ add?: boolean }} [options]
   */
  note(event, { add = true } = {}) {
    const j = judgementOf(event);
    if (!j) return false;
    const known = this.rolls.get(j.seq);
    if (!known && !add) return false;
    // A revealed roll's verdict comes with the roll its reveal opens, which carries its label: keep the one known.
    if (known && !j.label) j.label = known.label;
    this.rolls.set(j.seq, j);
    while (this.rolls.size > SHOWN) this.rolls.delete(/** @type {number} */ (this.rolls.keys().next().value));
    return true;
  }

  /** An alarm; the same sentence twice is listed once. Returns whether it is new. */
  alarm(/** @type {{ message: string, seq?: number | null }} */ alarm) {
    const message = String(alarm.message);
    if (this.alarms.some((a) => a.message === message)) return false;
    this.alarms.unshift({ message, seq: alarm.seq ?? null });
    this.alarms.length = Math.min(this.alarms.length, ALARMS_SHOWN);
    return true;
  }

  /** The rolls, newest first. */
  list() {
    return [...this.rolls.values()].reverse();
  }
}
