// The overlay in the Roll20 page: the connection badge, the room's Fear and Hope, the GM's buttons, and
// the bridge's messages. It lives in a shadow root so Roll20's styles and the bridge's never mix.

import { svgIcon, verdictWords } from "../fairness.js";

/** @typedef {import("../bridge.js").BadgeStatus} BadgeStatus */
/** @typedef {import("../fairness.js").FairBook} FairBook */

const STYLE = `
:host { all: initial; }
.panel { position: fixed; left: 12px; bottom: 12px; z-index: 2147483000; width: 232px;
  font: 13px/1.35 system-ui, -apple-system, "Segoe UI", sans-serif; color: #eee;
  background: rgba(24, 22, 34, 0.94); border: 1px solid #4b4560; border-radius: 8px;
  box-shadow: 0 4px 16px rgba(0,0,0,.45); }
header { display: flex; align-items: center; gap: 6px; padding: 6px 8px; border-bottom: 1px solid #3a3550; }
header .title { font-weight: 600; flex: 1; }
.badge { font-size: 11px; padding: 1px 7px; border-radius: 10px; background: #555; color: #fff; }
.badge.connected { background: #23784a; } .badge.reconnecting, .badge.connecting { background: #9a6b12; }
.badge.error { background: #a02c2c; } .badge.off { background: #555; }
button { font: inherit; color: #eee; background: #3a3550; border: 1px solid #5a5275; border-radius: 4px;
  padding: 0 7px; min-width: 24px; cursor: pointer; }
button:hover { background: #4b4568; } button:focus-visible { outline: 2px solid #c9a7ff; }
.body { padding: 6px 8px; } .row { display: flex; align-items: center; gap: 6px; margin: 3px 0; }
.row .name { flex: 1; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.value { font-variant-numeric: tabular-nums; min-width: 40px; text-align: right; }
.fear .name { color: #c9a7ff; font-weight: 600; } .hope .name { color: #f0c84a; }
.messages { padding: 0 8px 6px; } .message { font-size: 12px; margin-top: 4px; padding: 3px 6px; border-radius: 4px; }
.message.error { background: #5a1f25; } .message.note { background: #2c3a55; }
.collapsed .body, .collapsed .messages { display: none; }
.hint { color: #aaa; font-size: 12px; }
.fair { padding: 4px 8px 6px; border-top: 1px solid #3a3550; } .fair h2 { font-size: 11px; margin: 0 0 2px; color: #aaa; font-weight: 600; }
.fair ul { list-style: none; margin: 0; padding: 0; } .fair li { margin: 2px 0; }
.fair .roll { display: flex; align-items: center; gap: 6px; } .fair .what { flex: 1; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; color: #ccc; }
.fair-badge { display: inline-flex; align-items: center; gap: 4px; font-size: 11px; padding: 0 6px; border-radius: 10px; }
.fair-badge.fair { color: #5fd08a; } .fair-badge.unwitnessed { color: #aaa; } .fair-badge.awaiting-seed { color: #e0b84a; }
.fair-badge.sealed { color: #c9a7ff; } .fair-badge.failed { color: #1a0000; background: #ff6b6b; border-color: #ff6b6b; font-weight: 700; }
.fair-note { margin: 2px 0 0; font-size: 11px; color: #bbb; } .fair-note.failed { color: #ff8a8a; }
.alarm { padding: 6px 8px; background: #a02c2c; color: #fff; border-bottom: 1px solid #ff6b6b; }
.alarm .head { display: flex; align-items: center; gap: 6px; font-weight: 700; } .alarm ul { margin: 4px 0 0; padding-left: 18px; font-size: 12px; }
.collapsed .fair { display: none; }
`;

export class Overlay {
  /**
   * @param {Document} doc
   * @param {{ onResource?: (name: "fear" | "hope", op: "gain" | "spend", participant?: string) => void, onSettings?: () => void }} [actions]
   */
  constructor(doc, actions = {}) {
    this.doc = doc;
    this.actions = actions;
    this.host = doc.createElement("tablerelay-overlay");
    this.host.id = "tablerelay-overlay";
    // Open, so tests and assistive tools can reach it; it never holds the token (the settings live in the
    // extension's popup, or in the userscript's dialog only while it is open).
    this.root = this.host.attachShadow({ mode: "open" });
    const style = doc.createElement("style");
    style.textContent = STYLE;
    this.panel = this._el("section", { class: "panel", "aria-label": "tablerelay" });
    const header = this._el("header");
    header.append(this._el("span", { class: "title" }, "tablerelay"));
    this.badge = this._el("span", { class: "badge off", role: "status", "data-status": "off" }, "off");
    header.append(this.badge);
    if (actions.onSettings) {
      const gear = this._el("button", { type: "button", title: "Settings", "aria-label": "tablerelay settings", class: "settings" }, "⚙");
      gear.addEventListener("click", () => actions.onSettings?.());
      header.append(gear);
    }
    const fold = this._el("button", { type: "button", title: "Fold", "aria-label": "Fold the panel", class: "fold" }, "–");
    fold.addEventListener("click", () => this.panel.classList.toggle("collapsed"));
    header.append(fold);
    this.body = this._el("div", { class: "body" });
    this.body.append(this._el("div", { class: "hint" }, "Not connected yet."));
    this.messages = this._el("div", { class: "messages", "aria-live": "polite" });
    // Fair dice: the red banner of alarms (shown even when the panel is folded) and the rolls' verdicts.
    this.alarmBox = this._el("section", { class: "alarm", role: "alert", "aria-label": "Fairness alarm", hidden: "" });
    this.fairBox = this._el("section", { class: "fair", "aria-label": "Fair dice", hidden: "" });
    this.panel.append(header, this.alarmBox, this.body, this.fairBox, this.messages);
    this.root.append(style, this.panel);
    (doc.body ?? doc.documentElement).append(this.host);
  }

  _el(tag, attrs = {}, text) {
    const el = this.doc.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
    if (text !== undefined) el.textContent = text;
    return el;
  }

  /** @param {BadgeStatus} status @param {string} [detail] */
  status(status, detail) {
    this.badge.className = `badge ${status}`;
    this.badge.dataset.status = status;
    this.badge.textContent = status;
    this.badge.title = detail ?? "";
    if (detail && status === "error") this.error(detail);
    if (detail && status === "off") this.note(detail);
  }

  /** @param {{ fear: number, hope: Record<string, number>, limits: { fear: number, hope: number }, you: { id: string, role: string } | null, names: Record<string, string> }} s */
  state(s) {
    const gm = s.you?.role === "gm";
    const rows = [];
    const fear = this._el("div", { class: "row fear", "data-resource": "fear" });
    fear.append(this._el("span", { class: "name" }, "Fear"), this._el("span", { class: "value", "data-value": String(s.fear) }, `${s.fear} / ${s.limits.fear}`));
    if (gm) fear.append(...this._buttons("fear"));
    rows.push(fear);
    for (const [id, value] of Object.entries(s.hope)) {
      const row = this._el("div", { class: "row hope", "data-resource": "hope", "data-participant": id });
      const name = s.names[id] ?? `Player ${id.slice(0, 4)}`;
      row.append(this._el("span", { class: "name", title: name }, `Hope · ${name}`), this._el("span", { class: "value", "data-value": String(value) }, `${value} / ${s.limits.hope}`));
      if (gm) row.append(...this._buttons("hope", id));
      else if (id === s.you?.id) row.append(this._button("spend", "hope", "spend", "Spend 1 Hope", undefined));
      rows.push(row);
    }
    this.body.replaceChildren(...rows);
  }

  _buttons(name, participant) {
    const label = name === "fear" ? "Fear" : "Hope";
    return [this._button("−", name, "spend", `Spend 1 ${label}`, participant), this._button("+", name, "gain", `Gain 1 ${label}`, participant)];
  }

  _button(text, name, op, title, participant) {
    const b = this._el("button", { type: "button", title, "aria-label": title, "data-op": op }, text);
    b.addEventListener("click", () => this.actions.onResource?.(name, op, participant));
    return b;
  }

  /**
   * Fair dice: each linked roll's verdict, a badge with its explanation on hover (title) and on a tap (a note
   * below it), and the red banner of this session's alarms.
   * @param {FairBook} book
   */
  fair(book) {
    const open = new Set([...this.fairBox.querySelectorAll("[aria-expanded=true]")].map((b) => b.closest("li")?.dataset.seq));
    const rows = book.list().map((j) => {
      const { word, explanation, kind } = verdictWords(j);
      const row = this._el("li", { "data-seq": String(j.seq), "data-verdict": j.verdict });
      const badge = this._el("button", { type: "button", class: `fair-badge ${kind.replace(/\s+/g, "-")}`, "data-verdict": kind, title: explanation, "aria-label": `${word}. ${explanation}`, "aria-expanded": "false" });
      badge.append(svgIcon(this.doc, kind), this._el("span", { class: "fair-word" }, word));
      const line = this._el("div", { class: "roll" });
      line.append(this._el("span", { class: "what", title: j.label }, `#${j.seq}${j.label ? ` ${j.label}` : ""}`), badge);
      row.append(line);
      const note = this._el("p", { class: `fair-note ${kind === "failed" ? "failed" : ""}`, role: "note", hidden: "" }, explanation);
      row.append(note);
      const toggle = (show) => {
        badge.setAttribute("aria-expanded", String(show));
        note.hidden = !show;
      };
      badge.addEventListener("click", () => toggle(note.hidden));
      if (open.has(String(j.seq))) toggle(true);
      return row;
    });
    this.fairBox.replaceChildren(this._el("h2", {}, "Fair dice"), this._el("ul", {}, undefined));
    this.fairBox.querySelector("ul")?.append(...rows);
    this.fairBox.hidden = rows.length === 0;
    if (book.alarms.length) {
      const head = this._el("div", { class: "head" });
      head.append(svgIcon(this.doc, "alarm", 16), this._el("span", {}, "Fairness alarm: the server's dice cannot be trusted."));
      const list = this._el("ul");
      list.append(...book.alarms.map((a) => this._el("li", { "data-seq": String(a.seq ?? "") }, a.message)));
      this.alarmBox.replaceChildren(head, list);
    }
    this.alarmBox.hidden = book.alarms.length === 0;
  }

  /** @param {string} message */
  error(message) {
    this._message("error", message);
  }

  /** @param {string} message */
  note(message) {
    this._message("note", message);
  }

  _message(kind, text) {
    const el = this._el("div", { class: `message ${kind}` }, text);
    this.messages.append(el);
    while (this.messages.children.length > 4) this.messages.firstElementChild?.remove();
    setTimeout(() => el.remove(), kind === "error" ? 20_000 : 60_000);
  }

  remove() {
    this.host.remove();
  }
}
