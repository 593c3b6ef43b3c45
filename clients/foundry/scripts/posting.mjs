// Relay events into Foundry's chat: which client posts an event (audience.mjs), whether the chat already
// shows it, the messages of a roll (a sealed card for those who may not see it) and a reveal turning the
// card into the roll.

import { isPosted, posterFor } from "./audience.mjs";
import { FLAG_SCOPE, revealUpdate, rollMessages } from "./messages.mjs";
import { MODULE_ID } from "./settings.mjs";

/** @typedef {import("./module.mjs").TableRelayModule} TableRelayModule */

/**
 * The module's message data (rolls as Roll instances) as fvtt-types' ChatMessage data.
 * @param {import("./messages.mjs").MessageData} data
 * @returns {ChatMessage.CreateData}
 */
function messageData(data) {
  // @ts-expect-error fvtt-types 13.340.1 takes only JSON strings in `rolls`; Foundry v13's JSONField#_cast stringifies a Roll
  return data;
}

/** Foundry's users as the poster and audience rules see them. */
export function users(/** @type {TableRelayModule} */ module) {
  // fvtt-types types `contents` as `readonly unknown[] & User.Stored[]`, whose map sees unknown elements.
  /** @type {User.Stored[]} */
  const users = module.game.users.contents;
  return users.map((u) => ({
    id: u.id,
    isGM: Boolean(u.isGM),
    active: Boolean(u.active),
    participant: u.getFlag(MODULE_ID, "participant") ?? null,
  }));
}

/**
 * Messages whose flags name a relay event of this room (a roll's, or the one its reveal turned). Flags are
 * the poster's claim, so whether the event is posted is `mayPost`'s to say.
 * @param {string} room @param {string} epoch @param {number} seq
 */
export function messagesFor(/** @type {TableRelayModule} */ module, room, epoch, seq) {
  /** @type {ChatMessage.Stored[]} */
  const messages = module.game.messages.contents;
  return messages.filter((m) => {
    const f = m.flags?.[FLAG_SCOPE];
    return f && f.room === room && f.epoch === epoch && (f.seq === seq || f.revealed === seq);
  });
}

/**
 * Could `message` be an event's post: written by a GM, or by the user whose relay participant is `roller`
 * (the ones who post it: audience.mjs, posterFor)? Another player's macro naming the next seq must not keep
 * the real roll out of the chat.
 */
function mayPost(/** @type {TableRelayModule} */ module, /** @type {ChatMessage.Stored} */ message, /** @type {string|undefined} */ roller) {
  const user = authorUser(module, message);
  if (!user) return false;
  return user.isGM || (roller !== undefined && user.getFlag(MODULE_ID, "participant") === roller);
}

/** The User who wrote a message, if this world knows them. */
export function authorUser(/** @type {TableRelayModule} */ module, /** @type {ChatMessage.Implementation} */ message) {
  /** @type {any} v12+ hands the author as a User, the harness as its id */
  const author = message.author;
  const id = typeof author === "string" ? author : author?.id;
  /** @type {User.Stored[]} */
  const users = module.game.users.contents;
  return users.find((u) => u.id === id);
}

/** The highest relay seq this world's chat holds for the room, or 0; a seq past the room's head is a macro's. */
function highestPosted(/** @type {TableRelayModule} */ module, /** @type {string} */ room, /** @type {string} */ epoch) {
  let highest = 0;
  for (const m of module.game.messages.contents) {
    const f = m.flags?.[FLAG_SCOPE];
    if (!f || f.room !== room || f.epoch !== epoch) continue;
    for (const seq of [f.seq, f.revealed]) if (typeof seq === "number" && Number.isInteger(seq) && seq <= module.head && seq > highest) highest = seq;
  }
  return highest;
}

/** Post one relay event, if this client is the one to and the chat does not show it yet. */
export async function postEvent(/** @type {TableRelayModule} */ module, /** @type {import("./client.mjs").TableRelay} */ client, /** @type {any} */ event, /** @type {{ replay: boolean }} */ info) {
  if (!isPosted(event)) return;
  const room = client.room?.id;
  if (!room) return;
  // A fresh welcome's history is the past: post from it only what this world missed after its last post.
  if (info.replay) {
    const highest = highestPosted(module, room, event.epoch);
    if (highest === 0 || event.seq <= highest) return;
  }
  if (posterFor(event, module.users()) !== module.game.user.id) return;
  // A game system's roll of this client's, still on its way: its event may be one the system's message shows.
  if (module.inFlight.size) await Promise.allSettled([...module.inFlight]);
  const key = `${room}:${event.epoch}:${event.seq}`;
  if (module.claimed.has(key)) {
    // Shown by the system's own message; those outside a hidden roll's audience get its sealed card.
    if (event.kind === "roll" && !module.posted.has(key)) {
      module.posted.add(key);
      await postRoll(module, room, event, { sealedOnly: true });
    }
    return;
  }
  const roller = event.kind === "reveal" ? event.roll?.actor?.id : event.actor?.id;
  if (module.posted.has(key) || module.messagesFor(room, event.epoch, event.seq).some((m) => mayPost(module, m, roller))) return;
  module.posted.add(key);
  if (event.kind === "roll") await postRoll(module, room, event);
  else await postReveal(module, room, event);
}

/** A Foundry Roll from the relay's rendering, or null when the event carries none. */
function rollOf(/** @type {TableRelayModule} */ module, /** @type {any} */ event) {
  const data = event.foundry?.rolls?.[0];
  if (!data) return null;
  const Roll = module.env.foundry?.dice?.Roll ?? module.env.Roll;
  return Roll.fromData(typeof data === "string" ? JSON.parse(data) : data);
}

async function postRoll(/** @type {TableRelayModule} */ module, /** @type {string} */ room, /** @type {any} */ event, { sealedOnly = false } = {}) {
  const users = module.users();
  const roll = event.sealed ? null : rollOf(module, event);
  for (const data of rollMessages(event, { room, users, roll, i18n: module.game.i18n })) {
    if (sealedOnly && !data.flags?.[FLAG_SCOPE]?.sealed) continue;
    await module.env.ChatMessage.create(messageData(data));
  }
}

async function postReveal(/** @type {TableRelayModule} */ module, /** @type {string} */ room, /** @type {any} */ reveal) {
  const roll = rollOf(module, reveal);
  if (!roll) return;
  // Every message naming the roll, whoever wrote it: the card is turned into the roll, and the rest (the
  // audience's whisper, or a macro's claim) removed. The roller's user may no longer be the roll's
  // participant (merged since), so the author is not asked here.
  const posted = module.messagesFor(room, reveal.epoch, reveal.of);
  const mine = posted.filter((m) => m.isOwner);
  // messagesFor found these by their flags, so each has them.
  const target = mine.find((m) => m.flags[FLAG_SCOPE]?.sealed) ?? mine[0];
  if (target) {
    await target.update(messageData(revealUpdate(reveal, { room, roll, original: target.flags[FLAG_SCOPE] ?? {} })));
    // One message per roll once it is public: the audience's whispered copy (or a second card) goes.
    for (const m of mine) if (m !== target) await m.delete();
    return;
  }
  const original = { room, epoch: reveal.epoch, seq: reveal.of, kind: "roll" };
  await module.env.ChatMessage.create(
    messageData({
      speaker: { alias: reveal.roll?.actor?.name ?? reveal.actor?.name ?? "tablerelay" },
      ...revealUpdate(reveal, { room, roll, original }),
    }),
  );
}
