// A harness of the Daggerheart system's roll entry points, written from the system's source (Foundryborne/
// daggerheart; docs/foundry.md names the commits read): DHRoll.build's sequence of hooks and steps for a
// DualityRoll (module/dice/dhRoll.mjs), the roll's dice and modifiers (d20Roll.mjs, dualityRoll.mjs), the
// outcome it computes from its own dice (postEvaluate), its Hope/Fear/Stress bookkeeping, and its chat message
// with the roll mode applied. It is not the system: it passes the module the data the system passes, in the
// same order. Three forms:
// - "1.x" (Foundry v13): `config.selectedRollMode` (v13's roll modes); the bookkeeping is
//   `DualityRoll.addDualityResourceUpdates`, which returns early under `config.skips.resources`;
// - "2.x" (Foundry v14): `config.selectedMessageMode` (v14's message modes, `ChatMessage.create(…, {messageMode})`),
//   `config.roll` rebuilt from the roll's options after it evaluates, the same skippable bookkeeping;
// - "early" (a 1.x form before addDualityResourceUpdates): `registerRollDiceHooks` adds a
//   `daggerheart.postRollDuality` handler (registered at the system's init, before any module's) that gives the
//   source actor Hope (and the GM Fear) through `modifyResource` whenever Hope/Fear automation is on, with no
//   look at `skips`.
// Hope/Fear automation (off by default in the system) is on here: the worst case for counting twice.

import assert from "node:assert/strict";
import { actAs } from "./harness-classes.mjs";

/** The system's character actor, as much as the module and the system's bookkeeping touch: its Hope. */
export class HarnessActor {
  constructor({ id, name, hope = 0, stress = 0, experiences = {} }) {
    Object.assign(this, { id, name, uuid: `Actor.${id}` });
    this.system = { resources: { hope: { value: hope, max: 6 }, stress: { value: stress, max: 6 } }, experiences };
    this.updates = [];
    /** The changes `modifyResource` was given, in order. */
    this.modified = [];
    /** The actor's status effects (the system skips a dead, defeated or unconscious actor's resources). */
    this.statuses = new Set();
  }
  /** The system's actor.modifyResource, as much as the module uses: Stress marked (+) or cleared (-). */
  async modifyResource(updates) {
    for (const { key, value } of updates) {
      assert.equal(key, "stress", "the module changes no resource of the system's but Stress");
      this.modified.push(value);
      this.system.resources.stress.value = Math.max(0, this.system.resources.stress.value + value);
    }
  }
  async update(changes) {
    assert.deepEqual(Object.keys(changes), ["system.resources.hope.value"], "the module writes the character's Hope only");
    const value = changes["system.resources.hope.value"];
    assert.ok(Number.isInteger(value) && value >= 0, "Hope is a count");
    this.updates.push(value);
    this.system.resources.hope.value = value;
    return this;
  }
}

const capitalize = (s) => s.charAt(0).toUpperCase() + s.slice(1);

/** v14's message modes by v13's roll modes. */
const MESSAGE_MODES = { publicroll: "public", gmroll: "gm", blindroll: "blind", selfroll: "self" };

/** A roll or message mode as the system's message takes it (ChatMessage.applyRollMode / applyMode). */
function rollModeData(client, mode) {
  const gms = client.world.users.filter((u) => u.isGM).map((u) => u.id);
  if (mode === "gmroll" || mode === "gm") return { whisper: [...new Set([...gms, client.userId])] };
  if (mode === "blindroll" || mode === "blind") return { whisper: gms, blind: true };
  if (mode === "selfroll" || mode === "self") return { whisper: [client.userId] };
  return {};
}

/** The Fear setting of the world, written by the first GM's client (a player's change goes there by socket). */
async function addFear(client, n) {
  const gm = [...client.world.clients].find((c) => c.game.user.isGM);
  const now = gm.game.settings.get("daggerheart", "ResourcesFear");
  await gm.game.settings.set("daggerheart", "ResourcesFear", now + n);
}

/**
 * The Daggerheart system in one harness client: its Fear setting registered (as the system registers it), and
 * its duality roll.
 */
export function daggerheartSystem(client, { form = "1.x" } = {}) {
  client.game.settings.register("daggerheart", "ResourcesFear", { scope: "world", config: false, type: Number, default: 0 });
  // The system's Automation setting (its hopeFear flags off by default in the system; on here).
  client.game.settings.register("daggerheart", "Automation", { scope: "world", config: false, type: Object, default: { hopeFear: { gm: true, players: true } } });
  /** The roll's mode in this form's configuration, from the user's roll mode. */
  const modeConfig = (rollMode) => (form === "2.x" ? { selectedMessageMode: MESSAGE_MODES[rollMode] } : { selectedRollMode: rollMode });
  const modeOf = (config) => config.selectedMessageMode ?? config.selectedRollMode;
  /** fromUuid for the actors this harness has rolled for. */
  const actors = new Map();
  /** @type {any} Foundry's global fromUuid, for the actors this harness has rolled for */
  (client).fromUuid = async (uuid) => actors.get(uuid) ?? null;
  /** DualityRoll: Hope d12, Fear d12, an advantage d6 when advantaged, then the modifiers. */
  class DualityRoll extends client.Roll {
    static messageType = "dualityRoll";
    get title() {
      return this.options.actionType === "reaction" ? "Reaction Roll" : "Duality Roll";
    }
    get dHope() {
      return this.dice[0];
    }
    get dFear() {
      return this.dice[1];
    }
  }
  /** D20Roll (an adversary's attack): its d20 (2d20 kept highest with advantage), then the modifiers. */
  class D20Roll extends client.Roll {
    static messageType = "adversaryRoll";
    get d20() {
      return this.dice[0];
    }
    get isCritical() {
      return this.d20.total >= (this.options.actionType === "reaction" ? 20 : (this.data.criticalThreshold ?? 20));
    }
  }
  /** addDualityResourceUpdates (1.x, 2.x): the roller's Hope and the GM's Fear, unless skipped. */
  async function addDualityResourceUpdates(config) {
    if (!config.source?.actor || config.actionType === "reaction" || config.skips?.resources) return;
    const actor = actors.get(config.source.actor);
    if (config.roll.isCritical || config.roll.result.duality === 1) actor.system.resources.hope.value += 1;
    if (config.roll.isCritical) await actor.modifyResource([{ key: "stress", value: -1, total: 1, enabled: true }]);
    if (config.roll.result.duality === -1) await addFear(client, 1);
  }
  if (form === "early") {
    // registerRollDiceHooks: at the system's init, so before the module's handlers.
    client.Hooks.on("daggerheart.postRollDuality", async (config) => {
      if (!config.source?.actor || config.roll.type === "reaction") return;
      const actor = actors.get(config.source.actor);
      if (!actor) return;
      if (config.roll.isCritical || config.roll.result.duality === 1) actor.system.resources.hope.value += 1;
      if (config.roll.result.duality === -1) await addFear(client, 1);
    });
  } else {
    DualityRoll.addDualityResourceUpdates = addDualityResourceUpdates;
  }
  client.CONFIG.Dice.daggerheart = { DualityRoll, D20Roll };
  return {
    DualityRoll,
    D20Roll,
    /**
     * DHRoll.build for an adversary's attack (hooks "" only): its attack modifier and chosen Experiences,
     * advantage (1 or 0), its targets' Evasions; D20Roll.buildEvaluate decides each target's hit.
     */
    async attack({ adversary, modifier = 0, experiences = [], advantage = 0, targets = [], rollMode = "publicroll" }) {
      actAs(client);
      client.world.actingUser = client.userId;
      const message = {};
      const config = {
        source: { actor: adversary.uuid },
        data: { system: { experiences: adversary.system.experiences }, criticalThreshold: 20 },
        experiences,
        roll: { advantage: { type: advantage }, difficulty: null, baseModifiers: [{ label: "Attack", value: modifier }] },
        targets: targets.map((t) => ({ ...t })),
        ...modeConfig(rollMode),
        title: `${adversary.name}: Attack`,
      };
      config.hooks = [""];
      for (const hook of config.hooks) if (client.Hooks.call(`daggerheart.preRoll${capitalize(hook)}`, config, message) === false) return null;
      const modifiers = [...config.roll.baseModifiers];
      for (const key of experiences.filter((k) => adversary.system.experiences[k])) modifiers.push({ label: adversary.system.experiences[key].name, value: adversary.system.experiences[key].value });
      config.roll.modifiers = modifiers;
      const formula = [advantage === 1 ? "2d20kh" : "1d20", ...modifiers.map((m) => String(m.value))].join(" + ");
      const roll = new D20Roll(formula, config.data, config);
      for (const hook of config.hooks) {
        if (client.Hooks.call(`daggerheart.post${capitalize(hook)}RollConfiguration`, roll, config, message) === false) return [];
      }
      await roll.evaluate();
      for (const target of config.targets) target.hit = roll.isCritical || roll.total >= (config.roll.difficulty ?? target.difficulty ?? target.evasion);
      config.roll = { ...config.roll, total: roll.total, success: config.targets.some((t) => t.hit) };
      for (const hook of config.hooks) if (client.Hooks.call(`daggerheart.postRoll${capitalize(hook)}`, config, message) === false) return null;
      const created = await client.ChatMessage.create({ speaker: { alias: adversary.name }, rolls: [roll], ...rollModeData(client, modeOf(config)) });
      return { config, message: created, roll };
    },
    /**
     * DHRoll.build for a duality roll: the character's trait and chosen Experiences, advantage (1 or 0; the
     * harness's formulas add only), the difficulty, reaction, roll mode. Resolves with the config and message.
     */
    async duality({ actor, trait = 0, experiences = [], advantage = 0, difficulty = null, reaction = false, rollMode = "publicroll", extraModifiers = [] }) {
      actAs(client);
      client.world.actingUser = client.userId;
      const message = {};
      const config = {
        source: { actor: actor.uuid },
        data: { system: { experiences: actor.system.experiences } },
        experiences,
        actionType: reaction ? "reaction" : "action",
        roll: { trait: "agility", advantage: { type: advantage }, difficulty, baseModifiers: [] },
        ...modeConfig(rollMode),
        title: `${actor.name}: Agility`,
      };
      actors.set(actor.uuid, actor);
      // D20RollDialog.selectExperience: each Experience chosen for a character costs a Hope, spent by the action.
      config.costs = experiences.filter((k) => actor.system.experiences[k]).map((k) => ({ extKey: k, key: "hope", value: 1 }));
      config.hooks = ["Duality", ""];
      for (const hook of config.hooks) if (client.Hooks.call(`daggerheart.preRoll${capitalize(hook)}`, config, message) === false) return null;
      // configureModifiers: the trait first, then each Experience the actor has.
      const modifiers = [{ label: "Agility", value: trait }, ...extraModifiers];
      for (const key of experiences.filter((k) => actor.system.experiences[k])) modifiers.push({ label: actor.system.experiences[key].name, value: actor.system.experiences[key].value });
      config.roll.modifiers = modifiers;
      const formula = ["1d12", "1d12", ...(advantage === 1 ? ["1d6"] : []), ...modifiers.map((m) => String(m.value))].join(" + ");
      const roll = new DualityRoll(formula, config.data, config);
      for (const hook of config.hooks) {
        if (client.Hooks.call(`daggerheart.post${capitalize(hook)}RollConfiguration`, roll, config, message) === false) return [];
      }
      await roll.evaluate();
      // 2.x's buildEvaluate: the configuration's roll rebuilt from the roll's own options.
      if (form === "2.x") config.roll = structuredClone({ ...config.roll, ...roll.options.roll });
      // postEvaluate: the outcome the system reads from its own dice.
      const hope = roll.dHope.total;
      const fear = roll.dFear.total;
      config.roll = {
        ...config.roll,
        total: roll.total,
        hope: { value: hope },
        fear: { value: fear },
        isCritical: hope === fear,
        result: { duality: hope > fear ? 1 : hope < fear ? -1 : 0, total: hope + fear },
      };
      if (difficulty !== null) config.roll.success = config.roll.isCritical || roll.total >= difficulty;
      for (const hook of config.hooks) if (client.Hooks.call(`daggerheart.postRoll${capitalize(hook)}`, config, message) === false) return null;
      assert.equal(config.source.actor, actor.uuid, "the message is made from the configuration with its source actor");
      const created = await client.ChatMessage.create({ speaker: { alias: actor.name }, rolls: [roll], ...rollModeData(client, modeOf(config)) });
      // dualityUpdate, after the message: the system's own Hope, Stress and Fear, unless skipped.
      if (form !== "early") await addDualityResourceUpdates(config);
      // The action's consume, after the roll: the costs left enabled.
      for (const cost of config.costs.filter((c) => c.enabled !== false)) actor.system.resources[cost.key].value -= cost.value;
      return { config, message: created, roll };
    },
  };
}
