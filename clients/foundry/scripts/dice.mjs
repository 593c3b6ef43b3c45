// Foundry's dice through the relay: the fulfillment method registered at init, Foundry's default method
// while rolls go through the relay, Roll#evaluate wrapped so a roll's faces are asked for in one request,
// the request itself, the outage notices, and the mark a roll made here carries in its message's flags.

import { chosenMode, visibilityOf } from "./audience.mjs";
import { connectedClient } from "./connection.mjs";
import { METHOD } from "./fulfillment.mjs";
import { FLAG_SCOPE, signatureOf } from "./messages.mjs";
import { relayAddress } from "./settings.mjs";
import { claimOf, compareClaim, resolveClaim } from "./systems/relayed.mjs";

/** @typedef {import("./module.mjs").TableRelayModule} TableRelayModule */

/** How long a faces request may take before the roll falls back or is refused. */
export const FACES_TIMEOUT_MS = 8000;

/** A promise that rejects after `ms` unless `promise` settles first, with the sentence `message()` words. */
function withTimeout(/** @type {Promise<any>} */ promise, /** @type {number} */ ms, /** @type {() => string} */ message) {
  /** @type {any} */
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(message())), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Register the relay as a fulfillment method of Foundry's dice and wrap Roll#evaluate (init). */
export function installDice(/** @type {TableRelayModule} */ module) {
  const fulfillment = module.env.CONFIG.Dice.fulfillment;
  fulfillment.methods[METHOD] = {
    // A translation key, as core's own methods have ("DICE.FULFILLMENT.Mersenne"): Foundry's DiceConfig
    // (v12's and v13's) hands the labels to its template unchanged, which localizes them when it renders,
    // after the translations are loaded.
    label: "TABLERELAY.Fulfillment.Label",
    icon: '<i class="fa-solid fa-tower-broadcast"></i>',
    interactive: false,
    handler: (term) => module.broker.face(term),
    // fvtt-types requires a resolver, but Foundry v13 reads one only for an interactive method
    // (Roll.resolverImplementation: `method.resolver ?? RollResolver`), and its own non-interactive
    // "mersenne" has none. Naming Foundry's default resolver satisfies the type and changes nothing.
    resolver: module.env.foundry?.applications?.dice?.RollResolver,
  };
  module.previousMethod = fulfillment.defaultMethod;
  wrapEvaluate(module);
}

/** Foundry's dice default to the relay while rolls go through it (a user's per-die choice still wins). */
export function applyDefaultMethod(/** @type {TableRelayModule} */ module) {
  const fulfillment = module.env.CONFIG.Dice.fulfillment;
  if (module.rollsThroughRelay()) fulfillment.defaultMethod = METHOD;
  else if (fulfillment.defaultMethod === METHOD) fulfillment.defaultMethod = module.previousMethod;
}

/** Every roll goes through the relay: the world says so and this browser is set up for it. */
export function rollsThroughRelay(/** @type {TableRelayModule} */ module) {
  return module.setting("rolls") === "all" && Boolean(relayAddress(module.setting("relayUrl"))) && Boolean(module.setting("token"));
}

/** Wrap Roll#evaluate so every face a roll is known to need is asked for in one request. */
function wrapEvaluate(/** @type {TableRelayModule} */ module) {
  const Roll = module.env.foundry?.dice?.Roll ?? module.env.Roll;
  const original = Roll.prototype.evaluate;
  Roll.prototype.evaluate = function evaluateThroughRelay(/** @type {any} */ options = {}) {
    if (!module.rollsThroughRelay() || options.minimize || options.maximize) return original.call(this, options);
    return evaluate(module, this, options, original);
  };
}

/**
 * @param {any} roll
 * @param {any} options
 * @param {(options: any) => Promise<any>} original
 */
async function evaluate(/** @type {TableRelayModule} */ module, roll, options, original) {
  if (roll.options?.tablerelay) return original.call(roll, options); // evaluated through us already (a nested call)
  const claim = claimOf(module, roll);
  if (claim) {
    // A game system's roll the relay resolves (systems/): its dice show the faces of the relay's event.
    const { event } = await resolveClaim(module, roll, claim);
    const evaluated = await original.call(roll, options);
    compareClaim(claim, event, roll);
    return evaluated;
  }
  /** @type {Partial<Record<string, string>>} the fulfillment method per denomination (d4 … d100) */
  const config = module.game.settings.get("core", "diceConfiguration") ?? {};
  const fallback = module.env.CONFIG.Dice.fulfillment.defaultMethod;
  const methodOf = (/** @type {any} */ t) => config[t.denomination] || fallback;
  const terms = (roll.dice ?? []).filter((/** @type {any} */ t) => methodOf(t) === METHOD);
  const mode = roll.options?.messageMode ?? roll.options?.rollMode ?? chosenMode(module.game);
  let visibility = visibilityOf(mode);
  // Foundry evaluates a blind roll in the roller's own browser, so the roller's client must see its faces.
  if (visibility === "blind") visibility = "gm";
  const about = { formula: String(roll.formula ?? "").slice(0, 200), visibility };
  const context = await module.broker.prefetch(terms, about);
  // Dice the user set to another method (typed in by hand, say) make the whole roll not the relay's: its
  // message says so itself, as every other client's check of it would.
  const others = (roll.dice ?? []).filter((/** @type {any} */ t) => methodOf(t) !== METHOD);
  if (others.length && context.via) {
    const dice = [...new Set(others.map((/** @type {any} */ t) => `${t.denomination} (${methodOf(t)})`))].join(", ");
    Object.assign(context, { via: false, reason: module.text("TABLERELAY.Reason.OtherMethod", { dice }) });
  }
  const unresolved = module.unresolved.get(roll);
  if (unresolved) context.unresolved = unresolved;
  roll.options = { ...(roll.options ?? {}), tablerelay: context };
  return original.call(roll, options);
}

/**
 * The faces broker's request (fulfillment.mjs): the dice rolled by the relay as one faces roll.
 * @param {TableRelayModule} module
 * @param {import("./fulfillment.mjs").Request} request
 */
export async function requestFaces(module, { dice, about }) {
  const client = connectedClient(module);
  /** @type {import("./client.mjs").Intent} */
  const intent = { system: "faces", dice };
  if (about.formula) intent.formula = about.formula;
  const rolled = client.roll(intent, { visibility: about.visibility, label: about.label });
  const event = await withTimeout(rolled, FACES_TIMEOUT_MS, () =>
    module.text("TABLERELAY.Reason.Timeout", { seconds: String(FACES_TIMEOUT_MS / 1000) }),
  );
  if (event.sealed || !event.result) throw new Error(module.text("TABLERELAY.Reason.Sealed"));
  const room = client.room?.id;
  return {
    seq: event.seq,
    epoch: event.epoch,
    room,
    values: event.result.dice.map((/** @type {{ value: number }} */ d) => d.value),
    signature: room ? signatureOf(event, room) : null,
  };
}

/** The relay could not roll a roll's faces: say so once per outage, or at every refused roll. */
export function tellOutage(/** @type {TableRelayModule} */ module, /** @type {string} */ reason) {
  const refuse = module.setting("unreachable") === "refuse";
  if (refuse) module.notify("error", "TABLERELAY.Notify.OutageRefused", { reason });
  else if (!module.outage) module.notify("warn", "TABLERELAY.Notify.OutageFallback", { reason });
  module.outage = true;
}

/** preCreateChatMessage: a roll evaluated here carries where its faces came from, for every client to see. */
export function markOwnRoll(/** @type {TableRelayModule} */ module, /** @type {ChatMessage.Implementation} */ message) {
  if (message.flags?.[FLAG_SCOPE]) return;
  const rolls = message.rolls ?? [];
  if (!rolls.length || !module.rollsThroughRelay()) return;
  const contexts = rolls.map((r) => r.options?.tablerelay);
  const resolved = contexts.length === 1 ? contexts[0]?.event : undefined;
  if (resolved) {
    // A game system's roll the relay resolved: the message shows that relay event, checked as a relay roll.
    message.updateSource({ flags: { [FLAG_SCOPE]: resolved } });
    return;
  }
  const via = contexts.every((c) => c?.via === true);
  /** @type {import("./messages.mjs").MessageFlags} */
  const flags = { via, seqs: contexts.flatMap((c) => c?.seqs ?? []) };
  const signatures = contexts.flatMap((c) => c?.signatures ?? []);
  if (signatures.length) flags.signatures = signatures;
  const known = contexts.find((c) => c?.room);
  if (known) Object.assign(flags, { room: known.room, epoch: known.epoch });
  // The reason is stored in the message's flags, so it is in the language of the client that rolled.
  if (!via) flags.reason = contexts.find((c) => c?.reason)?.reason ?? module.text("TABLERELAY.Reason.WithoutRelay");
  const unresolved = contexts.find((c) => c?.unresolved)?.unresolved;
  if (unresolved) flags.unresolved = unresolved;
  message.updateSource({ flags: { [FLAG_SCOPE]: flags } });
}
