// The module's HTML: the sealed card, chat marks, the Fear and Hope panel and the connection form.
// Pure functions returning strings, so the Node tests and the browser test render exactly what Foundry shows.
// Every word comes from a localizer (game.i18n in Foundry, lang/*.json); this file imports nothing, so the
// browser test can load it as it is.

/**
 * Where the HTML takes its words from: Foundry's `game.i18n` (a Localization), or `FALLBACK`.
 * @typedef {object} Localizer
 * @property {(key: string) => string} localize
 * @property {(key: string, data?: Record<string, string>) => string} format
 */

// English for a page with no Foundry: tests/browser/test_foundry_ui.py renders these functions in a plain
// Chromium page, with no game.i18n and no way to load lang/en.json. These are en.json's strings for the keys
// this file uses, and test/i18n.test.mjs keeps them equal to it: en.json stays the one source to translate.
/** @type {Readonly<Record<string, string>>} */
const ENGLISH = Object.freeze({
  "TABLERELAY.Status.open": "connected",
  "TABLERELAY.Status.connecting": "connecting…",
  "TABLERELAY.Status.reconnecting": "reconnecting…",
  "TABLERELAY.Status.closed": "offline",
  "TABLERELAY.Status.idle": "not set up",
  "TABLERELAY.Connection.Intro":
    "The relay rolls every die of this table. The address is the same for the whole world; the token is stored in this browser only and is never shown to anyone.",
  "TABLERELAY.Connection.Address": "Relay address",
  "TABLERELAY.Connection.AddressHint": "Set by the GM for the world.",
  "TABLERELAY.Connection.Token": "Token",
  "TABLERELAY.Connection.TokenSaved": "•••••••• (saved; paste a new one to replace it)",
  "TABLERELAY.Connection.TokenEmpty": "paste it here",
  "TABLERELAY.Connection.TokenHintGM": "Paste the GM token from `tablerelay room create`.",
  "TABLERELAY.Connection.TokenHintPlayer": "Paste your player token or the table's player invite.",
  "TABLERELAY.Connection.Status": "Status: {status}",
  "TABLERELAY.Connection.StatusAs": "Status: {status} as participant {participant}",
  "TABLERELAY.Connection.Save": "Save and connect",
  "TABLERELAY.Connection.Forget": "Forget the token",
  "TABLERELAY.Panel.StatusTitle": "relay: {status}",
  "TABLERELAY.Panel.Fear": "Fear",
  "TABLERELAY.Panel.FearCount": "{count} Fear",
  "TABLERELAY.Panel.HopeCount": "{count} Hope",
  "TABLERELAY.Panel.SpendFear": "Spend 1 Fear",
  "TABLERELAY.Panel.GainFear": "Gain 1 Fear",
  "TABLERELAY.Panel.SpendHope": "Spend 1 Hope",
  "TABLERELAY.Panel.GiveHope": "Give 1 Hope",
  "TABLERELAY.Card.Sealed": "Sealed roll",
  "TABLERELAY.Card.Someone": "Someone",
  "TABLERELAY.Card.Made.gm": "{who} made a GM-only roll.",
  "TABLERELAY.Card.Made.blind": "{who} made a blind roll.",
  "TABLERELAY.Card.Made.self": "{who} made a private roll.",
  "TABLERELAY.Card.Made.hidden": "{who} made a hidden roll.",
  "TABLERELAY.Card.Opens": "It opens here when it is revealed, and the relay proves it was fixed when it was made.",
  "TABLERELAY.Card.CommitmentTitle": "SHA-256 commitment {commitment}",
  "TABLERELAY.Card.Commitment": "commitment {start}…",
  "TABLERELAY.Mark.NotRelay": "not via relay",
  "TABLERELAY.Mark.NotRelayTitle": "These dice were rolled by Foundry, not by the relay",
  "TABLERELAY.Mark.NotRelayTitleWhy": "These dice were rolled by Foundry, not by the relay ({reason})",
  "TABLERELAY.Mark.Unsigned": "signature does not verify — do not trust this roll",
  "TABLERELAY.Mark.UnsignedTitle": "The relay's signature on this roll does not verify",
  "TABLERELAY.Mark.UnsignedTitleWhy": "The relay's signature on this roll does not verify: {error}",
  "TABLERELAY.Mark.SealMismatch": "reveal does not match its seal",
  "TABLERELAY.Mark.SealMismatchTitle": "The reveal does not match the commitment published with the sealed roll",
  "TABLERELAY.Mark.Signed": "signed ✓",
  "TABLERELAY.Mark.Relay": "relay",
  "TABLERELAY.Mark.Revealed": "revealed",
  "TABLERELAY.Mark.RevealedMatches": "revealed ✓ matches its seal",
  "TABLERELAY.Mark.RevealedTitle": "Rolled by the relay; the reveal was checked against its commitment",
  "TABLERELAY.Mark.RelayTitle": "Rolled by the relay's secure dice",
  "TABLERELAY.Mark.RelaySignedTitle": "Rolled by the relay's secure dice and signed with its key",
});

/** `{name}` placeholders filled from `data`, the way Foundry's Localization#format fills them. */
function fill(/** @type {string} */ text, /** @type {Record<string, string>} */ data) {
  return text.replace(/{[^}]+}/g, (k) => data[k.slice(1, -1)]);
}

/** @type {Localizer} */
export const FALLBACK = Object.freeze({
  localize: (/** @type {string} */ key) => ENGLISH[key] ?? key,
  format: (/** @type {string} */ key, /** @type {Record<string, string>} */ data = {}) => fill(ENGLISH[key] ?? key, data),
});

/** The keys of this file's strings, for the test that keeps FALLBACK equal to lang/en.json. */
export const FALLBACK_KEYS = Object.freeze(Object.keys(ENGLISH));

/** @param {unknown} value */
export function escapeHTML(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A localized sentence as HTML text (escaped). */
function say(/** @type {Localizer} */ i18n, /** @type {string} */ key, /** @type {Record<string, string>} */ data = {}) {
  return escapeHTML(Object.keys(data).length ? i18n.format(key, data) : i18n.localize(key));
}

/**
 * A localized sentence whose placeholders hold markup (`<strong>`, `<code>`): the translation is escaped as
 * text, the fragments, already HTML, are put in after.
 * @param {Localizer} i18n @param {string} key @param {Record<string, string>} fragments
 */
function sayWithHTML(i18n, key, fragments) {
  // Characters of Unicode's private use area stand in for the fragments while the sentence is escaped.
  const names = Object.keys(fragments);
  const marker = (/** @type {number} */ i) => `\uE000${i}\uE001`;
  let html = escapeHTML(i18n.format(key, Object.fromEntries(names.map((name, i) => [name, marker(i)]))));
  names.forEach((name, i) => (html = html.split(marker(i)).join(fragments[name])));
  return html;
}

/** The sealed card's sentence per visibility. */
const MADE = Object.freeze({
  gm: "TABLERELAY.Card.Made.gm",
  blind: "TABLERELAY.Card.Made.blind",
  self: "TABLERELAY.Card.Made.self",
  hidden: "TABLERELAY.Card.Made.hidden",
});

/**
 * The card everyone outside a hidden roll's audience sees until it is revealed. Foundry stores it as the
 * message's content, so it is in the language of the client that posts it.
 * @param {{ seq: number, visibility: string, actor?: { name?: string }, commitment?: string }} event
 * @param {Localizer} [i18n]
 */
export function sealedCardHTML(event, i18n = FALLBACK) {
  const who = event.actor?.name ?? i18n.localize("TABLERELAY.Card.Someone");
  const made = MADE[/** @type {keyof typeof MADE} */ (event.visibility)] ?? MADE.hidden;
  const commitment = typeof event.commitment === "string" ? event.commitment : "";
  return [
    `<div class="tablerelay-sealed" data-seq="${Number(event.seq)}">`,
    `<div class="tablerelay-sealed-title"><i class="fa-solid fa-lock"></i> ${say(i18n, "TABLERELAY.Card.Sealed")}</div>`,
    `<p>${say(i18n, made, { who })} ${say(i18n, "TABLERELAY.Card.Opens")}</p>`,
    commitment
      ? `<p class="tablerelay-commitment" title="${say(i18n, "TABLERELAY.Card.CommitmentTitle", { commitment })}">${say(i18n, "TABLERELAY.Card.Commitment", { start: commitment.slice(0, 16) })}</p>`
      : "",
    `</div>`,
  ].join("");
}

/**
 * The small mark a chat message carries: where its dice came from. Rendered by each client as it shows the
 * message, so in that client's language.
 * @param {{ via?: boolean, seqs?: number[], seq?: number, reason?: string, revealed?: number, verified?: boolean, verifyError?: string, sealMatches?: boolean|null, signatures?: Array<{ verified?: boolean }> } | undefined} flags
 * @param {{ showVerified: boolean }} options
 * @param {Localizer} [i18n]
 */
export function markHTML(flags, { showVerified }, i18n = FALLBACK) {
  if (!flags || flags.via === false) {
    const title = flags?.reason
      ? say(i18n, "TABLERELAY.Mark.NotRelayTitleWhy", { reason: flags.reason })
      : say(i18n, "TABLERELAY.Mark.NotRelayTitle");
    return `<div class="tablerelay-mark tablerelay-not-relay" title="${title}"><i class="fa-solid fa-triangle-exclamation"></i> ${say(i18n, "TABLERELAY.Mark.NotRelay")}</div>`;
  }
  const seqs = flags.seqs ?? (flags.seq !== undefined ? [flags.seq] : []);
  const where = seqs.length ? ` #${seqs.join(", #")}` : "";
  // A failed check is always shown, whatever the setting: it is the one thing a table must not miss.
  const unsigned = flags.verified === false || (flags.signatures ?? []).some((s) => s.verified === false);
  if (unsigned) {
    const title = flags.verifyError
      ? say(i18n, "TABLERELAY.Mark.UnsignedTitleWhy", { error: flags.verifyError })
      : say(i18n, "TABLERELAY.Mark.UnsignedTitle");
    return `<div class="tablerelay-mark tablerelay-failed" title="${title}"><i class="fa-solid fa-xmark"></i> ${say(i18n, "TABLERELAY.Mark.Unsigned")}${where}</div>`;
  }
  if (flags.revealed !== undefined && flags.sealMatches === false) {
    return `<div class="tablerelay-mark tablerelay-failed" title="${say(i18n, "TABLERELAY.Mark.SealMismatchTitle")}"><i class="fa-solid fa-xmark"></i> ${say(i18n, "TABLERELAY.Mark.SealMismatch")}${where}</div>`;
  }
  if (!showVerified) return "";
  const signed = flags.verified === true || ((flags.signatures ?? []).length > 0 && flags.signatures?.every((s) => s.verified === true));
  const seal = say(i18n, signed ? "TABLERELAY.Mark.Signed" : "TABLERELAY.Mark.Relay");
  if (flags.revealed !== undefined) {
    const checked = say(i18n, flags.sealMatches === true ? "TABLERELAY.Mark.RevealedMatches" : "TABLERELAY.Mark.Revealed");
    return `<div class="tablerelay-mark tablerelay-verified" title="${say(i18n, "TABLERELAY.Mark.RevealedTitle")}"><i class="fa-solid fa-check"></i> ${checked} · ${seal}${where}</div>`;
  }
  const title = say(i18n, signed ? "TABLERELAY.Mark.RelaySignedTitle" : "TABLERELAY.Mark.RelayTitle");
  return `<div class="tablerelay-mark tablerelay-verified" title="${title}"><i class="fa-solid fa-dice-d20"></i> ${seal}${where}</div>`;
}

/**
 * The Fear and Hope panel.
 * @param {{ fear: number, hope: Record<string, number>, members?: Array<{ id: string, name: string, role: string }> }} state
 * @param {{ isGM: boolean, status: string, limits?: { fear?: number, hope?: number }, names?: Record<string, string> }} view
 * @param {Localizer} [i18n]
 */
export function panelHTML(state, view, i18n = FALLBACK) {
  const fearMax = view.limits?.fear ?? 12;
  const hopeMax = view.limits?.hope ?? 6;
  const names = { ...(view.names ?? {}) };
  for (const m of state.members ?? []) names[m.id] ??= m.name;
  const gm = view.isGM;
  const status = statusWord(view.status, i18n);
  const pips = (/** @type {number} */ n, /** @type {number} */ max, /** @type {string} */ cls) =>
    Array.from({ length: max }, (_, i) => `<span class="tablerelay-pip ${cls}${i < n ? " on" : ""}"></span>`).join("");
  const hopeRows = Object.entries(state.hope ?? {})
    .sort(([a], [b]) => (names[a] ?? a).localeCompare(names[b] ?? b))
    .map(
      ([id, value]) => `<li class="tablerelay-hope" data-participant="${escapeHTML(id)}">
        <span class="tablerelay-name">${escapeHTML(names[id] ?? id)}</span>
        <span class="tablerelay-pips" aria-label="${say(i18n, "TABLERELAY.Panel.HopeCount", { count: String(Number(value)) })}">${pips(value, hopeMax, "hope")}</span>
        <span class="tablerelay-value">${Number(value)}</span>
        ${gm ? `<button type="button" data-action="hope-spend" data-participant="${escapeHTML(id)}" title="${say(i18n, "TABLERELAY.Panel.SpendHope")}">−</button><button type="button" data-action="hope-gain" data-participant="${escapeHTML(id)}" title="${say(i18n, "TABLERELAY.Panel.GiveHope")}">+</button>` : ""}
      </li>`,
    )
    .join("");
  return `<section class="tablerelay-panel" data-status="${escapeHTML(view.status)}">
  <header><span class="tablerelay-status" title="${say(i18n, "TABLERELAY.Panel.StatusTitle", { status })}"></span> tablerelay <small>${escapeHTML(status)}</small></header>
  <div class="tablerelay-fear">
    <span class="tablerelay-name">${say(i18n, "TABLERELAY.Panel.Fear")}</span>
    <span class="tablerelay-pips" aria-label="${say(i18n, "TABLERELAY.Panel.FearCount", { count: String(Number(state.fear)) })}">${pips(state.fear, fearMax, "fear")}</span>
    <span class="tablerelay-value">${Number(state.fear)}</span>
    ${gm ? `<button type="button" data-action="fear-spend" title="${say(i18n, "TABLERELAY.Panel.SpendFear")}">−</button><button type="button" data-action="fear-gain" title="${say(i18n, "TABLERELAY.Panel.GainFear")}">+</button>` : ""}
  </div>
  <ul class="tablerelay-hopes">${hopeRows}</ul>
</section>`;
}

/** The connection's status as a word; an unknown status as it is. */
const STATUS = Object.freeze({
  open: "TABLERELAY.Status.open",
  connecting: "TABLERELAY.Status.connecting",
  reconnecting: "TABLERELAY.Status.reconnecting",
  closed: "TABLERELAY.Status.closed",
  idle: "TABLERELAY.Status.idle",
});

/** @param {string} status @param {Localizer} i18n @returns {string} unescaped */
function statusWord(status, i18n) {
  const key = STATUS[/** @type {keyof typeof STATUS} */ (status)];
  return key ? i18n.localize(key) : status;
}

/**
 * The connection form (Settings → tablerelay → Connection). Tokens are password fields: they are never
 * shown on screen, and they are stored in this browser only.
 * @param {{ relayUrl: string, hasToken: boolean, isGM: boolean, status: string, participant?: string|null }} values
 * @param {Localizer} [i18n]
 */
export function connectionFormHTML(values, i18n = FALLBACK) {
  const status = `<strong>${escapeHTML(statusWord(values.status, i18n))}</strong>`;
  const line = values.participant
    ? sayWithHTML(i18n, "TABLERELAY.Connection.StatusAs", { status, participant: `<code>${escapeHTML(values.participant)}</code>` })
    : sayWithHTML(i18n, "TABLERELAY.Connection.Status", { status });
  return `<div class="tablerelay-form">
  <p class="hint">${say(i18n, "TABLERELAY.Connection.Intro")}</p>
  <div class="form-group">
    <label for="tablerelay-url">${say(i18n, "TABLERELAY.Connection.Address")}</label>
    <input id="tablerelay-url" type="text" name="relayUrl" value="${escapeHTML(values.relayUrl)}" placeholder="wss://relay.example.org/ws" ${values.isGM ? "" : "disabled"}>
    <p class="hint">${say(i18n, "TABLERELAY.Connection.AddressHint")}</p>
  </div>
  <div class="form-group">
    <label for="tablerelay-token">${say(i18n, "TABLERELAY.Connection.Token")}</label>
    <input id="tablerelay-token" type="password" name="token" value="" autocomplete="off" placeholder="${say(i18n, values.hasToken ? "TABLERELAY.Connection.TokenSaved" : "TABLERELAY.Connection.TokenEmpty")}">
    <p class="hint">${say(i18n, values.isGM ? "TABLERELAY.Connection.TokenHintGM" : "TABLERELAY.Connection.TokenHintPlayer")}</p>
  </div>
  <p class="tablerelay-form-status">${line}</p>
  <footer class="form-footer">
    <button type="submit" name="save"><i class="fa-solid fa-plug"></i> ${say(i18n, "TABLERELAY.Connection.Save")}</button>
    ${values.hasToken ? `<button type="submit" name="forget" value="1"><i class="fa-solid fa-eraser"></i> ${say(i18n, "TABLERELAY.Connection.Forget")}</button>` : ""}
  </footer>
</div>`;
}
