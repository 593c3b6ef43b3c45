// ChatMessage data for relay events: a roll for its audience, a sealed card for everyone else, and the
// update that turns a sealed card into its roll when it is revealed. Pure: the Foundry users and the
// rendered roll come in as arguments.

import { audienceOf } from "./audience.mjs";
import { sealedCardHTML } from "./ui.mjs";

export const FLAG_SCOPE = "tablerelay";

/**
 * The flags every message from a relay event carries: which event, so a reload or another client never
 * posts it twice, and what a later check needs (kid and sig once events are signed).
 * @param {{ seq: number, epoch: string, kind: string, visibility?: string, kid?: string, sig?: Uint8Array, commitment?: string }} event
 * @param {string} room
 * @param {Record<string, unknown>} [extra]
 */
export function eventFlags(event, room, extra = {}) {
  /** @type {Record<string, unknown>} */
  const flags = { via: true, room, epoch: event.epoch, seq: event.seq, kind: event.kind, ...extra };
  if (event.visibility) flags.visibility = event.visibility;
  if (typeof event.commitment === "string") flags.commitment = event.commitment;
  // Signed events (spec/signing.md): keep what verifies the event later, in the form it arrived.
  if (typeof event.kid === "string") flags.kid = event.kid;
  if (event.sig instanceof Uint8Array) flags.sig = bytesToBase64(event.sig);
  return flags;
}

/** @param {Uint8Array} bytes */
export function bytesToBase64(bytes) {
  let text = "";
  for (const b of bytes) text += String.fromCharCode(b);
  return globalThis.btoa(text);
}

/**
 * The messages to create for a roll event, as this client received it.
 * @param {any} event  a relay `roll` event (full or sealed)
 * @param {{ room: string, users: import("./audience.mjs").UserView[], roll: object|null }} where
 *   `roll` is the Foundry Roll made from `event.foundry.rolls[0]` (null for a sealed event)
 * @returns {Array<Record<string, any>>}
 */
export function rollMessages(event, { room, users, roll }) {
  const speaker = { alias: event.actor?.name ?? "tablerelay" };
  const everyone = users.map((u) => u.id);
  const card = (/** @type {string[]} */ whisper) => ({
    speaker,
    content: sealedCardHTML(event),
    whisper,
    flags: { [FLAG_SCOPE]: eventFlags(event, room, { sealed: true }) },
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
  /** @type {Array<Record<string, any>>} */
  const messages = [{ ...full, whisper: audience, blind: event.visibility === "blind" }];
  if (others.length) messages.push(card(others));
  return messages;
}

/**
 * The update that turns a sealed card (or the audience's whispered copy) into the revealed roll, public.
 * @param {any} reveal  the relay `reveal` event (with `foundry` rendered by the relay, `verified` by the client)
 * @param {{ room: string, roll: object, original: Record<string, any> }} where  `original`: the card's flags
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
        via: true,
        room,
        sealed: false,
        revealed: reveal.seq,
        verified: reveal.verified ?? null,
      },
    },
  };
}
