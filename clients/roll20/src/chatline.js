// What the bridge writes into Roll20's chat for a relay event.
//
// Rolls use the relay's own rendering (`event.roll20.chat`, rules/render/roll20.py): a `default` roll
// template whose only inline rolls are constants such as `[[19]]`, so Roll20 draws its roll box around the
// relay's number and never rolls a die itself. The bridge adds one template field, `Relay`, that names the
// event (room, epoch and seq) so every bridge in the game can see that it was posted, plus the verification
// mark of a signed event. Text the bridge writes itself is escaped exactly like the renderer's: every
// character Roll20 could act on becomes an HTML character reference, which Roll20 shows and never parses.

import { eventPageUrl } from "../../js/tablerelay.js";

/** @typedef {import("../../js/tablerelay.d.ts").RelayEvent} RelayEvent */
/** @typedef {import("../../js/tablerelay.d.ts").OpenRollEvent} OpenRollEvent */
/** @typedef {"main" | "sealed" | "whisper"} Slot */
/**
 * One chat message to post for an event. `key` is unique per room and epoch (`12`, `12s`, `12w`) and is
 * what the posted log remembers; `tag` is the text the message shows in its Relay field.
 * @typedef {{ key: string, slot: Slot, seq: number, text: string, tag: string, whisper: boolean, full: boolean }} Post
 */

// The renderer's plain characters (rules/render/roll20.py `_PLAIN`); everything else of ASCII punctuation
// is written as a character reference.
const PLAIN = /[A-Za-z0-9 ,.;:()+\-'_]/;

/**
 * Text Roll20 shows verbatim inside a roll template (the same rule as the renderer's `escape`).
 * @param {string} text
 */
export function escapeRoll20(text) {
  let out = "";
  for (const ch of String(text)) {
    const code = ch.codePointAt(0) ?? 0;
    if (code < 32 || code === 127) out += " ";
    else if (code > 127 || PLAIN.test(ch)) out += ch;
    else out += `&#${code};`;
  }
  return out;
}

/** `{{key=value}}` with both sides escaped, unless `raw` says the value is already Roll20 text. */
function field(key, value, raw = false) {
  return `{{${escapeRoll20(key)}=${raw ? value : escapeRoll20(value)}}}`;
}

/** A number as Roll20 reads it inside `[[ ]]` (what the renderer's js_number writes). */
function constant(value) {
  return `[[${String(value)}]]`;
}

/**
 * The event's tag: which room (first 8 characters of its id), which log (first 4 of the epoch), which
 * event. Every bridge in the game looks for it in the chat before posting as a fallback.
 * @param {{ roomId: string, epoch: string }} where
 * @param {number} seq
 * @param {Slot} slot
 */
export function eventTag({ roomId, epoch }, seq, slot) {
  const suffix = slot === "sealed" ? " sealed" : slot === "whisper" ? " gm" : "";
  return `${roomId.slice(0, 8)}.${epoch.slice(0, 4)} #${seq}${suffix}`;
}

// The relay's page for one event, for the verification link: the JS client's (the Foundry module's marks link
// to it too).
export { eventPageUrl };

/**
 * The verification hook for signed events (spec: signing.md). Events carry `kid` and `sig` once the relay
 * signs them, and the JS client then sets `event.verified` (true, or false with a reason). Until an event
 * carries `sig` this returns null and the chat line has no mark. With `sig`: "✓ signed" when the client
 * verified it, "✗ signature does not verify" when it failed, "signed" while no client check exists.
 * @param {{ sig?: unknown, kid?: unknown, verified?: unknown }} event
 * @returns {{ mark: string, ok: boolean | null } | null}
 */
export function verification(event) {
  if (event == null || event.sig == null) return null;
  // `verified` is true, or false, or (as the signing spec allows) an object with `ok: false` and a reason.
  const verified = /** @type {any} */ (event.verified);
  if (verified === true) return { mark: "✓ signed", ok: true };
  if (verified === false || (typeof verified === "object" && verified !== null && verified.ok === false)) {
    return { mark: "✗ signature does not verify", ok: false };
  }
  return { mark: "signed", ok: null };
}

/**
 * The Relay field: the tag, and for a signed event its mark and a link to the relay's event page. Roll20
 * turns `[text](https://…)` into a link; the URL holds only characters Roll20 leaves alone (no `?`, `#`,
 * `|`, `@`, `%`, `&`), which eventPageUrl guarantees by building a path.
 */
function relayField(event, tag, ctx) {
  let value = escapeRoll20(tag);
  const check = verification(event);
  if (check) {
    const href = eventPageUrl(ctx.relayUrl, ctx.roomId, event.seq);
    value += ` [${escapeRoll20(check.mark)}](${href})`;
  }
  return field("Relay", value, true);
}

const VISIBILITY_WORDS = {
  gm: "a GM roll: the roller and the GM",
  blind: "a blind roll: the GM only",
  self: "a self roll: the roller only",
};

/**
 * The posts an event asks for, each as this client holds it (it may hold the full roll or only its sealed
 * placeholder). Who actually posts each one is election.js's business.
 * - a public roll: its chat line, in public;
 * - a hidden roll: a sealed line in public (who, what kind, the commitment; nothing of the roll) and, for
 *   `gm` and `blind` rolls, the full line whispered to the GM (`/w gm`), by a client that holds it;
 *   a `self` roll is never sent in full, since Roll20 would carry it to the GM too;
 * - a reveal: the revealed roll in public, with whether it matched its commitment.
 * @param {RelayEvent & { sig?: unknown, kid?: unknown, verified?: unknown }} event
 * @param {{ roomId: string, epoch: string, relayUrl: string, recall?: (seq: number) => RelayEvent | undefined }} ctx
 * @returns {Post[]}
 */
export function postsFor(event, ctx) {
  /** @type {Post[]} */
  const posts = [];
  const make = (slot, body, { whisper = false, full = true } = {}) => {
    const tag = eventTag(ctx, event.seq, slot);
    const text = `${whisper ? "/w gm " : ""}${body} ${relayField(event, tag, ctx)}`;
    const key = `${event.seq}${slot === "main" ? "" : slot === "sealed" ? "s" : "w"}`;
    posts.push({ key, slot, seq: event.seq, text, tag, whisper, full });
  };
  if (event.kind === "roll") {
    if (event.visibility === "public") {
      if (!event.sealed) make("main", rollLine(event));
      return posts;
    }
    make("sealed", sealedLine(event), { full: false });
    if (!event.sealed && (event.visibility === "gm" || event.visibility === "blind")) {
      make("whisper", rollLine(event), { whisper: true });
    }
    return posts;
  }
  if (event.kind === "reveal") make("main", revealLine(event, ctx));
  return posts;
}

/** A full roll's line: the renderer's, or one composed from the result when no rendering came with it. */
function rollLine(event) {
  const chat = event.roll20?.chat;
  if (isConstantTemplate(chat)) return withLabel(chat, event.label);
  return composedLine(event, event.label);
}

/**
 * Whether a line is what the renderer promises: one default-template call with `{{key=value}}` fields and
 * constant inline rolls only. The bridge types the line as its player, so a line that could do more (a
 * `/` command, an API `!` command, a roll Roll20 would make, a query) is not posted as it came; the line is
 * composed from the result instead.
 * @param {unknown} chat
 * @returns {chat is string}
 */
export function isConstantTemplate(chat) {
  if (typeof chat !== "string" || !chat.startsWith("&{template:default} ")) return false;
  const inline = [...chat.matchAll(/\[\[([^\]]*)\]\]/g)];
  if (!inline.every((m) => /^-?\d+(\.\d+)?$/.test(m[1]))) return false;
  const rest = chat.slice("&{template:default}".length).replace(/\[\[[^\]]*\]\]/g, "");
  return /^(\s\{\{[^{}=[\]|@%?$]+=[^{}[\]|@%?$]*\}\})+$/.test(rest) && !/&(?!#\d+;)/.test(rest);
}

/**
 * The renderer titles its line with the roll's label when it is given one (`to_roll20(result, label=…)`),
 * but the relay renders without it, so the bridge puts the label in the `name` field itself: the same line
 * the renderer writes with the label. The name's value is escaped, so it holds no `}}` to stop early at.
 * @param {string} chat
 * @param {string | null | undefined} label
 */
export function withLabel(chat, label) {
  if (typeof label !== "string" || !label) return chat;
  return chat.replace(/\{\{name=[^}]*\}\}/, () => field("name", label));
}

/** A line in the renderer's shape from a result alone (a reveal's decoded blob carries no rendering). */
export function composedLine(roll, label, extra = []) {
  const result = roll?.result ?? {};
  const title = label || `${roll?.actor?.name ?? "Someone"}'s roll`;
  const parts = [`&{template:default}`, field("name", title)];
  if (typeof result.total === "number" && Number.isFinite(result.total)) {
    parts.push(field("Total", constant(result.total), true));
  }
  if (typeof result.formula === "string" && result.formula) parts.push(field("Roll", result.formula));
  if (typeof result.text === "string" && result.text) parts.push(field("Result", result.text));
  for (const [key, value] of extra) parts.push(field(key, value));
  return parts.join(" ");
}

/** A hidden roll as everyone may see it: who, which kind, and the commitment its reveal will match. */
function sealedLine(event) {
  return [
    "&{template:default}",
    field("name", "Sealed roll"),
    field("Roller", event.actor?.name ?? "?"),
    field("Seen by", VISIBILITY_WORDS[event.visibility] ?? event.visibility),
    // In groups of 16 hex digits, so the chat can wrap it; the whole value stays for anyone checking it.
    field("Commitment", String(event.commitment ?? "?").replace(/(.{16})(?=.)/g, "$1 ")),
  ].join(" ");
}

/** A reveal: the roll as its audience saw it, and whether its bytes match the commitment. */
function revealLine(event, ctx) {
  const roll = event.roll;
  let check;
  if (event.verified === true) check = `✓ matches the commitment of roll ${event.of}`;
  else if (event.verified === false) check = `✗ does NOT match the commitment of roll ${event.of}`;
  else check = `not checked: roll ${event.of} is older than this connection`;
  // The renderer's own line: on the reveal itself (newer relays render a reveal as the roll it opens), or
  // on the full roll when this client was in its audience; otherwise composed from the decoded blob.
  const own = /** @type {{ roll20?: { chat?: unknown } }} */ (event).roll20?.chat;
  if (isConstantTemplate(own)) return `${withLabel(own, roll?.label)} ${field("Revealed", check)}`;
  const earlier = ctx.recall?.(event.of);
  if (earlier && earlier.kind === "roll" && !earlier.sealed && isConstantTemplate(earlier.roll20?.chat)) {
    return `${withLabel(earlier.roll20.chat, earlier.label)} ${field("Revealed", check)}`;
  }
  return composedLine(roll, roll?.label || `${roll?.actor?.name ?? event.actor?.name ?? "A hidden"} roll`, [["Revealed", check]]);
}
