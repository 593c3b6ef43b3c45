// A game system's own roll resolved by the relay: the system hands the module a configured roll (a hook, or a
// wrapped entry point), the module sends the relay the matching rules intent at once, and when the system
// evaluates the roll (Roll#evaluate, dice.mjs) its dice take the relay's faces from that event. The message
// the system then creates carries the relay's signed event in its flags (markOwnRoll), so every client checks
// it as it checks a relay roll: the dice shown are the event's, and so is the total. The event itself is not
// posted again by this client (posting.mjs waits for claims in flight); players outside a hidden roll's
// audience get its sealed card as for any relay roll.

import { chosenMode, visibilityOf } from "../audience.mjs";
import { connectedClient } from "../connection.mjs";
import { FACES_TIMEOUT_MS } from "../dice.mjs";
import { eventFlags } from "../messages.mjs";
import { MODULE_ID } from "../settings.mjs";

/** @typedef {import("../module.mjs").TableRelayModule} TableRelayModule */

/**
 * @typedef {object} Claim  a system roll the relay resolves
 * @property {Promise<{ event: any, room: string }>} pending  the relay's event for it
 * @property {(result: any) => Array<[any, number[]]>} faces  which of the roll's dice terms show which faces
 * @property {"public"|"gm"|"blind"|"self"} visibility
 * @property {number} [target]  which of the event's targets this roll is (a roll per target sharing its dice)
 * @property {(event: any, roll: any) => string|null} [compare]  the system's outcome against the relay's: a
 *   sentence when they differ (marked on the card)
 */

/** The world lets the relay resolve this system's rolls, and this browser rolls through the relay. */
export function relayResolves(/** @type {TableRelayModule} */ module, /** @type {"daggerheartRolls"|"drawSteelRolls"} */ setting) {
  return module.rollsThroughRelay() && module.connected && module.setting(setting) !== false;
}

/**
 * The relay's visibility for a Foundry roll mode (v13's `gmroll`…, or v14's message mode `gm`…), else this
 * user's chosen one: a blind roll is `gm` (its roller's own browser evaluates it).
 */
export function visibilityFor(/** @type {TableRelayModule} */ module, /** @type {unknown} */ mode) {
  const visibility = visibilityOf(typeof mode === "string" && mode ? mode : chosenMode(module.game));
  return visibility === "blind" ? "gm" : visibility;
}

/**
 * Send the relay a system roll's intent now; the roll's dice wait for its event when they are evaluated.
 * @param {TableRelayModule} module
 * @param {object} roll  the system's Roll
 * @param {import("../client.mjs").Intent} intent
 * @param {{ visibility: Claim["visibility"], label?: string, faces: Claim["faces"], compare?: Claim["compare"] }} how
 */
export function claimRoll(module, roll, intent, { visibility, label, faces, compare }) {
  const client = connectedClient(module);
  const pending = client.roll(intent, { visibility, label: label ? label.slice(0, 200) : undefined }).then((/** @type {any} */ event) => {
    const room = String(client.room?.id ?? "");
    // This client shows the event through the system's own message: it never posts it as a relay roll.
    module.claimed.add(`${room}:${event.epoch}:${event.seq}`);
    return { event, room };
  });
  module.inFlight.add(pending);
  const settle = () => module.inFlight.delete(pending);
  pending.then(settle, settle);
  /** @type {Claim} */
  const claim = { pending, faces, visibility };
  if (compare) claim.compare = compare;
  module.claims.set(roll, claim);
  return claim;
}

/**
 * Roll#evaluate of a claimed roll: the relay's event, its faces queued for the roll's dice, and the roll's
 * context naming the event. A refusal (not enough Hope, say) stops the roll with the relay's sentence.
 * @param {TableRelayModule} module
 * @param {any} roll
 * @param {Claim} claim
 */
export async function resolveClaim(module, roll, claim) {
  module.claims.delete(roll);
  /** @type {any} */
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(module.text("TABLERELAY.Reason.Timeout", { seconds: String(FACES_TIMEOUT_MS / 1000) }))), FACES_TIMEOUT_MS);
  });
  let got;
  try {
    got = await Promise.race([claim.pending, timeout]);
  } catch (err) {
    const message = String(/** @type {Error} */ (err)?.message ?? err);
    module.notify("error", "TABLERELAY.Notify.SystemRefused", { message });
    throw new Error(message);
  } finally {
    clearTimeout(timer);
  }
  const { event, room } = /** @type {{ event: any, room: string }} */ (got);
  if (event.sealed || !event.result) throw new Error(module.text("TABLERELAY.Reason.Sealed"));
  const extra = claim.target === undefined ? {} : { target: claim.target };
  /** @type {import("../fulfillment.mjs").RollContext} */
  const context = { via: true, seqs: [], roundTrips: 1, room, epoch: event.epoch, event: eventFlags(event, room, extra) };
  for (const [term, values] of claim.faces(event.result)) {
    module.broker.queues.set(term, [...values]);
    module.broker.rolls.set(term, { context, about: { visibility: claim.visibility } });
  }
  roll.options = { ...(roll.options ?? {}), tablerelay: context };
  return { event, context };
}

/**
 * A claim for a roll about to evaluate: one a system module made when the system configured it, or one a
 * system module's claimer makes now (Draw Steel's, which knows the roll only as it evaluates).
 * @param {TableRelayModule} module
 * @param {object} roll
 * @returns {Claim|undefined}
 */
export function claimOf(module, roll) {
  const claim = module.claims.get(roll);
  if (claim) return claim;
  for (const claimer of module.claimers) {
    const made = claimer(roll);
    if (made) return made;
  }
  return undefined;
}

/** After a claimed roll evaluated: the system's outcome against the relay's, kept in the roll's context. */
export function compareClaim(/** @type {Claim} */ claim, /** @type {any} */ event, /** @type {any} */ roll) {
  const context = roll.options?.tablerelay;
  if (!claim.compare || !context?.event) return;
  const mismatch = claim.compare(event, roll);
  if (mismatch) context.event = { ...context.event, mismatch };
}

/** Is `participant` this user's (the participant its client joined the relay as)? */
export function isMine(/** @type {TableRelayModule} */ module, /** @type {unknown} */ participant) {
  return typeof participant === "string" && participant === module.game.user.getFlag(MODULE_ID, "participant");
}
