// The mark on each chat message that says where its dice came from, as this client checked it: the check
// against the relay's signatures (check.mjs says what is checked) with the relay's keys, kept per message and
// content, and the relay's faces no message shows (the API's `unshown`).

import { checkMessage, firstShown, plainVerdict, rollsKey, shownBefore, shownTwice } from "./check.mjs";
import { eventPageUrl, importKeys } from "./client.mjs";
import { decorateFairness } from "./fairness.mjs";
import { FLAG_SCOPE } from "./messages.mjs";
import { authorUser } from "./posting.mjs";
import { MODULE_ID, relayAddress } from "./settings.mjs";
import { markHTML } from "./ui.mjs";

/** @typedef {import("./module.mjs").TableRelayModule} TableRelayModule */

/** Faces events kept for `unshown`, the newest. */
const FACES_KEPT = 1000;
/** How long the relay's published keys may take to arrive. */
const KEYS_TIMEOUT_MS = 10_000;
/** Checks of chat messages kept, the newest: a message shown again after that is checked again. */
const KEPT_CHECKS = 1000;
/** How long a message this client could not check (no keys) waits before it is checked again. */
const UNCHECKED_RETRY_MS = 30_000;

/**
 * One check of a message by this client: its verdict once made, and the keys it was made with.
 * @typedef {{ promise: Promise<import("./check.mjs").Verdict>, value?: import("./check.mjs").Verdict, keys: Promise<Map<string, { x: Uint8Array }>|null> }} Check
 */

/**
 * renderChatMessage(HTML): the mark that says where a message's dice came from, as this client checked it.
 * The check is asynchronous (WebCrypto): a message first shows "checking…", then its verdict in place.
 */
export function decorate(/** @type {TableRelayModule} */ module, /** @type {ChatMessage.Implementation} */ message, /** @type {HTMLElement|undefined} */ element) {
  if (!element) return;
  const flags = message.flags?.[FLAG_SCOPE];
  const hasRolls = (message.rolls?.length ?? 0) > 0;
  if (!flags && !(hasRolls && module.setting("rolls") === "all")) return;
  const socket = relayAddress(module.setting("relayUrl"));
  const room = typeof flags?.room === "string" ? flags.room : "";
  const options = {
    showVerified: Boolean(module.setting("showVerified")),
    page: socket && room ? (/** @type {number} */ seq) => eventPageUrl(socket, room, seq) : undefined,
  };
  // A copy of an event the chat already shows is caught here, not with the kept check: the chat changes.
  const repeated = shownBefore({ id: String(message.id), flags }, firstShownIndex(module));
  const known = repeated.length ? shownTwice(repeated) : (plainVerdict(flags, message.rolls ?? []) ?? keptCheck(module, checkKey(message))?.value);
  const target = element.querySelector(".message-content") ?? element;
  target.insertAdjacentHTML("beforeend", `<div data-tablerelay-mark>${markHTML(known ?? { state: "checking" }, flags, options, module.game.i18n)}</div>`);
  // Fair dice: this client's verdict on the roll's dice, beside the signature mark once that vouches for the
  // message (fairness.mjs).
  const checked = decorateFairness(module, message, target, known ?? null);
  if (known) return;
  const slot = target.querySelector?.("[data-tablerelay-mark]");
  void module.verdict(message).then((verdict) => {
    if (slot) slot.innerHTML = markHTML(verdict, flags, options, module.game.i18n);
    checked?.(verdict);
  });
}

/**
 * A faces event, kept (the newest FACES_KEPT) so `unshown` can tell which of them no message shows.
 * @param {import("./client.mjs").TableRelay} client @param {any} event
 */
export function noteFaces(/** @type {TableRelayModule} */ module, client, event) {
  if (event?.kind !== "roll" || event.sealed === true || event.result?.system !== "faces" || !client.room?.id) return;
  module.faces.set(`${client.room.id}:${event.epoch}:${event.seq}`, {
    seq: Number(event.seq),
    ts: Number(event.ts),
    actor: { id: String(event.actor?.id ?? ""), name: String(event.actor?.name ?? "") },
    values: (event.result.dice ?? []).map((/** @type {{ value: number }} */ d) => Number(d.value)),
  });
  if (module.faces.size > FACES_KEPT) module.faces.delete(/** @type {string} */ (module.faces.keys().next().value));
}

/**
 * The relay's faces that no chat message of this world shows (see the API's `unshown`), oldest first.
 * The room's dense seq is what shows every roll; this is that, for the faces a Foundry roll asked for.
 */
export function unshown(/** @type {TableRelayModule} */ module) {
  const shown = firstShownIndex(module);
  return [...module.faces.entries()].filter(([key]) => !shown.has(`${key}:faces`)).map(([, faces]) => faces);
}

/**
 * Which message shows each relay event first, made once for the whole chat and again after it changes (a
 * chat log renders its messages one by one: each looking through all the others would cost the square).
 */
function firstShownIndex(/** @type {TableRelayModule} */ module) {
  if (!module.shownIndex) {
    /** @type {ChatMessage.Stored[]} */
    const chat = module.game.messages.contents;
    module.shownIndex = firstShown(chat.map((m) => ({ id: String(m.id), flags: m.flags?.[FLAG_SCOPE] })));
  }
  return module.shownIndex;
}

/** What a check depends on: the message, its flags and the dice it shows (a reveal changes both). */
function checkKey(/** @type {ChatMessage.Implementation} */ message) {
  return `${message.id}|${JSON.stringify(message.flags?.[FLAG_SCOPE] ?? null)}|${rollsKey(message.rolls)}`;
}

/**
 * This client's check of a message against the relay's signatures, with the keys it got from the relay
 * itself (check.mjs says what is checked). A verdict is kept per message and content.
 * @param {ChatMessage.Implementation} message
 * @returns {Promise<import("./check.mjs").Verdict>}
 */
export function verdict(/** @type {TableRelayModule} */ module, message) {
  const key = checkKey(message);
  const kept = keptCheck(module, key);
  if (kept) return kept.promise;
  const rolls = message.rolls ?? [];
  const keys = relayKeys(module);
  /** @type {Check} */
  const entry = {
    promise: keys.then((found) => checkMessage({ flags: message.flags?.[FLAG_SCOPE], rolls, ...authorOf(module, message) }, { keys: found })),
    keys,
  };
  module.checks.set(key, entry);
  // A long session renders thousands of messages; the oldest checks go first (Foundry shows the newest).
  if (module.checks.size > KEPT_CHECKS) module.checks.delete(/** @type {string} */ (module.checks.keys().next().value));
  void entry.promise.then((verdict) => (entry.value = verdict));
  return entry.promise;
}

/**
 * A kept check of this message, unless it could not be made (no keys then) and the keys have changed since
 * (a welcome came, or a failed fetch is due again): then the message is checked again.
 * @param {string} key  the message's `checkKey`
 */
function keptCheck(/** @type {TableRelayModule} */ module, key) {
  const kept = module.checks.get(key);
  if (!kept) return undefined;
  if (kept.value?.state === "unchecked" && kept.keys !== relayKeys(module)) {
    module.checks.delete(key);
    return undefined;
  }
  return kept;
}

/**
 * The relay participant of the user who wrote a message (its `tablerelay.participant` flag, or null), and
 * whether another user claims the same one.
 * @param {ChatMessage.Implementation} message
 */
function authorOf(/** @type {TableRelayModule} */ module, message) {
  const author = authorUser(module, message);
  const flag = author?.getFlag(MODULE_ID, "participant");
  const participant = typeof flag === "string" ? flag : null;
  /** @type {User.Stored[]} */
  const users = module.game.users.contents;
  const shared = participant !== null && users.some((u) => u.id !== author?.id && u.getFlag(MODULE_ID, "participant") === participant);
  return { authorParticipant: participant, sharedParticipant: shared };
}

/**
 * The relay's public keys: from this client's welcome when it has one, else from the relay's published key
 * set (a player without a token can still check); null when neither is reachable.
 * @returns {Promise<Map<string, { x: Uint8Array }>|null>}
 */
function relayKeys(/** @type {TableRelayModule} */ module) {
  const client = module.client;
  const source = client?.you ? client.keys : relayAddress(module.setting("relayUrl"));
  const kept = module.keys;
  // Keys that could not be had are asked for again after a while, not at every message.
  if (kept?.source === source && !(kept.failed !== undefined && Date.now() - kept.failed > UNCHECKED_RETRY_MS)) return kept.keys;
  /** @type {Promise<Map<string, { x: Uint8Array }>|null>} */
  let keys;
  if (Array.isArray(source)) keys = importKeys(source);
  else if (source) keys = fetchKeys(String(source));
  else keys = Promise.resolve(null);
  /** @type {NonNullable<TableRelayModule["keys"]>} */
  const made = { source, keys };
  module.keys = made;
  void keys.then((found) => {
    if (!found) made.failed = Date.now();
  });
  return keys;
}

/** The relay's /.well-known/tablerelay-keys.json, beside its socket's address. */
async function fetchKeys(/** @type {string} */ socket) {
  const url = new URL(".well-known/tablerelay-keys.json", socket.replace(/^ws/, "http"));
  try {
    // A relay that does not answer leaves the marks unchecked, not "checking…" for good.
    const response = await globalThis.fetch(url, { signal: AbortSignal.timeout(KEYS_TIMEOUT_MS) });
    return response.ok ? await importKeys(await response.json()) : null;
  } catch {
    return null;
  }
}
