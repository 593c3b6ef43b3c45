// The module's HTML: the sealed card, chat marks (the signature's and the fair dice verdict), the Fear and Hope
// panel, the connection form and the fairness alarm banner.
// Pure functions returning strings, so the Node tests and the browser test render exactly what Foundry shows.
// Every word comes from a localizer (game.i18n in Foundry, lang/*.json); this file imports nothing, so the
// browser test can load it as it is, with a localizer of its own over lang/en.json.

/**
 * Where the HTML takes its words from: Foundry's `game.i18n` (a Localization).
 * @typedef {object} Localizer
 * @property {(key: string) => string} localize
 * @property {(key: string, data?: Record<string, string>) => string} format
 */

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
 * @param {Localizer} i18n
 */
export function sealedCardHTML(event, i18n) {
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
 * The small mark under a chat message: what this client found when it checked the message's dice against the
 * relay's signatures (check.mjs). Rendered by each client as it shows the message, so in its language. A
 * failure is always shown, whatever the setting: it is the one thing a table must not miss.
 * @param {import("./check.mjs").Verdict | { state: "checking" }} verdict
 * @param {{ revealed?: number, sealed?: boolean, unresolved?: string } | undefined} flags  the message's flags.tablerelay
 * @param {{ showVerified: boolean, page?: (seq: number) => string }} options  `page`: the relay's page of an
 *   event (/events/ROOM/SEQ), which each seq links to
 * @param {Localizer} i18n
 */
export function markHTML(verdict, flags, { showVerified, page }, i18n) {
  const seqs = "seqs" in verdict ? (verdict.seqs ?? []) : [];
  const seq = (/** @type {number} */ n) =>
    page ? `<a href="${escapeHTML(page(n))}" target="_blank" rel="noopener noreferrer">#${Number(n)}</a>` : `#${Number(n)}`;
  const where = seqs.length ? ` ${seqs.map(seq).join(", ")}` : "";
  const reason = "reason" in verdict ? verdict.reason : undefined;
  const worded = typeof reason === "string" ? reason : reason ? i18n.format(reason.key, reason.data ?? {}) : "";
  const mark = (/** @type {string} */ kind, /** @type {string} */ icon, /** @type {string} */ title, /** @type {string} */ text) =>
    `<div class="tablerelay-mark tablerelay-${kind}" title="${title}"><i class="fa-solid ${icon}"></i> ${text}</div>`;
  // A game system's roll the relay gave its faces but did not resolve (scripts/systems/): said beside any verdict.
  const unresolved = typeof flags?.unresolved === "string" && verdict.state !== "not-relay"
    ? mark("unresolved", "fa-circle-info", say(i18n, "TABLERELAY.Mark.UnresolvedTitle"), say(i18n, "TABLERELAY.Mark.Unresolved"))
    : "";
  return unresolved + verdictHTML(verdict, { flags, showVerified, where, worded, mark }, i18n);
}

/**
 * The mark of one verdict.
 * @param {import("./check.mjs").Verdict | { state: "checking" }} verdict
 * @param {{ flags: any, showVerified: boolean, where: string, worded: string, mark: (kind: string, icon: string, title: string, text: string) => string }} parts
 * @param {Localizer} i18n
 */
function verdictHTML(verdict, { flags, showVerified, where, worded, mark }, i18n) {
  switch (verdict.state) {
    case "not-relay": {
      const title = worded ? say(i18n, "TABLERELAY.Mark.NotRelayTitleWhy", { reason: worded }) : say(i18n, "TABLERELAY.Mark.NotRelayTitle");
      return mark("not-relay", "fa-triangle-exclamation", title, say(i18n, "TABLERELAY.Mark.NotRelay"));
    }
    case "failed":
      return mark("failed", "fa-xmark", say(i18n, "TABLERELAY.Mark.FailedTitle", { reason: worded }), say(i18n, "TABLERELAY.Mark.Failed", { reason: worded }) + where);
    case "none":
      return "";
    case "checking":
      return showVerified ? mark("checking", "fa-hourglass-half", say(i18n, "TABLERELAY.Mark.CheckingTitle"), say(i18n, "TABLERELAY.Mark.Checking")) : "";
    case "unchecked":
      return showVerified ? mark("unchecked", "fa-circle-question", say(i18n, "TABLERELAY.Mark.UncheckedTitle", { reason: worded }), say(i18n, "TABLERELAY.Mark.Unchecked") + where) : "";
    default:
      // A sealed card says it all; its mark would only repeat it.
      if (!showVerified || flags?.sealed === true) return "";
      if (flags?.revealed !== undefined) {
        return mark("verified", "fa-check", say(i18n, "TABLERELAY.Mark.RevealedTitle"), say(i18n, "TABLERELAY.Mark.Revealed") + where);
      }
      return mark("verified", "fa-dice-d20", say(i18n, "TABLERELAY.Mark.SignedTitle"), say(i18n, "TABLERELAY.Mark.Signed") + where);
  }
}

/**
 * The Fear and Hope panel.
 * @param {{ fear: number, hope: Record<string, number>, members?: Array<{ id: string, name: string, role: string }> }} state
 * @param {{ isGM: boolean, status: string, limits?: { fear?: number, hope?: number }, names?: Record<string, string>, fairDice?: boolean }} view
 *   `fairDice`: the relay rolls fair dice in this room, so a GM may reveal its dice seed from the panel
 * @param {Localizer} i18n
 */
export function panelHTML(state, view, i18n) {
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
  ${gm && view.fairDice ? `<button type="button" class="tablerelay-seed" data-action="seed-reveal" title="${say(i18n, "TABLERELAY.Panel.RevealSeedTitle")}">${say(i18n, "TABLERELAY.Panel.RevealSeed")}</button>` : ""}
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
 * @param {Localizer} i18n
 */
export function connectionFormHTML(values, i18n) {
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

// ---- fair dice (spec/fairness.md; fairness.mjs keeps the verdicts) ------------------------------------------------------------------------------------------------

/**
 * This client's verdict on one relay roll: the JS client's `verdict` and `verdictReason` (English: only a
 * failure's is shown), the number of witness values from outside the operator's side, the roll's dice seed, and
 * for "awaiting seed" whether this client saw the seed's commitment ("unseen": no; "recomputed": no, and the
 * dice match the revealed seed).
 * @typedef {{ verdict: string, reason: string, witnesses: number, n: number|null, basis?: "unseen"|"recomputed" }} Judgement
 */

/**
 * SVG shapes per icon, on a 16×16 grid, stroked in the text's colour (the pages draw the same). Icons are
 * inline SVG: a font glyph (a check mark) shows as an empty box in a browser without an emoji font.
 */
const ICONS = Object.freeze({
  fair: '<path d="M3 8.5l3 3 7-7"/>',
  unwitnessed: '<circle cx="8" cy="8" r="5.5"/><path d="M5.5 8h5"/>',
  "awaiting seed": '<circle cx="8" cy="8" r="5.5"/><path d="M8 5v3.2l2 1.3"/>',
  sealed: '<rect x="3.5" y="7" width="9" height="6.5" rx="1"/><path d="M5.5 7V5a2.5 2.5 0 0 1 5 0v2"/>',
  failed: '<path d="M4 4l8 8M12 4l-8 8"/>',
  alarm: '<path d="M8 2l6.5 12h-13z"/><path d="M8 6.5v3.5M8 12.2v.1"/>',
});

/** An inline SVG icon by name (an unknown one draws as unwitnessed: never as fair). */
export function iconSVG(/** @type {string} */ name, size = 12) {
  const shapes = ICONS[/** @type {keyof typeof ICONS} */ (name)] ?? ICONS.unwitnessed;
  return `<svg class="tablerelay-fair-icon" viewBox="0 0 16 16" width="${size}" height="${size}" aria-hidden="true" focusable="false" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round">${shapes}</svg>`;
}

/**
 * A verdict's words: its short label and its explanation, in this client's language.
 * @param {Judgement} j @param {Localizer} i18n
 */
export function verdictWords(j, i18n) {
  const n = j.n === null ? "?" : String(j.n);
  switch (j.verdict) {
    case "fair": {
      const reason =
        j.witnesses === 1 ? i18n.localize("TABLERELAY.Fair.ByOneWitness") : j.witnesses > 1 ? i18n.format("TABLERELAY.Fair.ByWitnesses", { count: String(j.witnesses) }) : i18n.localize("TABLERELAY.Fair.ByRollerSeed");
      return {
        label: j.witnesses === 1 ? i18n.localize("TABLERELAY.Fair.FairOneWitness") : j.witnesses > 1 ? i18n.format("TABLERELAY.Fair.FairWitnesses", { count: String(j.witnesses) }) : i18n.localize("TABLERELAY.Fair.Fair"),
        explanation: i18n.format("TABLERELAY.Fair.FairTitle", { n, reason }),
      };
    }
    case "unwitnessed":
      return { label: i18n.localize("TABLERELAY.Fair.Unwitnessed"), explanation: i18n.format("TABLERELAY.Fair.UnwitnessedTitle", { n }) };
    case "awaiting seed": {
      const explanation =
        j.basis === "recomputed" ? i18n.format("TABLERELAY.Fair.RecomputedUnseenTitle", { n }) : j.basis === "unseen" ? i18n.format("TABLERELAY.Fair.AwaitingUnseenTitle", { n }) : i18n.format("TABLERELAY.Fair.AwaitingTitle", { n });
      return { label: i18n.localize("TABLERELAY.Fair.Awaiting"), explanation };
    }
    case "sealed":
      return { label: i18n.localize("TABLERELAY.Fair.Sealed"), explanation: i18n.localize("TABLERELAY.Fair.SealedTitle") };
    default:
      // "failed", or a verdict newer than this module: shown as what it is, never as fair.
      return { label: i18n.localize("TABLERELAY.Fair.Failed"), explanation: i18n.format("TABLERELAY.Fair.FailedTitle", { reason: j.reason || j.verdict }) };
  }
}

/**
 * The verdict mark: an icon and a word, the explanation on hover (its title) and on a tap or Enter (a
 * <details> opens it below). Empty for no verdict.
 * @param {Judgement|null} j @param {Localizer} i18n
 */
export function fairMarkHTML(j, i18n) {
  if (!j) return "";
  const { label, explanation } = verdictWords(j, i18n);
  const kind = ["fair", "unwitnessed", "awaiting seed", "sealed"].includes(j.verdict) ? j.verdict.replace(" ", "-") : "failed";
  const known = kind === "failed" ? "failed" : j.verdict;
  return [
    `<details class="tablerelay-fair tablerelay-fair-${kind}" data-verdict="${escapeHTML(known)}">`,
    `<summary title="${escapeHTML(explanation)}">${iconSVG(known)} <span class="tablerelay-fair-word">${escapeHTML(label)}</span></summary>`,
    `<p class="tablerelay-fair-note">${escapeHTML(explanation)}</p>`,
    `</details>`,
  ].join("");
}

/**
 * The red banner: what an alarm means, and each alarm of this session, newest first. Empty for none.
 * @param {Array<{ message: string, seq: number|null }>} alarms @param {Localizer} i18n
 */
export function alarmBannerHTML(alarms, i18n) {
  if (!alarms.length) return "";
  const items = alarms.map((a) => `<li data-seq="${a.seq ?? ""}">${escapeHTML(a.message)}</li>`).join("");
  return [
    `<section class="tablerelay-alarm" role="alert">`,
    `<header>${iconSVG("alarm", 18)} <strong>${escapeHTML(i18n.localize("TABLERELAY.Fair.AlarmTitle"))}</strong>`,
    `<button type="button" data-action="dismiss" title="${escapeHTML(i18n.localize("TABLERELAY.Fair.AlarmDismiss"))}">${escapeHTML(i18n.localize("TABLERELAY.Fair.AlarmDismiss"))}</button></header>`,
    `<ul>${items}</ul>`,
    `</section>`,
  ].join("");
}
