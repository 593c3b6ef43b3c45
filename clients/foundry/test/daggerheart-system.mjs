// A harness of the Daggerheart system's roll entry points, written from the system's source (Foundryborne/
// daggerheart; docs/foundry.md names the commits read): DHRoll.build's sequence of hooks and steps for a
// DualityRoll (module/dice/dhRoll.mjs), the roll's dice and modifiers (d20Roll.mjs, dualityRoll.mjs), the
// outcome it computes from its own dice (postEvaluate), its Hope/Fear/Stress bookkeeping
// (addDualityResourceUpdates, skipped under `config.skips.resources`), and its chat message with the roll
// mode applied. It is not the system: it passes the module the data the system passes, in the same order.

import assert from "node:assert/strict";
import { actAs } from "./harness-classes.mjs";

/** The system's character actor, as much as the module and the system's bookkeeping touch: its Hope. */
export class HarnessActor {
  constructor({ id, name, hope = 0, experiences = {} }) {
    Object.assign(this, { id, name, uuid: `Actor.${id}` });
    this.system = { resources: { hope: { value: hope, max: 6 }, stress: { value: 0 } }, experiences };
    this.updates = [];
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

/** A user's Foundry roll mode as the system's message takes it (ChatMessage.applyRollMode). */
function rollModeData(client, mode) {
  const gms = client.world.users.filter((u) => u.isGM).map((u) => u.id);
  if (mode === "gmroll") return { whisper: [...new Set([...gms, client.userId])] };
  if (mode === "blindroll") return { whisper: gms, blind: true };
  if (mode === "selfroll") return { whisper: [client.userId] };
  return {};
}

/**
 * The Daggerheart system in one harness client: its Fear setting registered (as the system registers it), and
 * its duality roll.
 */
export function daggerheartSystem(client) {
  client.game.settings.register("daggerheart", "ResourcesFear", { scope: "world", config: false, type: Number, default: 0 });
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
        selectedRollMode: rollMode,
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
      const created = await client.ChatMessage.create({ speaker: { alias: adversary.name }, rolls: [roll], ...rollModeData(client, rollMode) });
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
        selectedRollMode: rollMode,
        title: `${actor.name}: Agility`,
      };
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
      // addDualityResourceUpdates: the system's own Hope, Stress and Fear, unless skipped.
      if (!config.skips?.resources && config.actionType !== "reaction") {
        if (config.roll.isCritical || config.roll.result.duality === 1) actor.system.resources.hope.value += 1;
        if (config.roll.result.duality === -1) {
          const gm = [...client.world.clients].find((c) => c.game.user.isGM);
          const now = gm.game.settings.get("daggerheart", "ResourcesFear");
          await gm.game.settings.set("daggerheart", "ResourcesFear", now + 1);
        }
      }
      const created = await client.ChatMessage.create({ speaker: { alias: actor.name }, rolls: [roll], ...rollModeData(client, rollMode) });
      return { config, message: created, roll };
    },
  };
}
