// Fair dice (spec/fairness.md) in Foundry's chat: each relay roll's card carries this client's verdict on its
// dice beside the signature mark, redrawn in place when the verdict changes (a dice seed's reveal, a hidden
// roll's reveal), and a fairness alarm raises a Foundry notification and a red banner.
//
// The verdicts are the JS client's (clients/js/src/fairness.js): every client recomputes the dice of the rolls
// it receives, so a card's verdict is this browser's own finding, never a flag the poster wrote (any user can
// write flags). A roll this client did not receive since it connected (before a reload's resume point) shows no
// verdict here; the relay's /events page and `tablerelay verify --fair` judge it.
//
// The marks' HTML (inline SVG icons, words from lang/*.json) is ui.mjs's, with the module's other HTML.

import { FLAG_SCOPE } from "./messages.mjs";
import { alarmBannerHTML, fairMarkHTML } from "./ui.mjs";

/** @typedef {import("./module.mjs").TableRelayModule} TableRelayModule */
/** @typedef {import("./ui.mjs").Localizer} Localizer */

/** @typedef {import("./ui.mjs").Judgement} Judgement */

/** Verdicts kept (the newest): a card older than that shows none until its roll is received again. */
const KEPT_VERDICTS = 2000;
/** Alarms the banner lists, the newest. */
const KEPT_ALARMS = 20;
/** Which verdict a card of several relay events (a Foundry roll's faces) shows: the worst of them. */
const WORST_FIRST = ["failed", "sealed", "awaiting seed", "unwitnessed", "fair"];

/** Listen to a relay connection's verdicts and alarms (connection.mjs calls it for each client it opens). */
export function watchFairness(/** @type {TableRelayModule} */ module, /** @type {import("./client.mjs").TableRelay} */ client) {
  // A card may be drawn before this client receives its roll (another client posted it first): the roll's
  // arrival, like a later change of its verdict, draws the card's mark again.
  const judged = (/** @type {any} */ event) => {
    if (module.client !== client) return;
    const key = noteVerdict(module, client, event);
    if (key) redraw(module, key);
  };
  client.on("event", (/** @type {any} */ event) => {
    if (event?.kind === "roll") judged(event);
    // A fair room's first seed is committed with its first roll (its welcome named none): the GM's panel
    // offers the seed's reveal from then on.
    if (module.client === client && !module.fairDice && (event?.kind === "seed_commit" || event?.fair !== undefined)) {
      module.fairDice = true;
      module.renderPanel();
    }
  });
  client.on("verdict", judged);
  client.on("alarm", (/** @type {import("./client.mjs").FairnessAlarm} */ alarm) => {
    if (module.client === client) raiseAlarm(module, alarm);
  });
}

/** The key of a roll of this client's room: room, epoch (the log) and seq, as a message's flags name it. */
function keyOf(/** @type {string} */ room, /** @type {string} */ epoch, /** @type {number} */ seq) {
  return `${room}:${epoch}:${seq}`;
}

/**
 * A seq from a message's flags, or NaN. Flags are whatever JSON the poster stored (a macro may write
 * `{ "toString": 1 }`, which throws wherever it is turned into a number), so only numbers and numeric text.
 * @param {unknown} value
 */
function seqOf(value) {
  return typeof value === "number" ? value : typeof value === "string" ? Number(value) : NaN;
}

/**
 * Keep a roll's verdict, if it has one (a relay without fair dice gives none). Returns its key, or null.
 * @param {TableRelayModule} module @param {import("./client.mjs").TableRelay} client @param {any} event
 */
function noteVerdict(module, client, event) {
  if (typeof event?.verdict !== "string" || !client.room?.id || !client.epoch) return null;
  const key = keyOf(client.room.id, client.epoch, seqOf(event.seq));
  const witnesses = outsideWitnesses(event);
  const n = Number.isInteger(event.fair?.n) ? Number(event.fair.n) : null;
  module.judgements.delete(key); // re-inserted as the newest
  const reason = String(event.verdictReason ?? "");
  /** @type {Judgement} */
  const judgement = { verdict: event.verdict, reason, witnesses, n };
  const basis = event.verdict === "awaiting seed" ? awaitingBasis(reason) : undefined;
  if (basis) judgement.basis = basis;
  module.judgements.set(key, judgement);
  if (module.judgements.size > KEPT_VERDICTS) module.judgements.delete(/** @type {string} */ (module.judgements.keys().next().value));
  return key;
}

/**
 * Which "awaiting seed" a roll's is, for words in this world's language: the JS client says it only in its
 * English `verdictReason` (clients/js/src/fairness.js, SeedBook.check: "...(its commitment is older than what
 * this client received)" while the seed is not revealed, "recomputed from seed n, whose commitment is older..."
 * after). Undefined for the plain case: the seed's commitment was seen and the seed is not revealed yet.
 * @param {string} reason
 * @returns {"unseen"|"recomputed"|undefined}
 */
export function awaitingBasis(reason) {
  if (!/commitment is older/.test(reason)) return undefined;
  return /^recomputed/.test(reason) ? "recomputed" : "unseen";
}

/**
 * How many witness values came from outside the operator's side: a GM's own value for the GM's roll (a hidden
 * roll asks its roller too) is no witness (spec/fairness.md, "outside contribution").
 * @param {any} event
 */
export function outsideWitnesses(event) {
  const witnesses = Array.isArray(event?.fair?.witnesses) ? event.fair.witnesses : [];
  const roller = event?.actor?.id;
  const gm = event?.actor?.role === "gm";
  return witnesses.filter((/** @type {unknown} */ w) => Array.isArray(w) && !(gm && w[0] === roller)).length;
}

/**
 * The relay rolls a message shows, as keys: a Foundry roll's faces events, or the one event it shows (a
 * revealed card names its roll's seq). None for a message that is not the relay's.
 * @param {Record<string, any>|undefined} flags
 * @returns {string[]}
 */
export function rollKeys(flags) {
  if (!flags || flags.via !== true || typeof flags.room !== "string" || typeof flags.epoch !== "string") return [];
  const seqs = (Array.isArray(flags.seqs) ? flags.seqs : flags.seq !== undefined ? [flags.seq] : []).map(seqOf);
  // One unreadable seq and the message's verdict cannot be told: none is shown (its signature mark fails it).
  return seqs.every((s) => Number.isInteger(s)) ? seqs.map((s) => keyOf(flags.room, flags.epoch, s)) : [];
}

/**
 * This client's verdict on the dice a message shows, or null when it has none for every roll the message
 * names. A message of several rolls shows the worst of their verdicts, and witnesses only when all are fair.
 * @param {Map<string, Judgement>} judgements @param {string[]} keys
 * @returns {Judgement|null}
 */
export function judge(judgements, keys) {
  const found = keys.map((k) => judgements.get(k));
  if (!found.length || found.some((j) => j === undefined)) return null;
  const all = /** @type {Judgement[]} */ (found);
  const rank = (/** @type {Judgement} */ j) => {
    const at = WORST_FIRST.indexOf(j.verdict);
    return at < 0 ? 0 : at; // a verdict this module does not know is treated as the worst
  };
  const worst = all.reduce((a, b) => (rank(b) < rank(a) ? b : a));
  if (all.length === 1) return worst;
  return { ...worst, witnesses: worst.verdict === "fair" ? Math.min(...all.map((j) => j.witnesses)) : 0 };
}

/**
 * Whether a message's signature check lets its card show the verdict on the relay rolls it names: a message
 * this client verified as showing them, or a sealed card (it shows no dice; its reveal is checked). A message
 * that failed its check, or is not checked yet, shows none: a macro's message naming a relay roll's seq must
 * not wear that roll's "fair".
 * @param {import("./check.mjs").Verdict|null} check
 */
function vouched(check) {
  return check?.state === "verified" || check?.state === "none";
}

/** The HTML of one card's verdict slot. */
function slotHTML(/** @type {TableRelayModule} */ module, /** @type {{ keys: string[], check: import("./check.mjs").Verdict|null }} */ entry) {
  return vouched(entry.check) ? fairMarkHTML(judge(module.judgements, entry.keys), module.game.i18n) : "";
}

/**
 * renderChatMessage(HTML): the verdict slot of a relay roll's card, beside its signature mark, kept so a
 * later verdict redraws it in place. Nothing for a message of no relay roll, or one this client has no
 * verdict on and will get none for (a relay without fair dice). `check` is the message's signature check when
 * it is known already; else the returned function takes it when it is made (null: no slot was made).
 * @param {TableRelayModule} module @param {ChatMessage.Implementation} message @param {Element} target
 * @param {import("./check.mjs").Verdict|null} [check]
 * @returns {((check: import("./check.mjs").Verdict) => void)|null}
 */
export function decorateFairness(module, message, target, check = null) {
  const flags = message.flags?.[FLAG_SCOPE];
  const keys = rollKeys(flags);
  if (!keys.length) return null;
  const entry = { slot: /** @type {any} */ (null), keys, check };
  target.insertAdjacentHTML("beforeend", `<div data-tablerelay-fair>${slotHTML(module, entry)}</div>`);
  const slot = target.querySelector?.("[data-tablerelay-fair]") ?? null;
  if (!slot) return null;
  entry.slot = slot;
  for (const key of keys) {
    let slots = module.fairSlots.get(key);
    if (!slots) module.fairSlots.set(key, (slots = new Set()));
    // A card Foundry rendered again leaves its old element behind: let it go.
    for (const old of slots) if (old.slot.isConnected === false) slots.delete(old);
    slots.add(entry);
  }
  if (module.fairSlots.size > KEPT_VERDICTS) module.fairSlots.delete(/** @type {string} */ (module.fairSlots.keys().next().value));
  return (made) => {
    entry.check = made;
    slot.innerHTML = slotHTML(module, entry);
  };
}

/** A roll's verdict changed: every card showing it draws its mark again. */
function redraw(/** @type {TableRelayModule} */ module, /** @type {string} */ key) {
  for (const entry of module.fairSlots.get(key) ?? []) entry.slot.innerHTML = slotHTML(module, entry);
}

/**
 * An alarm: the red banner at the top of the page listing the alarms of this session, and a notification that
 * stays until dismissed when the banner goes up (again after it was dismissed). Both stay in this browser: an alarm may name the dice of a hidden roll this client
 * saw, so it is never posted to the chat.
 * @param {TableRelayModule} module @param {{ message: string, seq: number|null }} alarm
 */
export function raiseAlarm(module, alarm) {
  const message = String(alarm.message);
  if (module.alarms.some((a) => a.message === message)) return;
  // One notification per outbreak: a seed that does not match its commitment fails every roll made with it (up
  // to the relay's seed_rolls, 250), each an alarm of its own, which the banner lists without a notice each.
  const first = module.alarms.length === 0;
  module.alarms.unshift({ message, seq: alarm.seq ?? null });
  module.alarms.length = Math.min(module.alarms.length, KEPT_ALARMS);
  if (first) module.env.ui.notifications.error(module.text("TABLERELAY.Fair.AlarmNotify", { message }), { permanent: true });
  renderAlarms(module);
}

/** The red banner of this session's alarms, drawn again (none: no banner). */
export function renderAlarms(/** @type {TableRelayModule} */ module) {
  const document = module.env.document;
  if (!document?.body) return;
  let host = document.getElementById("tablerelay-alarm");
  if (!host) {
    host = document.createElement("div");
    host.id = "tablerelay-alarm";
    host.addEventListener("click", (/** @type {MouseEvent} */ e) => {
      if (/** @type {HTMLElement|null} */ (e.target)?.closest?.("[data-action=dismiss]")) {
        module.alarms.length = 0;
        renderAlarms(module);
      }
    });
    document.body.appendChild(host);
  }
  host.innerHTML = alarmBannerHTML(module.alarms, module.game.i18n);
}
