// The pages' DOM helper, and the small pieces every view draws: a person's avatar, a role tag, a time.
// Everything users type (names, labels, target names) goes into the DOM as text, never as HTML.

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

/** A value as text, "" for null and undefined. */
export const str = (v) => (v === null || v === undefined ? "" : String(v)); // numbers and bigints alike

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

export const ROLE_WORDS = { gm: "GM", player: "Player", spectator: "Spectator" };

export function roleTag(role) {
  return h("span", { class: `role-tag ${role}` }, ROLE_WORDS[role] ?? role);
}

/** A `<time>` of a timestamp (ms), shown as the reader's hours and minutes. */
export function timeOf(ts) {
  const date = new Date(Number(ts));
  return h(
    "time",
    { datetime: date.toISOString() },
    date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }),
  );
}
