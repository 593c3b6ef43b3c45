// The Draw Steel system's own power rolls resolved by a REAL relay process (run by
// tests/test_foundry_module.py), through the module in the harness of Foundry's globals and a harness of the
// system's dialogs and rolls (drawsteel-system.mjs), for 0.10/0.11 on Foundry v13, 1.0 on Foundry v14, and the
// earlier prompt form.

import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { closeAll, createRoom, server, until } from "../../js/test/helpers.mjs";
import { TableRelayModule } from "../scripts/module.mjs";
import { BASE_TARGET } from "../scripts/systems/drawsteel.mjs";
import { drawSteelSystem } from "./drawsteel-system.mjs";
import { World } from "./harness.mjs";

const modules = [];
after(() => {
  for (const m of modules) m.client?.close();
  closeAll();
});

const GM = "GMuser0000000001";
const ARIA = "Player0000000001";
const BROM = "Player0000000002";

async function foundry(world, userId, token, system) {
  const client = world.client(userId, { generation: system.form === "1.0" ? 14 : 13 });
  const module = new TableRelayModule(client);
  modules.push(module);
  client.module = module;
  client.system = drawSteelSystem(client, system);
  module.init();
  await client.game.i18n.initialize();
  if (client.game.user.isGM) await client.game.settings.set("tablerelay", "relayUrl", server.url);
  client.storage.set("tablerelay.token", token);
  module.ready();
  await until(() => module.connected && module.client.you, 8000, `${userId} connected`);
  await until(() => client.game.user.getFlag("tablerelay", "participant") === module.client.you.id, 4000, "participant flag");
  return client;
}

async function table(system = {}) {
  const room = createRoom();
  const world = new World(
    [
      { id: GM, name: "Director", isGM: true },
      { id: ARIA, name: "Aria" },
      { id: BROM, name: "Brom" },
    ],
    { system: "draw-steel" },
  );
  const gm = await foundry(world, GM, room.gm, system);
  const aria = await foundry(world, ARIA, room.player, system);
  const brom = await foundry(world, BROM, room.player, system);
  const events = [];
  gm.Hooks.on("tablerelay.event", (event) => events.push(event));
  return { room, world, gm, aria, brom, events };
}

/** Two goblins: one the hero has an edge against (and a bonus), one with a double bane (its own and the roll's). */
const TARGETS = () => [
  { uuid: "Actor.goblinA", modifiers: { edges: 1, banes: 0, bonuses: 1 } },
  { uuid: "Actor.goblinB", modifiers: { edges: 0, banes: 1 } },
];

const FORMS = ["0.10", "1.0", "prompt"];
const NAMES = { "0.10": "0.10/0.11 (Foundry v13)", "1.0": "1.0 (Foundry v14)", prompt: "the prompt form before 0.10" };

/** The event a roll names, as the GM's client received it. */
async function eventOf(t, seq) {
  await until(() => t.events.some((e) => e.seq === seq), 4000, "the GM hears the roll");
  return t.events.find((e) => e.seq === seq);
}

for (const form of FORMS) {
  describe(`Draw Steel ${NAMES[form]}: power rolls resolved by the relay`, () => {
    test("an ability roll against two targets with different edges and banes gives the relay's tier for each", async () => {
      const t = await table({ form });
      const { baseRoll, rolls, messages } = await t.aria.system.ability({ formula: "2d10 + 2", modifiers: { edges: 0, banes: 1 }, targets: TARGETS() });
      const seq = messages[0].flags.tablerelay.seq;
      assert.equal(typeof seq, "number", "the card names the relay's event");
      const event = await eventOf(t, seq);
      const bonus = form === "prompt" ? [] : [1]; // the prompt form had no bonuses per target
      const expected = [["Actor.goblinA", 1, 1, ...bonus], ["Actor.goblinB", 0, 2]];
      const got = event.intent.targets.slice(0, 2).map((x) => [x.name, x.edges, x.banes, ...(x.bonus === undefined ? [] : [x.bonus])]);
      assert.deepEqual(got, expected, "one intent, each target's own edges, banes and bonus");
      assert.equal(event.intent.characteristics.M, 2);
      assert.deepEqual(baseRoll.dice[0].results.map((r) => r.result), event.result.dice.map((d) => d.value), "the 2d10 shows the relay's faces");
      for (const [i, roll] of rolls.entries()) {
        assert.equal(roll.total, event.result.targets[i].total, `target ${i}'s total is the relay's`);
        assert.equal(roll.product, event.result.targets[i].tier, `target ${i}'s tier is the relay's`);
      }
      if (form === "prompt") {
        assert.equal(messages.length, 2, "one card per target");
        for (const [i, message] of messages.entries()) assert.equal(message.flags.tablerelay.target, i);
      } else {
        assert.equal(messages.length, 1, "one card for the ability, its base roll shown");
        assert.equal(event.intent.targets.length, 3, "the base roll is a target of its own, last");
        assert.deepEqual(event.intent.targets[2], { name: BASE_TARGET, edges: 0, banes: 0 });
        assert.equal(messages[0].flags.tablerelay.target, 2);
        assert.equal(messages[0].rolls[0].total, event.result.targets[2].total);
      }
      for (const message of messages) {
        assert.equal(message.flags.tablerelay.seq, seq);
        assert.equal(message.flags.tablerelay.mismatch, undefined, "the system's tiers are the relay's");
        for (const viewer of [t.gm, t.aria, t.brom]) {
          assert.deepEqual(await viewer.module.api.check(message), { state: "verified", seqs: [seq] }, `${viewer.userId} checks it`);
        }
      }
      await t.gm.module.settled();
      await t.aria.module.settled();
      assert.equal(t.world.messages.length, messages.length, "no relay post beside the system's cards");
    });

    test("a system that computes another tier for a target gets the mismatch mark on every client", async () => {
      const t = await table({ form, wrongTier: "targets" });
      const { messages } = await t.aria.system.ability({ formula: "2d10 + 1", targets: TARGETS() });
      for (const message of messages) {
        // The card of an ability (0.10, 1.0) shows its base roll, whose own tier is right: it carries the targets'.
        assert.match(message.flags.tablerelay.mismatch, /Actor\.goblin[AB]: tier \d, the relay's tier \d/);
        for (const viewer of [t.gm, t.brom]) {
          const verdict = await viewer.module.api.check(message);
          assert.equal(verdict.state, "failed");
          assert.equal(verdict.reason.key, "TABLERELAY.Check.Mismatch");
          assert.match(await viewer.renderedChecked(message), /not the relay/);
        }
      }
    });

    if (form !== "prompt") {
      test("a test with an edge and a bonus is one roll: the relay's total and tier, its card checked", async () => {
        const t = await table({ form });
        const { roll, message } = await t.aria.system.test({ formula: "2d10 + 3", modifiers: { edges: 1, bonuses: 2 } });
        const flags = message.flags.tablerelay;
        const event = await eventOf(t, flags.seq);
        assert.deepEqual(event.intent.targets[0], { name: "target 1", edges: 1, banes: 0, bonus: 2 });
        assert.equal(event.intent.characteristics.M, 3, "the roll's own edge and bonus terms are not the characteristic");
        if (form === "1.0") {
          assert.equal(event.intent.targets.length, 1, "1.0: the test's one roll is its one target, and its card shows it");
          assert.equal(flags.target, 0);
        } else {
          assert.deepEqual(event.intent.targets[1], { name: BASE_TARGET, edges: 0, banes: 0 }, "0.10: the card shows the base roll");
          assert.equal(flags.target, 1);
          assert.equal(message.rolls[0].total, event.result.targets[1].total);
        }
        assert.equal(roll.total, event.result.targets[0].total);
        assert.equal(roll.product, event.result.targets[0].tier);
        for (const viewer of [t.gm, t.brom]) assert.deepEqual(await viewer.module.api.check(message), { state: "verified", seqs: [flags.seq] });
      });
    }
  });
}

describe("Draw Steel, hidden", () => {
  for (const form of ["0.10", "1.0"]) {
    test(`${NAMES[form]}: a GM roll's card reaches the GM only; the other player's socket gets the sealed form (every byte read)`, async () => {
      const t = await table({ form });
      const bytes = [];
      t.brom.module.client._ws.on("message", (data) => bytes.push(Buffer.from(data)));
      t.aria.rollMode = "gmroll";
      const { messages } = await t.aria.system.ability({ formula: "2d10 + 2", targets: [{ uuid: "Actor.SecretGoblin", modifiers: { edges: 1, banes: 0 } }] });
      const seq = messages[0].flags.tablerelay.seq;
      assert.deepEqual([...messages[0].whisper].sort(), [GM, ARIA]);
      assert.equal((await t.gm.module.api.check(messages[0])).state, "verified", "the GM checks the card");
      await until(() => t.world.messages.some((m) => m.flags.tablerelay?.seq === seq && m.flags.tablerelay.sealed), 4000, "the sealed card");
      const card = t.world.messages.find((m) => m.flags.tablerelay?.seq === seq && m.flags.tablerelay.sealed);
      assert.deepEqual(card.whisper, [BROM]);
      // Blind and self rolls, the same way: never in the clear on Brom's socket.
      for (const [rollMode, whisper] of [["blindroll", [GM]], ["selfroll", [ARIA]]]) {
        t.aria.rollMode = rollMode;
        const more = await t.aria.system.ability({ formula: "2d10 + 2", targets: [{ uuid: `Actor.Secret${rollMode}`, modifiers: { edges: 0, banes: 1 } }] });
        assert.deepEqual([...more.messages[0].whisper].sort(), whisper, `${rollMode}: the card goes to its audience`);
        await t.aria.module.settled();
      }
      await until(() => t.events.length >= 3, 4000, "the GM heard the three rolls");
      const wire = Buffer.concat(bytes);
      for (const secret of ["SecretGoblin", "Secretblindroll", "Secretselfroll", "drawsteel.ability"]) {
        assert.ok(!wire.includes(Buffer.from(secret)), `${secret} never reached Brom's socket`);
      }
    });
  }

  test("Foundry v14: a plain Foundry roll in the gm message mode (core.messageMode) has its faces sealed for the other player", async () => {
    const t = await table({ form: "1.0" });
    t.aria.game.settings.register("core", "messageMode", { scope: "client", config: false, type: String, default: "public" });
    await t.aria.game.settings.set("core", "messageMode", "gm");
    assert.equal(t.aria.rollMode, "publicroll", "the v13 setting says public: the v14 one must win");
    const seen = [];
    t.brom.Hooks.on("tablerelay.event", (event) => seen.push(event));
    const roll = new t.aria.Roll("1d20 + 1d6");
    await roll.evaluate();
    const [seq] = roll.options.tablerelay.seqs;
    const event = await eventOf(t, seq);
    assert.equal(event.visibility, "gm");
    await until(() => seen.some((e) => e.seq === seq), 4000, "Brom hears the faces event");
    assert.equal(seen.find((e) => e.seq === seq).sealed, true, "sealed for Brom");
  });
});

describe("Draw Steel, the relay's resolution turned off", () => {
  test("the system's roll keeps its own tiers, with the relay's faces", async () => {
    const t = await table({ form: "1.0" });
    await t.gm.game.settings.set("tablerelay", "drawSteelRolls", false);
    const { messages } = await t.aria.system.ability({ formula: "2d10 + 2", targets: TARGETS() });
    assert.equal(messages.length, 1);
    assert.equal(messages[0].flags.tablerelay.seq, undefined);
    assert.equal(messages[0].flags.tablerelay.via, true);
    assert.ok(Array.isArray(messages[0].flags.tablerelay.seqs), "its faces came from the relay");
  });
});
