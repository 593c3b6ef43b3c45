// The Daggerheart system's duality rolls resolved by the relay (docs/foundry.md, "Daggerheart").
//
// Read from the system's source (Foundryborne/daggerheart, module/dice/dhRoll.mjs, d20Roll.mjs and
// dualityRoll.mjs; docs/foundry.md names the commits): `DualityRoll.build(config)` calls the hooks
// `daggerheart.preRollDuality(config, message)`, then, once its dialog has the final choices and the roll is
// built, `daggerheart.postDualityRollConfiguration(roll, config, message)` (synchronous: returning false stops
// the roll), evaluates the roll (dice[0] the Hope d12, dice[1] the Fear d12, dice[2] the advantage d6 when there
// is advantage or disadvantage), and then `daggerheart.postRollDuality(config, message)`. The same in 1.x
// (Foundry v13) and 2.x (v14), except the roll's mode: `config.selectedRollMode` (v13's roll modes) in 1.x,
// `config.selectedMessageMode` (v14's message modes) in 2.x. Its Hope, Fear and Stress bookkeeping
// (`DualityRoll.addDualityResourceUpdates`) is skipped when `config.skips.resources` is set; an earlier 1.x form
// did it in a `postRollDuality` handler that ignores `skips` (see `skipsHonoured`).
//
// At postDualityRollConfiguration the module sends a `daggerheart.duality` intent from that configuration and
// sets `config.skips.resources`; the roll's dice take the relay's faces (relayed.mjs), and the relay's
// resource events are written into the roller's character's Hope (here) and the system's Fear setting (the lead
// GM's mirror, connection.mjs). A roll the rules core does not cover (a rally die, dice among the modifiers,
// more than one Experience, other dice sizes) stays the system's own, with the relay's faces.

import { claimRoll, isMine, relayResolves, visibilityFor } from "./relayed.mjs";

/** @typedef {import("../module.mjs").TableRelayModule} TableRelayModule */

export const SYSTEM_ID = "daggerheart";

/** Hook the system's duality rolls and the relay's Hope events (init), when Daggerheart is the world's system. */
export function installDaggerheart(/** @type {TableRelayModule} */ module) {
  if (module.game.system?.id !== SYSTEM_ID) return;
  /** @type {any} the system's own hooks, which fvtt-types does not declare */
  const Hooks = module.env.Hooks;
  Hooks.on("daggerheart.postDualityRollConfiguration", (/** @type {any} */ roll, /** @type {any} */ config) => {
    dualityConfigured(module, roll, config);
  });
  // Registered after the system's own handlers (a system's init runs before a module's), so it runs after them.
  Hooks.on("daggerheart.postRollDuality", (/** @type {any} */ config) => {
    restoreSource(config);
    void clearCriticalStress(module, config);
  });
  // An adversary's attack (D20Roll, message type adversaryRoll) has no hook name of its own: the hooks of
  // every DHRoll ("" among them) fire for it, and for a duality roll too, which is claimed already by then.
  Hooks.on("daggerheart.postRollConfiguration", (/** @type {any} */ roll, /** @type {any} */ config) => {
    attackConfigured(module, roll, config);
  });
  Hooks.on("daggerheart.postRoll", (/** @type {any} */ config) => {
    attackResolved(config);
  });
  Hooks.on("tablerelay.event", (/** @type {any} */ event) => mirrorHope(module, event));
}

/** Duality rolls the relay resolves whose critical would clear a Stress, by their configuration. */
const stressOwed = new WeakSet();

/**
 * A critical success clears a Stress (the system's addDualityResourceUpdates, which the skipped bookkeeping
 * left out; the relay keeps no Stress): done here as the system would have done it, only where it would have
 * (its Hope and Fear automation on for this user, not a reaction, the actor not dead, defeated or unconscious).
 * The roll's dice show the relay's faces, so its critical is the relay's.
 */
async function clearCriticalStress(/** @type {TableRelayModule} */ module, /** @type {any} */ config) {
  if (!stressOwed.delete(config) || !config.roll?.isCritical) return;
  /** @type {any} the system's Automation setting, which fvtt-types does not declare */
  let automation = null;
  try {
    automation = module.game.settings.get(SYSTEM_ID, "Automation")?.hopeFear;
  } catch {
    return; // a system without the setting keeps no Stress automatically either
  }
  if (!(module.game.user.isGM ? automation?.gm : automation?.players)) return;
  /** @type {any} Foundry's global fromUuid */
  const env = module.env;
  const actor = await env.fromUuid?.(config.source?.actor);
  if (!actor || typeof actor.modifyResource !== "function") return;
  if (["dead", "defeated", "unconscious"].some((status) => actor.statuses?.has?.(status))) return;
  await actor.modifyResource([{ key: "stress", value: -1, total: 1, enabled: true }]);
}

/** The adversary attacks the relay resolves, by their configuration: the roll, and its event once evaluated. */
const attacks = new WeakMap();

/**
 * The roll's mode as the system chose it: `selectedMessageMode` (2.x, Foundry v14's message modes, which
 * `ChatMessage.create(…, {messageMode})` takes) or `selectedRollMode` (1.x, v13's roll modes).
 */
function modeOf(/** @type {any} */ roll, /** @type {any} */ config) {
  return config.selectedMessageMode ?? config.selectedRollMode ?? roll.options?.messageMode ?? roll.options?.rollMode;
}

/**
 * Does the system's duality roll honour `config.skips.resources`? Its `DualityRoll.addDualityResourceUpdates`
 * (1.x and 2.x read, module/dice/dualityRoll.mjs) returns early under it. The earlier form had no such method:
 * its `registerRollDiceHooks` (module/dice/dhRoll.mjs) adds a `daggerheart.postRollDuality` handler that gives
 * the roller's actor Hope (and Stress, and the GM Fear) through `modifyResource` whenever the world's Hope and
 * Fear automation is on for the roller, looking at no `skips`: beside the relay's, that Hope and Fear would be
 * counted twice.
 */
function skipsHonoured(/** @type {TableRelayModule} */ module) {
  /** @type {any} the system's roll classes (CONFIG.Dice.daggerheart), which fvtt-types does not declare */
  const dice = module.env.CONFIG.Dice;
  return typeof dice?.daggerheart?.DualityRoll?.addDualityResourceUpdates === "function";
}

/**
 * The Hope an Experience costs is the relay's to spend (`spend_hope`, atomically). The system's roll dialog
 * (D20RollDialog.selectExperience) adds that cost to `config.costs` as `{extKey, key: "hope", value: 1}`, and
 * the action spends the costs left enabled (`consume`) after the roll: disabled here, the Hope is spent once.
 */
function keepExperienceCost(/** @type {any} */ config) {
  const used = new Set(Array.isArray(config.experiences) ? config.experiences : []);
  for (const cost of Array.isArray(config.costs) ? config.costs : []) {
    if (cost?.key === "hope" && used.has(cost.extKey)) cost.enabled = false;
  }
}

/** Duality rolls whose `config.source.actor` is kept from the earlier form's handler, by their configuration. */
const hiddenSources = new WeakMap();

/**
 * The earlier form's `postRollDuality` handler returns at once when the configuration names no source actor,
 * before it changes any resource: the module takes the actor out of the configuration for the system's
 * handlers and puts it back in its own, which runs after them and before the message is made.
 */
function hideSource(/** @type {any} */ config) {
  const actor = config.source?.actor;
  if (!actor) return;
  hiddenSources.set(config, actor);
  delete config.source.actor;
}

function restoreSource(/** @type {any} */ config) {
  if (!config || !hiddenSources.has(config)) return;
  config.source.actor = hiddenSources.get(config);
  hiddenSources.delete(config);
}

/** The one Experience a roll uses and its value, 0 for none, or null for more than one (or an odd value). */
function experienceOf(/** @type {any} */ config) {
  const known = config?.data?.system?.experiences ?? {};
  const used = (Array.isArray(config?.experiences) ? config.experiences : []).filter((/** @type {string} */ key) => known[key]);
  if (used.length > 1) return null;
  const value = used.length ? Number(known[used[0]].value) : 0;
  return Number.isInteger(value) && value >= 0 ? value : null;
}

/**
 * The `daggerheart.attack` intent for a configured adversary D20Roll, or null where the rules core does not
 * cover it. Each target's Evasion is the roll's difficulty when it has one, else the target's (as
 * D20Roll.buildEvaluate reads them); an Experience costs the GM a Fear.
 * @param {any} roll @param {any} config
 * @returns {import("../client.mjs").Intent|null}
 */
export function attackIntent(roll, config) {
  const options = config?.roll ?? {};
  const mode = Number(options.advantage?.type ?? options.advantage ?? 0);
  const dice = roll?.dice ?? [];
  if (dice.length !== 1 || Number(dice[0].faces) !== 20 || Number(dice[0].number) !== (mode === 0 ? 1 : 2)) return null;
  const total = sum((options.modifiers ?? []).map((/** @type {any} */ m) => m?.value));
  const experience = experienceOf(config);
  if (total === null || experience === null) return null;
  const targets = [];
  for (const target of Array.isArray(config?.targets) ? config.targets : []) {
    const evasion = Number(options.difficulty ?? target?.difficulty ?? target?.evasion);
    if (!Number.isInteger(evasion)) return null;
    targets.push({ name: String(target?.name ?? target?.id ?? "target").slice(0, 100), evasion });
  }
  /** @type {import("../client.mjs").Intent} */
  const intent = { system: "daggerheart.attack", modifier: total - experience, targets };
  if (mode === 1) intent.advantage = true;
  if (mode === -1) intent.disadvantage = true;
  if (experience > 0) Object.assign(intent, { experience, spend_fear: true });
  const reaction = config?.actionType === "reaction";
  const threshold = reaction ? 20 : Number(config?.data?.criticalThreshold ?? 20);
  if (Number.isInteger(threshold) && threshold >= 1 && threshold <= 20 && threshold !== 20) intent.crit_threshold = threshold;
  return intent;
}

/** daggerheart.postRollConfiguration of an adversary's attack: the relay resolves it (a Fear spend included). */
function attackConfigured(/** @type {TableRelayModule} */ module, /** @type {any} */ roll, /** @type {any} */ config) {
  if (module.claims.has(roll) || roll?.constructor?.messageType !== "adversaryRoll") return;
  if (!relayResolves(module, "daggerheartRolls") || !config) return;
  const intent = attackIntent(roll, config);
  if (!intent) {
    module.unresolved.set(roll, "attack");
    return;
  }
  // The GM's Fear for an Experience is the relay's to spend, atomically: the system spends none of its own.
  config.skips = { ...(config.skips ?? {}), resources: true };
  const claim = claimRoll(module, roll, intent, {
    visibility: visibilityFor(module, modeOf(roll, config)),
    label: typeof config.title === "string" ? config.title : undefined,
    faces: (result) => [[roll.dice[0], result.dice.map((/** @type {{ value: number }} */ d) => d.value)]],
  });
  const entry = { roll, event: /** @type {any} */ (null) };
  attacks.set(config, entry);
  claim.pending.then(({ event }) => (entry.event = event), () => {});
}

/**
 * daggerheart.postRoll of an adversary's attack: each target's hit is the relay's; where the system had found
 * otherwise, the card carries the mismatch.
 */
function attackResolved(/** @type {any} */ config) {
  const entry = attacks.get(config);
  const targets = entry?.event?.result?.targets;
  if (!Array.isArray(targets) || !Array.isArray(config.targets)) return;
  attacks.delete(config);
  const differ = [];
  for (const [i, target] of config.targets.entries()) {
    const hit = Boolean(targets[i]?.hit);
    if (Boolean(target.hit) !== hit) differ.push(String(targets[i]?.name ?? i + 1));
    target.hit = hit;
  }
  if (config.roll && typeof config.roll === "object") config.roll.success = targets.some((t) => t.hit);
  const context = entry.roll.options?.tablerelay;
  if (differ.length && context?.event) context.event = { ...context.event, mismatch: `hit or miss on ${differ.join(", ")}` };
}

/** The sum of a list of numbers, or null when any entry is not a whole number. */
function sum(/** @type {unknown[]} */ values) {
  let total = 0;
  for (const v of values) {
    if (!Number.isInteger(v)) return null;
    total += /** @type {number} */ (v);
  }
  return total;
}

/** A term is one die of `faces` faces. */
function oneDie(/** @type {any} */ term, /** @type {number} */ faces) {
  return Boolean(term) && Number(term.faces) === faces && Number(term.number) === 1;
}

/**
 * The `daggerheart.duality` intent for a configured DualityRoll, or null where the rules core does not cover it.
 * @param {any} roll  the system's DualityRoll, built from the final configuration
 * @param {any} config  its configuration (roll.options is the same object in the system)
 * @returns {import("../client.mjs").Intent|null}
 */
export function dualityIntent(roll, config) {
  const options = config?.roll ?? {};
  const mode = Number(options.advantage?.type ?? options.advantage ?? 0);
  const dice = roll?.dice ?? [];
  const advantaged = mode === 1 || mode === -1;
  if (dice.length !== (advantaged ? 3 : 2) || !oneDie(dice[0], 12) || !oneDie(dice[1], 12)) return null;
  if (advantaged && !oneDie(dice[2], 6)) return null;
  // The system's modifiers: the trait, bonuses, and each Experience used (d20Roll.mjs, configureModifiers).
  const total = sum((options.modifiers ?? []).map((/** @type {any} */ m) => m?.value));
  if (total === null) return null; // a modifier of dice: not the rules core's duality roll
  const experience = experienceOf(config); // each Experience costs a Hope; the rules core spends one
  if (experience === null) return null;
  /** @type {import("../client.mjs").Intent} */
  const intent = { system: "daggerheart.duality", modifier: total - experience };
  if (mode === 1) intent.advantage = 1;
  if (mode === -1) intent.disadvantage = 1;
  if (experience > 0) Object.assign(intent, { experience, spend_hope: true });
  const difficulty = Number(options.difficulty);
  if (options.difficulty !== null && options.difficulty !== undefined && options.difficulty !== "" && Number.isInteger(difficulty)) {
    intent.difficulty = difficulty;
  }
  if (config?.actionType === "reaction" || roll?.options?.actionType === "reaction") intent.reaction = true;
  return intent;
}

/** Which of a DualityRoll's dice show which of the relay's faces: Hope, Fear, then the advantage die. */
export function dualityFaces(/** @type {any} */ roll, /** @type {any} */ result) {
  const dice = roll.dice ?? [];
  /** @type {Array<[any, number[]]>} */
  const faces = [
    [dice[0], [Number(result.hope_die)]],
    [dice[1], [Number(result.fear_die)]],
  ];
  if (result.advantage_die !== null && result.advantage_die !== undefined && dice[2]) faces.push([dice[2], [Math.abs(Number(result.advantage_die))]]);
  return faces;
}

/** daggerheart.postDualityRollConfiguration: the relay resolves the roll, the system keeps no resources for it. */
function dualityConfigured(/** @type {TableRelayModule} */ module, /** @type {any} */ roll, /** @type {any} */ config) {
  if (!relayResolves(module, "daggerheartRolls") || !config) return;
  const intent = config.tagTeamSelected ? null : dualityIntent(roll, config);
  if (!intent) {
    module.unresolved.set(roll, config.tagTeamSelected ? "tag team" : "duality");
    return;
  }
  config.skips = { ...(config.skips ?? {}), resources: true };
  if (!skipsHonoured(module)) hideSource(config);
  if (intent.spend_hope) keepExperienceCost(config);
  if (!intent.reaction) stressOwed.add(config);
  const label = typeof config.title === "string" ? config.title : typeof roll.title === "string" ? roll.title : undefined;
  claimRoll(module, roll, intent, {
    visibility: visibilityFor(module, modeOf(roll, config)),
    label,
    faces: (result) => dualityFaces(roll, result),
  });
}

/**
 * A Hope event of this user's participant: the relay's value written into the user's assigned character
 * (`system.resources.hope.value`, the system's actor data), so the sheet shows the relay's Hope.
 */
function mirrorHope(/** @type {TableRelayModule} */ module, /** @type {any} */ event) {
  if (event?.kind !== "resource" || event.name !== "hope" || !isMine(module, event.participant)) return;
  if (module.setting("daggerheartRolls") === false) return;
  /** @type {any} the system's character actor */
  const actor = module.game.user.character;
  const value = Number(event.value);
  if (!actor || !Number.isInteger(value) || actor.system?.resources?.hope?.value === value) return;
  void actor.update({ "system.resources.hope.value": value });
}
