// The Draw Steel system's power rolls resolved by the relay (docs/foundry.md, "Draw Steel").
//
// Read from the system's source (MetaMorphic-Digital/draw-steel, src/module/rolls/power.mjs and
// src/module/apps/power-roll-dialog.mjs): the system fires no roll hooks. `PowerRoll.prompt(options)` opens a
// `PowerRollDialog` (an ApplicationV2, so Foundry calls `renderPowerRollDialog` when it renders), which on
// submit keeps its final choices in `dialog.finalContext` (one `{edges, banes, target}` per target, or the
// modifiers alone) and, closed, resolves the prompt with them (its "close" listener, added before it
// renders). The prompt then evaluates one base roll (`2d10` plus the formula's numbers) and builds a roll per
// context whose first term is the base roll's 2d10, each with its own edges and banes, and its tier
// (`PowerRoll#product`).
//
// The module listens to the dialog's close too (after the system's): from its final context it knows every
// target's edges and banes before the base roll evaluates. The base roll then sends one `drawsteel.ability`
// intent (its numbers as the characteristic, each target's edges and banes) and its 2d10 shows the relay's
// faces; each target's roll names the event and that target, and where the system's tier differs from the
// relay's, its card carries the mismatch (a red mark on every client).

import { claimRoll, relayResolves, visibilityFor } from "./relayed.mjs";

/** @typedef {import("../module.mjs").TableRelayModule} TableRelayModule */

export const SYSTEM_ID = "draw-steel";

/** The tiers' entries the relay's ability roll needs; the system's own card shows its ability's text. */
const TIERS = ["tier 1", "tier 2", "tier 3"];

/**
 * @typedef {object} PowerPrompt  a dialog's final choices, waiting for the prompt's base roll
 * @property {Array<{ edges?: number, banes?: number, target?: string }>} contexts
 * @property {Promise<{ event: any, room: string }>|null} pending  the relay's event, once the base roll sent it
 * @property {object|null} die  the base roll's 2d10 term, which each target's roll shares
 * @property {number} next  the index of the next target's roll
 * @property {import("./relayed.mjs").Claim["visibility"]} visibility
 */

/** Watch the system's power roll dialogs (init), when Draw Steel is the world's system. */
export function installDrawSteel(/** @type {TableRelayModule} */ module) {
  if (module.game.system?.id !== SYSTEM_ID) return;
  /** @type {any} the system's application hook, which fvtt-types does not declare */
  const Hooks = module.env.Hooks;
  /** @type {WeakSet<object>} */
  const watched = new WeakSet();
  Hooks.on("renderPowerRollDialog", (/** @type {any} */ dialog) => {
    if (watched.has(dialog) || typeof dialog?.addEventListener !== "function") return;
    watched.add(dialog);
    dialog.addEventListener(
      "close",
      () => {
        const contexts = dialog.finalContext;
        if (!Array.isArray(contexts) || !contexts.length || !relayResolves(module, "drawSteelRolls")) return;
        module.powerPrompt = { contexts, pending: null, die: null, next: 0, visibility: visibilityFor(module, null) };
      },
      { once: true },
    );
  });
  module.claimers.push((roll) => claimPower(module, roll));
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

/** Is this the 2d10 of a power roll? */
function powerDie(/** @type {any} */ term) {
  return Boolean(term) && Number(term.faces) === 10 && Number(term.number) === 2;
}

/**
 * The `drawsteel.ability` intent for a prompt's base roll and its final contexts, or null.
 * @param {any} roll  the base PowerRoll (2d10 and the formula's numbers, no edge or bane of its own)
 * @param {PowerPrompt["contexts"]} contexts
 * @returns {import("../client.mjs").Intent|null}
 */
export function powerIntent(roll, contexts) {
  const terms = roll?.terms ?? [];
  if (!powerDie(terms[0])) return null;
  const characteristic = numbers(terms);
  if (characteristic === null) return null;
  const targets = contexts.map((c, i) => ({
    name: String(c.target ?? `target ${i + 1}`).slice(0, 100),
    edges: Math.max(0, Math.min(2, Number(c.edges) || 0)),
    banes: Math.max(0, Math.min(2, Number(c.banes) || 0)),
  }));
  return { system: "drawsteel.ability", characteristics: { M: characteristic }, roll_with: "M", tiers: TIERS, targets };
}

/**
 * A power roll about to evaluate while a prompt's final choices wait: the base roll sends the intent and
 * takes the relay's faces; each target's roll (sharing the base roll's 2d10) names the event and its target.
 * @returns {import("./relayed.mjs").Claim|undefined}
 */
function claimPower(/** @type {TableRelayModule} */ module, /** @type {any} */ roll) {
  const prompt = module.powerPrompt;
  if (!prompt) return undefined;
  const die = roll?.terms?.[0];
  if (!prompt.pending) {
    if (!powerDie(die) || die.results?.length) return undefined;
    const intent = powerIntent(roll, prompt.contexts);
    if (!intent) {
      module.powerPrompt = null;
      return undefined;
    }
    const claim = claimRoll(module, roll, intent, {
      visibility: prompt.visibility,
      label: typeof roll.options?.flavor === "string" ? roll.options.flavor : undefined,
      faces: (result) => [[die, result.dice.map((/** @type {{ value: number }} */ d) => d.value)]],
    });
    Object.assign(prompt, { pending: claim.pending, die });
    return claim;
  }
  if (die !== prompt.die) return undefined;
  const target = prompt.next++;
  if (prompt.next >= prompt.contexts.length) module.powerPrompt = null;
  /** @type {import("./relayed.mjs").Claim} */
  return {
    pending: prompt.pending,
    faces: () => [],
    visibility: prompt.visibility,
    target,
    compare: (event, evaluated) => {
      const relay = event.result?.targets?.[target]?.tier;
      const system = Number(evaluated.product);
      return relay === system ? null : `${String(event.result?.targets?.[target]?.name ?? target + 1)}: tier ${system}, the relay's tier ${relay}`;
    },
  };
}
