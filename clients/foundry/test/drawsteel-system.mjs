// A harness of the Draw Steel system's power roll entry points, written from the system's source
// (MetaMorphic-Digital/draw-steel; docs/foundry.md names the commits read), in three forms:
// - "0.10" (0.10/0.11, Foundry v13): `PowerRoll.prompt` opens `PowerRollDialog` (an ApplicationV2, so Foundry
//   calls `renderPowerRollDialog`), a DSApplication whose `config` ({rolls, damage, skill, rollMode}) resolves
//   the prompt when it closes (its "close" listener added before it renders); it evaluates a base roll
//   (`{baseRoll: true}`), then one roll per context whose first term is a COPY of the base roll's evaluated 2d10
//   (`RollTerm.fromData`, for Dice So Nice); a test or an ability posts ONE message whose rolls are the base roll
//   (the system's message keeps the targets' rolls in its parts, which the harness's ChatMessage, holding the
//   fields the module reads, leaves out).
// - "1.0" (Foundry v14): `PowerRollDialog.create` (a test, `rollCharacteristic`) or
//   `AbilityConfigurationDialog.create` (an ability, `use`) resolve with the same config, its mode `messageMode`
//   (v14's message modes). A test evaluates one PowerRoll with its context's options and a flavor and posts it;
//   an ability evaluates a base PowerRoll of the formula alone, then one roll per target sharing its 2d10
//   (`{allowInteractive: false}`), and posts ONE message whose rolls are the base roll.
// - "prompt" (before 0.10): `PowerRoll.prompt` with the dialog's `finalContext`; a base roll, then one message
//   per target's roll.
// A PowerRoll adds its own edge or bane (±2 for one net) and its bonuses to its formula; its tier is
// `PowerRoll#product`. It is not the system: it passes the module the data the system passes, in its order.

import { HarnessDie, actAs } from "./harness-classes.mjs";

/** A number term as the harness's rolls hold one (a bane's −2 is a negative number here). */
function numberTerm(n) {
  return { number: n, toJSON: () => ({ class: "NumericTerm", options: {}, evaluated: true, number: n }) };
}

/** v14's message modes by the harness client's v13 roll mode. */
const MESSAGE_MODES = { publicroll: "public", gmroll: "gm", blindroll: "blind", selfroll: "self" };

/**
 * The Draw Steel system in one harness client. `form` is "prompt", "0.10" or "1.0"; `wrongTier` makes a
 * system whose tier is not the rules' (the harness of a modified client): true for every roll, "targets" for
 * the rolls against a target only (not the base roll its card shows).
 */
export function drawSteelSystem(client, { form = "1.0", wrongTier = false } = {}) {
  const v14 = form === "1.0";
  /** The roll mode the dialog starts from (the user's), as this form names it. */
  const mode = () => (v14 ? MESSAGE_MODES[client.rollMode] : client.rollMode);
  /** ChatMessage.applyMode / applyRollMode: whisper and blind for a mode of either naming. */
  const applyMode = (m) => {
    const gms = client.world.users.filter((u) => u.isGM).map((u) => u.id);
    if (m === "gmroll" || m === "gm") return { whisper: [...new Set([...gms, client.userId])] };
    if (m === "selfroll" || m === "self") return { whisper: [client.userId] };
    if (m === "blindroll" || m === "blind") return { whisper: gms, blind: true };
    return {};
  };

  class PowerRoll extends client.Roll {
    constructor(formula = "2d10", data = {}, options = {}) {
      super(formula, data, options);
      this.options = { type: "test", criticalThreshold: 19, banes: 0, edges: 0, bonuses: 0, ...this.options };
      this.options.edges = Math.max(0, Math.min(2, this.options.edges));
      this.options.banes = Math.max(0, Math.min(2, this.options.banes));
      if (!this.options.appliedModifier) {
        if (Math.abs(this.netBoon) === 1) this.terms.push(numberTerm(this.netBoon > 0 ? 2 : -2));
        if (form !== "prompt" && this.options.bonuses) this.terms.push(numberTerm(this.options.bonuses));
        this.options.appliedModifier = true;
      }
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
      const wrong = wrongTier === "targets" ? Boolean(this.options.target) : wrongTier;
      return wrong ? (tier % 3) + 1 : tier;
    }
    async toMessage(data = {}) {
      if (!this._evaluated) await this.evaluate();
      return client.ChatMessage.create({ ...data, rolls: [this], ...applyMode(client.rollMode) });
    }
  }

  /** DSApplication: `create` resolves with `config` when the dialog closes. */
  class DSApplication extends EventTarget {
    constructor(options) {
      super();
      this.options = options;
      this._config = null;
    }
    get config() {
      return this._config;
    }
    render() {
      client.Hooks.callAll(`render${this.constructor.name}`, this, {}, this.options.context, {});
    }
    /** The user's submit: `_processFormData`, then the dialog closes. */
    submit() {
      this._config = this._processFormData();
      this.dispatchEvent(new Event("close"));
    }
    static create(options) {
      return new Promise((resolve) => {
        const app = new this(options);
        app.addEventListener("close", () => resolve(app.config), { once: true });
        app.render();
        app.submit();
      });
    }
  }
  class PowerRollDialog extends DSApplication {
    _processFormData() {
      const { modifiers, targets } = this.options.context;
      const config = { rolls: [], damage: null, skill: null, [v14 ? "messageMode" : "rollMode"]: mode() };
      if (!targets?.length) config.rolls.push({ ...modifiers });
      else {
        for (const t of targets) {
          config.rolls.push({
            edges: Math.min(2, t.modifiers.edges + modifiers.edges),
            banes: Math.min(2, t.modifiers.banes + modifiers.banes),
            bonuses: (t.modifiers.bonuses ?? 0) + (modifiers.bonuses ?? 0),
            target: t.uuid,
          });
        }
      }
      return config;
    }
  }
  class AbilityConfigurationDialog extends PowerRollDialog {}

  /** The prompt form's dialog: `finalContext` the list itself. */
  class PromptDialog extends EventTarget {
    constructor(options) {
      super();
      this.options = options;
      this.finalContext = undefined;
    }
    render() {
      client.Hooks.callAll("renderPowerRollDialog", this, {}, this.options.context, {});
    }
    submit() {
      const { modifiers, targets } = this.options.context;
      this.finalContext = !targets?.length
        ? [{ ...modifiers }]
        : targets.map((t) => ({ edges: Math.min(2, t.modifiers.edges + modifiers.edges), banes: Math.min(2, t.modifiers.banes + modifiers.banes), target: t.uuid }));
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

  /** 0.10/0.11's PowerRoll.prompt with `evaluation: "evaluate"`: the dialog, a base roll, each context's roll. */
  async function prompt010(context) {
    const fd = await PowerRollDialog.create({ context });
    if (!fd) return null;
    const baseRoll = new PowerRoll(context.formula, {}, { baseRoll: true, damageSelection: fd.damage, skill: fd.skill });
    await baseRoll.evaluate();
    const die = baseRoll.terms[0];
    const firstTerm = new HarnessDie({ number: die.number, faces: die.faces, modifiers: [...die.modifiers], results: structuredClone(die.results) });
    const rolls = [];
    for (const c of fd.rolls) {
      const roll = new PowerRoll(context.formula, {}, { flavor: "Power Roll", ...c });
      roll.terms[0] = firstTerm;
      rolls.push(await roll.evaluate());
    }
    return { fd, baseRoll, rolls };
  }

  const begin = () => {
    actAs(client);
    client.world.actingUser = client.userId;
  };
  const withDefaults = (modifiers) => ({ edges: 0, banes: 0, bonuses: 0, ...modifiers });

  return {
    PowerRoll,
    /**
     * A hero's test (0.10/1.0: `rollCharacteristic`): the characteristic in the formula, the test's modifiers;
     * one roll, one message.
     */
    async test({ formula = "2d10 + 2", modifiers = {}, speaker = { alias: "Hero" } }) {
      begin();
      if (form === "0.10") {
        const { fd, baseRoll, rolls } = await prompt010({ modifiers: withDefaults(modifiers), formula });
        const message = await client.ChatMessage.create({ speaker, rolls: [baseRoll], ...applyMode(fd.rollMode) });
        return { roll: rolls[0], baseRoll, message };
      }
      const fd = await PowerRollDialog.create({ context: { modifiers: withDefaults(modifiers), formula } });
      if (!fd) return null;
      const [rollOptions] = fd.rolls;
      const roll = new PowerRoll(formula, {}, { ...rollOptions, flavor: "Might Test", skill: fd.skill });
      await roll.evaluate();
      const message = await client.ChatMessage.create({ speaker, rolls: [roll], ...applyMode(fd[v14 ? "messageMode" : "rollMode"]) });
      return { roll, message };
    },
    /**
     * An ability's power roll against its targets (0.10/1.0: `use`; the prompt form: `PowerRoll.prompt`).
     * Resolves with the base roll, every target's roll, and the messages posted.
     */
    async ability({ formula = "2d10 + 2", modifiers = {}, targets, speaker = { alias: "Hero" } }) {
      begin();
      const context = { modifiers: withDefaults(modifiers), targets, formula };
      if (form === "prompt") {
        const contexts = await PromptDialog.prompt({ context });
        if (!contexts) return null;
        const baseRoll = new PowerRoll(formula, {}, { type: "ability" });
        await baseRoll.evaluate();
        const rolls = [];
        const messages = [];
        for (const c of contexts) {
          const roll = new PowerRoll(formula, {}, { flavor: "Power Roll", type: "ability", ...c });
          roll.terms[0] = baseRoll.terms[0];
          messages.push(await roll.toMessage({ speaker }));
          rolls.push(roll);
        }
        return { baseRoll, rolls, messages };
      }
      if (form === "0.10") {
        const { fd, baseRoll, rolls } = await prompt010(context);
        const message = await client.ChatMessage.create({ speaker, content: "Ability", rolls: [baseRoll], ...applyMode(fd.rollMode) });
        return { baseRoll, rolls, messages: [message] };
      }
      const fd = await AbilityConfigurationDialog.create({ context });
      if (!fd) return null;
      const baseRoll = new PowerRoll(formula);
      await baseRoll.evaluate();
      const rolls = [];
      for (const c of fd.rolls) {
        const roll = new PowerRoll(formula, {}, { flavor: "Ability", ...c });
        roll.terms[0] = baseRoll.terms[0];
        await roll.evaluate({ allowInteractive: false });
        rolls.push(roll);
      }
      const message = await client.ChatMessage.create({ speaker, content: "Ability", rolls: [baseRoll], ...applyMode(fd[v14 ? "messageMode" : "rollMode"]) });
      return { baseRoll, rolls, messages: [message] };
    },
  };
}
