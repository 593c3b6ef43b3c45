// A harness of the Draw Steel system's power roll entry point, written from the system's source
// (MetaMorphic-Digital/draw-steel, src/module/rolls/power.mjs and src/module/apps/power-roll-dialog.mjs;
// docs/foundry.md names the commits read): `PowerRoll.prompt` opens a PowerRollDialog, which Foundry renders
// (the `renderPowerRollDialog` hook) and which, submitted, keeps one `{edges, banes, target}` per target
// (each target's own plus the roll's, capped at 2) in `finalContext` and resolves the prompt when it closes;
// then one base roll is evaluated and each target gets a roll sharing its 2d10, with its own edge or bane
// (±2 for one net, a tier up or down for two), evaluated and posted (Roll#toMessage). Version 1.0 makes the
// base roll with `{baseRoll: true}` and returns it first; 0.10/0.11 make it with no options.

import { actAs } from "./harness-classes.mjs";

/** A number term as the harness's rolls hold one (a bane's −2 is a negative number here). */
function numberTerm(n) {
  return { number: n, toJSON: () => ({ class: "NumericTerm", options: {}, evaluated: true, number: n }) };
}

/**
 * The Draw Steel system in one harness client. `version` is 0 (0.10/0.11) or 1 (1.0); `wrongTier` makes a
 * system whose tier is not the rules' (the harness of a modified client).
 */
export function drawSteelSystem(client, { version = 1, wrongTier = false } = {}) {
  class PowerRoll extends client.Roll {
    constructor(formula = "2d10", data = {}, options = {}) {
      super(formula, data, options);
      this.options.edges = Math.max(0, Math.min(2, this.options.edges ?? 0));
      this.options.banes = Math.max(0, Math.min(2, this.options.banes ?? 0));
      this.options.criticalThreshold ??= 19;
      if (Math.abs(this.netBoon) === 1) this.terms.push(numberTerm(this.netBoon > 0 ? 2 : -2));
    }
    get netBoon() {
      return this.options.edges - this.options.banes;
    }
    get product() {
      if (!this._evaluated) return undefined;
      let tier;
      if (this.dice[0].total >= this.options.criticalThreshold) tier = 3;
      else {
        tier = 1 + Number(this.total >= 12) + Number(this.total >= 17);
        tier = Math.max(1, Math.min(3, tier + this.netBoon - Math.sign(this.netBoon)));
      }
      return wrongTier ? (tier % 3) + 1 : tier;
    }
    async toMessage(data = {}) {
      if (!this._evaluated) await this.evaluate();
      // Roll#toMessage applies the user's roll mode (ChatMessage.applyRollMode).
      const gms = client.world.users.filter((u) => u.isGM).map((u) => u.id);
      const mode = client.rollMode;
      const audience = mode === "gmroll" ? { whisper: [...new Set([...gms, client.userId])] } : mode === "selfroll" ? { whisper: [client.userId] } : mode === "blindroll" ? { whisper: gms, blind: true } : {};
      return client.ChatMessage.create({ ...data, rolls: [this], ...audience });
    }
  }
  class PowerRollDialog extends EventTarget {
    constructor(options) {
      super();
      this.options = options;
      this.finalContext = undefined;
    }
    render() {
      client.Hooks.callAll("renderPowerRollDialog", this, {}, this.options.context, {});
    }
    /** The user's submit: the combined modifiers per target (or the modifiers alone), then the dialog closes. */
    submit() {
      const { modifiers, targets } = this.options.context;
      if (!targets?.length) this.finalContext = [{ ...modifiers }];
      else {
        this.finalContext = targets.map((t) => ({
          edges: Math.min(2, t.modifiers.edges + modifiers.edges),
          banes: Math.min(2, t.modifiers.banes + modifiers.banes),
          target: t.actor,
        }));
      }
      this.dispatchEvent(new Event("close"));
    }
    static prompt(options) {
      return new Promise((resolve) => {
        const dialog = new this(options);
        dialog.addEventListener("close", () => resolve(dialog.finalContext ?? null), { once: true });
        dialog.render();
        dialog.submit();
      });
    }
  }
  return {
    PowerRoll,
    /** PowerRoll.prompt with `evaluation: "message"`: the characteristic in the formula, per-target modifiers. */
    async prompt({ formula = "2d10", data = {}, modifiers = {}, targets, type = "ability", speaker = { alias: "Hero" } }) {
      actAs(client);
      client.world.actingUser = client.userId;
      modifiers.edges ??= 0;
      modifiers.banes ??= 0;
      const contexts = await PowerRollDialog.prompt({ context: { modifiers, targets } });
      if (!contexts) return null;
      const baseRoll = new PowerRoll(formula, data, version >= 1 ? { baseRoll: true, type } : { type });
      await baseRoll.evaluate();
      const out = version >= 1 ? [baseRoll] : [];
      for (const context of contexts) {
        const roll = new PowerRoll(formula, data, { flavor: "Power Roll", type, ...context });
        roll.terms[0] = baseRoll.terms[0];
        out.push(await roll.toMessage({ speaker }));
      }
      return { baseRoll, messages: out.filter((m) => m !== baseRoll) };
    },
  };
}
