// The Draw Steel system's power rolls resolved by the relay (docs/foundry.md, "Draw Steel").
//
// Read from the system's source (MetaMorphic-Digital/draw-steel; docs/foundry.md names the commits): the
// system fires no roll hooks. Its roll dialogs are ApplicationV2s (so Foundry calls `render<ClassName>` when
// one renders) that keep their final choices when submitted and resolve their opener when they close (a
// "close" listener added before they render):
// - 0.10/0.11 (Foundry v13): `PowerRoll.prompt` opens `PowerRollDialog`, a DSApplication whose `config`
//   (resolved when it closes) holds `rolls`, one `{edges, banes, bonuses, target}` per target (or the modifiers
//   alone), and `rollMode` (v13's roll modes). It evaluates a base roll (`{baseRoll: true}`, no flavor), then one
//   roll per context whose first term is a copy of the base roll's evaluated 2d10 (`RollTerm.fromData`, for Dice
//   So Nice), and a test or ability posts ONE message whose `rolls` hold the base roll (the targets' rolls sit
//   in the message's parts).
// - 1.0 (Foundry v14): `PowerRollDialog.create` (a test: `rollCharacteristic`) and
//   `AbilityConfigurationDialog.create` (an ability: `use`) resolve with the same `config`, its mode
//   `messageMode` (v14's message modes). A test evaluates one PowerRoll made with its context's options (its
//   flavor set) and posts it; an ability evaluates a base PowerRoll of the formula alone (no flavor), then one
//   roll per target whose first term IS the base roll's 2d10, and posts ONE message whose `rolls` hold the base
//   roll (the targets' rolls in its parts, by tier).
// - the earlier prompt form (before 0.10): the dialog's `finalContext` holds the list itself, the base roll has
//   no flavor and each target's roll, sharing its 2d10, is posted as its own message.
// A PowerRoll adds its edge or bane (±2 for one net) and its bonuses to its formula itself.
//
// The module listens to the dialog's close too (after the system's listener, so it reads the same final
// choices before the system goes on). The first power roll then evaluated sends one `drawsteel.ability`
// intent: the formula's numbers (less the roll's own edge and bonus terms) as the characteristic, each target's
// edges, banes and bonus, and, when that roll is a base roll, one more target with none of them, which is the
// base roll itself (so its message checks against the relay's total for it). Its 2d10 shows the relay's faces;
// each roll names the event and its target, and where the system's tier differs from the relay's the roll's
// card (an ability's one message, through its base roll) carries the mismatch: a red mark on every client.

import { claimRoll, relayResolves, visibilityFor } from "./relayed.mjs";

/** @typedef {import("../module.mjs").TableRelayModule} TableRelayModule */
/** @typedef {import("./relayed.mjs").Claim} Claim */

export const SYSTEM_ID = "draw-steel";

/** The tiers' entries the relay's ability roll needs; the system's own card shows its ability's text. */
const TIERS = ["tier 1", "tier 2", "tier 3"];

/** The name of the base roll's own target in the relay's intent: the 2d10 and the formula, nothing else. */
export const BASE_TARGET = "base roll (no target's modifiers)";

/**
 * @typedef {object} PowerContext  one target's choices (or the roll's own, with no target)
 * @property {number} [edges]
 * @property {number} [banes]
 * @property {number} [bonuses]
 * @property {string} [target]  the target actor's uuid
 */

/**
 * @typedef {object} PowerPrompt  a dialog's final choices, waiting for its rolls
 * @property {PowerContext[]} contexts
 * @property {Promise<{ event: any, room: string }>|null} pending  the relay's event, once the first roll sent it
 * @property {object|null} die  the first roll's 2d10 term, which each target's roll shares
 * @property {any} base  the base roll, when the first roll was one (its context carries the targets' mismatches)
 * @property {number} next  the index of the next target's roll
 * @property {Claim["visibility"]} visibility
 */

/** The dialogs whose final choices a power roll follows, by the names Foundry's render hooks carry. */
const DIALOGS = ["PowerRollDialog", "AbilityConfigurationDialog"];

/** Watch the system's power roll dialogs (init), when Draw Steel is the world's system. */
export function installDrawSteel(/** @type {TableRelayModule} */ module) {
  if (module.game.system?.id !== SYSTEM_ID) return;
  /** @type {any} the system's application hooks, which fvtt-types does not declare */
  const Hooks = module.env.Hooks;
  /** @type {WeakSet<object>} */
  const watched = new WeakSet();
  const watch = (/** @type {any} */ dialog) => {
    if (watched.has(dialog) || typeof dialog?.addEventListener !== "function") return;
    watched.add(dialog);
    dialog.addEventListener("close", () => dialogClosed(module, dialog), { once: true });
  };
  for (const name of DIALOGS) Hooks.on(`render${name}`, watch);
  module.claimers.push((roll) => claimPower(module, roll));
}

/** A dialog closed: its final choices, if it was submitted, wait for the rolls it opens. */
function dialogClosed(/** @type {TableRelayModule} */ module, /** @type {any} */ dialog) {
  // 0.10+: DSApplication#config ({rolls, rollMode|messageMode, …}); the prompt form: finalContext (the list).
  const chosen = dialog.config ?? dialog.finalContext;
  const contexts = Array.isArray(chosen) ? chosen : chosen?.rolls;
  if (!Array.isArray(contexts) || !contexts.length || !relayResolves(module, "drawSteelRolls")) return;
  const mode = Array.isArray(chosen) ? undefined : (chosen.messageMode ?? chosen.rollMode);
  module.powerPrompt = { contexts, pending: null, die: null, base: null, next: 0, visibility: visibilityFor(module, mode) };
}

/** The signed sum of a roll's number terms (the characteristic and bonuses of its formula), or null. */
function numbers(/** @type {any[]} */ terms) {
  let total = 0;
  let sign = 1;
  for (const term of terms.slice(1)) {
    if (typeof term?.operator === "string") sign = term.operator === "-" ? -1 : 1;
    else if (Number.isInteger(term?.number) && term.faces === undefined) total += sign * term.number;
    else return null; // more dice, or a term the rules core does not read
  }
  return total;
}

/** Is this a PowerRoll (its netBoon) whose first term is the 2d10 of a power roll? */
function isPowerRoll(/** @type {any} */ roll) {
  const term = roll?.terms?.[0];
  return Boolean(roll) && "netBoon" in roll && Boolean(term) && Number(term.faces) === 10 && Number(term.number) === 2;
}

/**
 * Is `term` the base roll's 2d10: the same term (1.0, the prompt form), or a copy of it made from its data
 * once evaluated (0.10/0.11), which shows the same results?
 */
function sameDie(/** @type {any} */ term, /** @type {any} */ die) {
  if (term === die) return true;
  const results = (/** @type {any} */ t) => JSON.stringify((t?.results ?? []).map((/** @type {any} */ r) => [r.result, r.active !== false]));
  return Boolean(term && die?.results?.length) && Number(term.faces) === Number(die.faces) && Number(term.number) === Number(die.number) && results(term) === results(die);
}

/** A count from a context: a whole number, at least 0, at most `max`. */
const count = (/** @type {unknown} */ n, max = Infinity) => Math.max(0, Math.min(max, Math.trunc(Number(n)) || 0));

/** The edge or bane term a PowerRoll adds to its own formula (±2 for one net edge or bane), and its bonuses. */
function ownTerms(/** @type {any} */ roll) {
  const net = count(roll.options?.edges, 2) - count(roll.options?.banes, 2);
  return (Math.abs(net) === 1 ? 2 * net : 0) + (Math.trunc(Number(roll.options?.bonuses)) || 0);
}

/**
 * The `drawsteel.ability` intent for a dialog's first power roll and its final contexts, or null.
 * @param {any} roll  the first PowerRoll evaluated: a base roll (the formula alone), or a test's one roll
 * @param {PowerContext[]} contexts
 * @param {boolean} base  the roll is a base roll: it gets a target of its own, last
 * @returns {import("../client.mjs").Intent|null}
 */
export function powerIntent(roll, contexts, base) {
  if (!isPowerRoll(roll)) return null;
  const sum = numbers(roll.terms);
  if (sum === null) return null;
  const targets = contexts.map((c, i) => {
    /** @type {{ name: string, edges: number, banes: number, bonus?: number }} */
    const target = { name: String(c.target ?? `target ${i + 1}`).slice(0, 100), edges: count(c.edges, 2), banes: count(c.banes, 2) };
    const bonus = Math.trunc(Number(c.bonuses)) || 0;
    if (bonus) target.bonus = bonus;
    return target;
  });
  if (base) targets.push({ name: BASE_TARGET, edges: 0, banes: 0 });
  return { system: "drawsteel.ability", characteristics: { M: sum - ownTerms(roll) }, roll_with: "M", tiers: TIERS, targets };
}

/** The system's tier for a roll against the relay's for that target: a sentence when they differ. */
function tierMismatch(/** @type {any} */ event, /** @type {number} */ target, /** @type {any} */ roll) {
  const relay = event.result?.targets?.[target]?.tier;
  const system = Number(roll.product);
  return relay === system ? null : `${String(event.result?.targets?.[target]?.name ?? target + 1)}: tier ${system}, the relay's tier ${relay}`;
}

/**
 * A claim of one target of the prompt's event for a roll; an ability's base roll keeps every target's
 * mismatch too, since its message is the one card all of them share.
 * @returns {Claim}
 */
function targetClaim(/** @type {PowerPrompt} */ prompt, /** @type {number} */ target, /** @type {Claim["faces"]} */ faces) {
  const base = prompt.base;
  return {
    pending: /** @type {Promise<{ event: any, room: string }>} */ (prompt.pending),
    faces,
    visibility: prompt.visibility,
    target,
    compare: (event, evaluated) => {
      const mismatch = tierMismatch(event, target, evaluated);
      const shared = base && base !== evaluated ? base.options?.tablerelay : null;
      if (mismatch && shared?.event) {
        const before = shared.event.mismatch;
        shared.event = { ...shared.event, mismatch: before ? `${before}; ${mismatch}` : mismatch };
      }
      return mismatch;
    },
  };
}

/**
 * A power roll about to evaluate while a dialog's final choices wait: the first sends the intent and takes
 * the relay's faces; each target's roll (sharing the base roll's 2d10) names the event and its target.
 * @returns {Claim|undefined}
 */
function claimPower(/** @type {TableRelayModule} */ module, /** @type {any} */ roll) {
  const prompt = module.powerPrompt;
  if (!prompt || !isPowerRoll(roll)) return undefined;
  const die = roll.terms[0];
  if (!prompt.pending) {
    if (die.results?.length) return undefined;
    // A test's roll is made with its context's options and a flavor; a base roll with the formula alone.
    const base = roll.options?.flavor === undefined;
    if (!base && prompt.contexts.length !== 1) return undefined;
    const intent = powerIntent(roll, prompt.contexts, base);
    if (!intent) {
      module.powerPrompt = null;
      return undefined;
    }
    const faces = (/** @type {any} */ result) => /** @type {Array<[any, number[]]>} */ ([[die, result.dice.map((/** @type {{ value: number }} */ d) => d.value)]]);
    const claim = claimRoll(module, roll, intent, {
      visibility: prompt.visibility,
      label: typeof roll.options?.flavor === "string" ? roll.options.flavor : undefined,
      faces,
    });
    Object.assign(prompt, { pending: claim.pending, die, base: base ? roll : null });
    if (!base) module.powerPrompt = null; // a test: its one roll is its one target
    const own = targetClaim(prompt, base ? prompt.contexts.length : 0, faces);
    Object.assign(claim, { target: own.target, compare: own.compare });
    return claim;
  }
  if (!sameDie(die, prompt.die)) return undefined;
  const target = prompt.next++;
  if (prompt.next >= prompt.contexts.length) module.powerPrompt = null;
  return targetClaim(prompt, target, () => []);
}
