// ChatMessage data for relay events: a roll for its audience, a sealed card for everyone else, and the
// update that turns a sealed card into its roll when it is revealed. Pure: the Foundry users and the
// rendered roll come in as arguments.

import { audienceOf } from "./audience.mjs";
import { signedBytes } from "./client.mjs";
import { sealedCardHTML } from "./ui.mjs";

/** @typedef {import("./ui.mjs").Localizer} Localizer */

export const FLAG_SCOPE = "tablerelay";

/**
 * `flags.tablerelay` of a ChatMessage the module posts or marks (tests/foundry_types/module-env.d.ts declares
 * them to foundry-vtt-types as the ChatMessage flags of this scope).
 * @typedef {object} MessageFlags
 * @property {boolean} via  every die came from the relay
 * @property {string} [room]
 * @property {string} [epoch]
 * @property {number} [seq]  the relay event the message shows
 * @property {number[]} [seqs]  the relay events that fulfilled a Foundry roll's dice
 * @property {string} [kind]
 * @property {string} [visibility]
 * @property {string} [commitment]
 * @property {string} [kid]  signed events: the key id
 * @property {string} [sig]  signed events: the signature, base64
 * @property {string} [signed]  signed events: the exact bytes signed, base64 (spec/signing.md: domain, room
 *   id, canonical event), so anyone can check the message later against the relay's published keys
 * @property {boolean} [verified]  did the event's signature verify when this client received it
 * @property {string} [verifyError]  why it did not
 * @property {Signature[]} [signatures]  a Foundry roll's faces events, as signed
 * @property {boolean} [sealed]  a sealed card, until its reveal turns it into the roll
 * @property {number} [revealed]  the seq of the reveal that opened it
 * @property {boolean|null} [sealMatches]  did the reveal match the commitment (null: never saw the commitment)
 * @property {string} [reason]  why a roll was not via the relay
 * @property {number} [target]  which of the relay event's targets the message shows (a roll per target)
 * @property {string} [unresolved]  a game system's roll the relay gave its faces but did not resolve: why
 * @property {string} [mismatch]  a game system's roll whose own outcome differs from the relay's: how
 */

/**
 * What checks one signed relay event later: its seq, key id, signature and signed bytes (all base64).
 * @typedef {object} Signature
 * @property {number} seq
 * @property {string} kid
 * @property {string} sig
 * @property {string} signed
 * @property {boolean} [verified]
 */

/**
 * ChatMessage data as the module writes it: Foundry's, except that `rolls` holds Roll instances, as Foundry's
 * own Roll#toMessage passes them (the schema's JSONField stores each as its JSON).
 * @typedef {Omit<ChatMessage.CreateData, "rolls"> & { rolls?: Roll.Any[] }} MessageData
 */

/**
 * The flags every message from a relay event carries: which event, so a reload or another client never
 * posts it twice, and what a later check needs (kid and sig once events are signed).
 * @param {{ seq: number, epoch: string, kind: string, visibility?: string, kid?: string, sig?: Uint8Array, commitment?: string, verified?: boolean, verifyError?: string }} event
 * @param {string} room
 * @param {Partial<MessageFlags>} [extra]
 */
export function eventFlags(event, room, extra = {}) {
  const flags = sealedFlags(event, room, extra);
  // Signed events (spec/signing.md): keep what verifies the event later, in the form it arrived.
  const signature = signatureOf(event, room);
  if (signature) Object.assign(flags, { kid: signature.kid, sig: signature.sig, signed: signature.signed });
  if (typeof event.verified === "boolean") flags.verified = event.verified;
  if (typeof event.verifyError === "string") flags.verifyError = event.verifyError;
  return flags;
}

/**
 * The flags of a sealed card: which event, its visibility and its seal, and no signature. The poster holds the
 * full form of the roll, whose signed bytes hold its dice and label: on a card, whispered to everyone outside
 * the roll's audience, they would hand them the roll. The reveal brings the signature that opens the card.
 * @param {{ seq: number, epoch: string, kind: string, visibility?: string, commitment?: string }} event
 * @param {string} room
 * @param {Partial<MessageFlags>} [extra]
 * @returns {MessageFlags}
 */
export function sealedFlags(event, room, extra = {}) {
  /** @type {MessageFlags} */
  const flags = { via: true, room, epoch: event.epoch, seq: event.seq, kind: event.kind, ...extra };
  if (event.visibility) flags.visibility = event.visibility;
  if (typeof event.commitment === "string") flags.commitment = event.commitment;
  return flags;
}

/**
 * A signed event's key id, signature and signed bytes, in a form a message's flags can hold; null if unsigned.
 * @param {any} event  as this client received it
 * @param {string} room
 * @returns {Signature|null}
 */
export function signatureOf(event, room) {
  if (typeof event?.kid !== "string" || !(event.sig instanceof Uint8Array)) return null;
  /** @type {Signature} */
  const signature = { seq: event.seq, kid: event.kid, sig: bytesToBase64(event.sig), signed: bytesToBase64(signedBytes(event, room)) };
  if (typeof event.verified === "boolean") signature.verified = event.verified;
  return signature;
}

/** @param {Uint8Array} bytes */
export function bytesToBase64(bytes) {
  let text = "";
  for (const b of bytes) text += String.fromCharCode(b);
  return globalThis.btoa(text);
}

/** What `bytesToBase64` wrote, as bytes again (a message's stored signature, to check it). */
export function base64ToBytes(/** @type {string} */ text) {
  const binary = globalThis.atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/**
 * The messages to create for a roll event, as this client received it.
 * @param {any} event  a relay `roll` event (full or sealed)
 * @param {{ room: string, users: import("./audience.mjs").UserView[], roll: Roll.Any|null, i18n: Localizer }} where
 *   `roll` is the Foundry Roll made from `event.foundry.rolls[0]` (null for a sealed event); `i18n` words the
 *   sealed card, which Foundry stores as HTML: it stays in the language of the client that posts it
 * @returns {MessageData[]}
 */
export function rollMessages(event, { room, users, roll, i18n }) {
  const speaker = { alias: event.actor?.name ?? "tablerelay" };
  const everyone = users.map((u) => u.id);
  const card = (/** @type {string[]} */ whisper) => ({
    speaker,
    content: sealedCardHTML(event, i18n),
    whisper,
    flags: { [FLAG_SCOPE]: sealedFlags(event, room, { sealed: true }) },
  });
  if (event.sealed === true || !roll) return [card([])];
  const full = {
    speaker,
    flavor: event.foundry?.flavor ?? "",
    content: event.foundry?.content ?? String(event.result?.total ?? ""),
    rolls: [roll],
    whisper: [],
    blind: false,
    flags: { [FLAG_SCOPE]: eventFlags(event, room) },
  };
  if (event.visibility === "public") return [full];
  const audience = audienceOf(event, users);
  const others = everyone.filter((id) => !audience.includes(id));
  /** @type {MessageData[]} */
  const messages = [{ ...full, whisper: audience, blind: event.visibility === "blind" }];
  if (others.length) messages.push(card(others));
  return messages;
}

/**
 * The update that turns a sealed card (or the audience's whispered copy) into the revealed roll, public.
 * @param {any} reveal  the relay `reveal` event (`foundry` rendered by the relay, `commitmentVerified` and the
 *   signature's `verified` by the client)
 * @param {{ room: string, roll: Roll.Any, original: Record<string, any> }} where  `original`: the card's flags
 */
export function revealUpdate(reveal, { room, roll, original }) {
  return {
    flavor: reveal.foundry?.flavor ?? "",
    content: reveal.foundry?.content ?? "",
    rolls: [roll],
    whisper: [],
    blind: false,
    flags: {
      [FLAG_SCOPE]: {
        ...original,
        // The reveal's own signature and check: it carries the blob and nonce that open the roll.
        ...eventFlags(reveal, room),
        seq: original.seq ?? reveal.of,
        kind: "roll",
        sealed: false,
        revealed: reveal.seq,
        sealMatches: reveal.commitmentVerified ?? null,
      },
    },
  };
}
