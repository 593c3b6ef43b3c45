// The overlay in the Roll20 page: the connection badge, the room's Fear and Hope, the GM's buttons, and
// the bridge's messages. It lives in a shadow root so Roll20's styles and the bridge's never mix.

/** @typedef {import("../bridge.js").BadgeStatus} BadgeStatus */

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
    this.panel.append(header, this.body, this.messages);
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
