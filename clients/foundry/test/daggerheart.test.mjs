// The Daggerheart system's own duality and adversary attack rolls resolved by a REAL relay process (run by
// tests/test_foundry_module.py), through the module in the harness of Foundry's globals and a harness of the
// system's roll entry points (daggerheart-system.mjs): 1.x on Foundry v13 and 2.x on Foundry v14, each test
// for both; and the earlier 1.x form, whose own Hope and Fear ignore `skips`.

import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { closeAll, createRoom, server, until } from "../../js/test/helpers.mjs";
import { TableRelayModule } from "../scripts/module.mjs";
import { HarnessActor, daggerheartSystem } from "./daggerheart-system.mjs";
import { World } from "./harness.mjs";

const modules = [];
after(() => {
  for (const m of modules) m.client?.close();
  closeAll();
});

const GM = "GMuser0000000001";
const ARIA = "Player0000000001";
const BROM = "Player0000000002";

/** A world of the Daggerheart system: Aria's character has Hope and an Experience. */
function world() {
  const actor = new HarnessActor({ id: "aria0000000000001", name: "Aria's Ranger", hope: 0, experiences: { exp1: { name: "Wilderness Guide", value: 3 }, exp2: { name: "Spy", value: 2 } } });
  const w = new World(
    [
      { id: GM, name: "Gamemaster", isGM: true },
      { id: ARIA, name: "Aria", character: actor },
      { id: BROM, name: "Brom" },
    ],
    { system: "daggerheart" },
  );
  return { world: w, actor };
}

/** A started module on a harness client with the Daggerheart system in `form`, connected with `token`. */
async function foundry(world, userId, token, form) {
  const client = world.client(userId, { generation: form === "2.x" ? 14 : 13 });
  const module = new TableRelayModule(client);
  modules.push(module);
  client.module = module;
  client.system = daggerheartSystem(client, { form }); // the system registers its settings and hooks before the module's init runs
  module.init();
  await client.game.i18n.initialize();
  if (client.game.user.isGM) await client.game.settings.set("tablerelay", "relayUrl", server.url);
  client.storage.set("tablerelay.token", token);
  module.ready();
  await until(() => module.connected && module.client.you, 8000, `${userId} connected`);
  await until(() => client.game.user.getFlag("tablerelay", "participant") === module.client.you.id, 4000, "participant flag");
  return client;
}

async function table(form) {
  const room = createRoom();
  const { world: w, actor } = world();
  const gm = await foundry(w, GM, room.gm, form);
  const aria = await foundry(w, ARIA, room.player, form);
  const brom = await foundry(w, BROM, room.player, form);
  const events = [];
  gm.Hooks.on("tablerelay.event", (event) => events.push(event));
  return { room, world: w, actor, gm, aria, brom, events, ariaId: aria.module.client.you.id };
}

const messagesOf = (world, seq) => world.messages.filter((m) => m.flags.tablerelay?.seq === seq);
const fearSetting = (client) => client.game.settings.get("daggerheart", "ResourcesFear");

for (const form of ["1.x", "2.x"]) describe(`Daggerheart ${form} (Foundry ${form === "2.x" ? "v14" : "v13"}): the system's own rolls resolved by the relay`, () => {
  test("a sheet roll with an Experience spends Hope in the relay, shows the relay's faces and outcome, and the sheet follows", async () => {
    const t = await table(form);
    await t.gm.module.api.resource("hope", "set", 2, { participant: t.ariaId });
    await until(() => t.actor.system.resources.hope.value === 2, 4000, "the relay's Hope on Aria's sheet");
    const { config, message, roll } = await t.aria.system.duality({ actor: t.actor, trait: 2, experiences: ["exp1"], advantage: 1, difficulty: 14 });
    const flags = message.flags.tablerelay;
    assert.equal(typeof flags.seq, "number", "the system's message names the relay's event");
    // The relay's event, as the GM's client received it.
    await until(() => t.events.some((e) => e.seq === flags.seq), 4000, "the GM hears the roll");
    const stored = t.events.find((e) => e.seq === flags.seq);
    assert.deepEqual(stored.intent, { system: "daggerheart.duality", modifier: 2, advantage: 1, experience: 3, spend_hope: true, difficulty: 14 });
    const r = stored.result;
    assert.deepEqual(roll.dice.map((d) => d.total), [r.hope_die, r.fear_die, r.advantage_die], "the system's dice show the relay's faces");
    assert.equal(roll.total, r.total);
    assert.equal(config.skips.resources, true, "the system's own bookkeeping is skipped");
    assert.deepEqual(config.costs.map((c) => [c.extKey, c.key, c.enabled]), [["exp1", "hope", false]], "the Experience's Hope is the relay's to spend, not the action's");
    const duality = { hope: 1, fear: -1, critical: 0 }[r.with];
    assert.equal(config.roll.result.duality, duality, "the system reads the relay's outcome from the relay's faces");
    assert.equal(config.roll.success, r.success);
    // Hope: 2, minus the Experience's 1, plus 1 on Hope or a critical; in the relay and on the sheet.
    const hope = 1 + (r.with === "fear" ? 0 : 1);
    await until(() => Number(t.gm.module.client.state.hope[t.ariaId]) === hope, 4000, "the relay's Hope");
    await until(() => t.actor.system.resources.hope.value === hope, 4000, "the sheet's Hope");
    const fear = r.with === "fear" ? 1 : 0;
    await until(() => fearSetting(t.gm) === fear, 4000, "the Fear setting follows the relay");
    await t.gm.module.settled();
    await t.aria.module.settled();
    assert.equal(t.actor.system.resources.hope.value, hope, "the sheet's Hope, once everything settled, is the relay's: spent once");
    assert.equal(messagesOf(t.world, flags.seq).length, 1, "one message: the system's, never a second relay post");
    for (const viewer of [t.gm, t.aria, t.brom]) {
      assert.deepEqual(await viewer.module.api.check(message), { state: "verified", seqs: [flags.seq] }, `${viewer.userId} checks it`);
    }
    assert.ok(!t.gm.notifications.some(([, text]) => /Fear is kept by the relay/.test(text)), "no Fear put back: nothing changed it but the relay");
  });

  test("with Fear the relay's Fear rises once and the setting follows, two quick rolls in a row included", async () => {
    const t = await table(form);
    let fears = 0;
    let hopes = 0;
    for (let round = 0; round < 12 && fears < 2; round++) {
      const results = await Promise.all([t.aria.system.duality({ actor: t.actor, trait: 1 }), t.aria.system.duality({ actor: t.actor, trait: 0 })]);
      for (const { config } of results) {
        assert.equal(config.skips.resources, true);
        if (config.roll.result.duality === -1) fears += 1;
        else hopes += 1;
      }
      await until(() => Number(t.gm.module.client.state.fear) === fears, 4000, "the relay's Fear: one per roll with Fear");
      await until(() => fearSetting(t.gm) === fears && fearSetting(t.aria) === fears, 4000, "the setting, on every client");
    }
    assert.ok(fears >= 1, "some roll came with Fear");
    const relayHope = Math.min(hopes, 6);
    await until(() => Number(t.gm.module.client.state.hope[t.ariaId] ?? 0) === relayHope, 4000, "the relay's Hope: one per roll with Hope or a critical");
    await until(() => t.actor.system.resources.hope.value === relayHope, 4000, "the sheet's Hope is the relay's");
    assert.ok(!t.gm.notifications.some(([, text]) => /Fear is kept by the relay/.test(text)), "no revert loop");
    assert.equal(t.world.messages.filter((m) => m.flags.tablerelay?.seq !== undefined).length, t.world.messages.length, "every message is a system card naming its event");
  });

  test("a critical clears one Stress as the system would, though its own bookkeeping is skipped", async () => {
    const t = await table(form);
    t.actor.system.resources.stress.value = 6;
    let crits = 0;
    let rolls = 0;
    // A critical is one roll in 12 (matching d12s): 40 rounds of 4 miss one with a chance under 1 in 10^6.
    for (let round = 0; round < 40 && crits === 0; round++) {
      const results = await Promise.all([0, 1, 2, 3].map((trait) => t.aria.system.duality({ actor: t.actor, trait })));
      for (const { config } of results) {
        assert.equal(config.skips.resources, true, "the system's own bookkeeping is skipped");
        rolls += 1;
        if (config.roll.isCritical) crits += 1;
      }
    }
    assert.ok(crits >= 1, `a critical in ${rolls} rolls`);
    await t.aria.module.settled();
    await until(() => t.actor.modified.length === crits, 4000, "one Stress cleared per critical");
    assert.deepEqual(t.actor.modified, Array(crits).fill(-1), "each critical clears one Stress, nothing else changes it");
    assert.equal(t.actor.system.resources.stress.value, 6 - crits);
  });

  test("the relay refuses an Experience without Hope: the system's roll is not made", async () => {
    const t = await table(form);
    const before = t.world.messages.length;
    await assert.rejects(t.aria.system.duality({ actor: t.actor, trait: 1, experiences: ["exp1"] }), /Hope/);
    assert.equal(t.world.messages.length, before, "no message");
    assert.ok(t.aria.notifications.some(([level, text]) => level === "error" && /refused this roll/.test(text)));
    assert.equal(Number(t.gm.module.client.state.fear), 0);
  });

  test("a GM roll reaches the other player's socket sealed only (every byte read), and the card is theirs", async () => {
    const t = await table(form);
    const bytes = [];
    t.brom.module.client._ws.on("message", (data) => bytes.push(Buffer.from(data)));
    const marker = `Secret${Date.now()}`;
    const actor = new HarnessActor({ id: "aria0000000000001", name: marker, hope: 0 });
    const { message } = await t.aria.system.duality({ actor, trait: 1, rollMode: "gmroll" });
    const seq = message.flags.tablerelay.seq;
    assert.deepEqual([...message.whisper].sort(), [GM, ARIA]);
    await until(() => messagesOf(t.world, seq).length === 2, 4000, "the system's whisper and the relay's sealed card");
    const card = messagesOf(t.world, seq).find((m) => m.flags.tablerelay.sealed);
    assert.deepEqual(card.whisper, [BROM]);
    assert.equal(card.rolls.length, 0);
    const wire = Buffer.concat(bytes);
    assert.ok(!wire.includes(Buffer.from(marker)), "the label never reached Brom's socket");
    assert.ok(!wire.includes(Buffer.from("daggerheart.duality")), "nor the intent");
    assert.deepEqual(await t.gm.module.api.check(message), { state: "verified", seqs: [seq] });
  });

  test("blind and self rolls reach the other player's socket sealed only too (every byte read)", async () => {
    const t = await table(form);
    const bytes = [];
    t.brom.module.client._ws.on("message", (data) => bytes.push(Buffer.from(data)));
    for (const [rollMode, whisper] of [["blindroll", [GM]], ["selfroll", [ARIA]]]) {
      const marker = `Secret${rollMode}${Date.now()}`;
      const actor = new HarnessActor({ id: "aria0000000000001", name: marker, hope: 0 });
      const { message } = await t.aria.system.duality({ actor, trait: 1, rollMode });
      assert.deepEqual([...message.whisper].sort(), whisper, `${rollMode}: the system's message goes to its audience`);
      const seq = message.flags.tablerelay.seq;
      await until(() => t.events.some((e) => e.seq === seq), 4000, "the GM hears the roll (sealed or not)");
      await t.aria.module.settled();
      assert.ok(!Buffer.concat(bytes).includes(Buffer.from(marker)), `${rollMode}: the label never reached Brom's socket`);
    }
    assert.ok(!Buffer.concat(bytes).includes(Buffer.from("daggerheart.duality")), "nor any intent");
  });

  test("turned off for the world, or a roll the rules core does not cover: the system resolves it with the relay's faces", async () => {
    const t = await table(form);
    const covered = await t.aria.system.duality({ actor: t.actor, trait: 1, experiences: ["exp1", "exp2"] });
    assert.equal(covered.config.skips, undefined, "two Experiences: the system's own roll");
    assert.ok(Array.isArray(covered.message.flags.tablerelay.seqs), "its faces came from the relay");
    assert.equal(covered.message.flags.tablerelay.unresolved, "duality");
    for (const viewer of [t.gm, t.brom]) assert.match(await viewer.renderedChecked(covered.message), /not resolved by the relay[\s\S]*signed ✓/);
    await t.gm.game.settings.set("tablerelay", "daggerheartRolls", false);
    const off = await t.aria.system.duality({ actor: t.actor, trait: 1 });
    assert.equal(off.config.skips, undefined);
    assert.equal(off.message.flags.tablerelay.unresolved, undefined, "turned off, nothing to say");
    assert.equal(off.message.flags.tablerelay.via, true);
    assert.ok(Array.isArray(off.message.flags.tablerelay.seqs));
  });

  test("an adversary's attack against three targets gives the relay's hit or miss for each", async () => {
    const t = await table(form);
    const ogre = new HarnessActor({ id: "ogre0000000000001", name: "Ogre", experiences: { brute: { name: "Brute", value: 2 } } });
    const targets = [
      { id: "t1", name: "Aria", evasion: 8 },
      { id: "t2", name: "Brom", evasion: 14 },
      { id: "t3", name: "Cale", evasion: 19 },
    ];
    const { config, message, roll } = await t.gm.system.attack({ adversary: ogre, modifier: 3, advantage: 1, targets });
    const seq = message.flags.tablerelay.seq;
    await until(() => t.events.some((e) => e.seq === seq), 4000, "the roll's event");
    const event = t.events.find((e) => e.seq === seq);
    assert.deepEqual(event.intent, { system: "daggerheart.attack", modifier: 3, advantage: true, targets: targets.map(({ name, evasion }) => ({ name, evasion })) });
    assert.deepEqual(roll.dice[0].results.map((r) => r.result), event.result.dice.map((d) => d.value), "the d20s are the relay's");
    assert.deepEqual(config.targets.map((x) => x.hit), event.result.targets.map((x) => x.hit), "each target's hit is the relay's");
    assert.equal(message.flags.tablerelay.mismatch, undefined);
    for (const viewer of [t.gm, t.aria]) assert.deepEqual(await viewer.module.api.check(message), { state: "verified", seqs: [seq] });
  });

  test("a GM's Fear spent on an adversary's Experience goes through the relay: refused, the roll is not made", async () => {
    const t = await table(form);
    const ogre = new HarnessActor({ id: "ogre0000000000001", name: "Ogre", experiences: { brute: { name: "Brute", value: 2 } } });
    const targets = [{ id: "t1", name: "Aria", evasion: 12 }];
    const before = t.world.messages.length;
    await assert.rejects(t.gm.system.attack({ adversary: ogre, modifier: 1, experiences: ["brute"], targets }), /Fear/);
    assert.equal(t.world.messages.length, before, "no roll, no message");
    assert.ok(t.gm.notifications.some(([level, text]) => level === "error" && /refused this roll/.test(text)));
    await t.gm.module.api.resource("fear", "gain", 1);
    await until(() => fearSetting(t.gm) === 1, 4000, "the setting shows the relay's Fear");
    const { message } = await t.gm.system.attack({ adversary: ogre, modifier: 1, experiences: ["brute"], targets });
    const seq = message.flags.tablerelay.seq;
    await until(() => t.events.some((e) => e.seq === seq), 4000, "the roll's event");
    assert.deepEqual(t.events.find((e) => e.seq === seq).intent, { system: "daggerheart.attack", modifier: 1, experience: 2, spend_fear: true, targets: [{ name: "Aria", evasion: 12 }] });
    await until(() => Number(t.gm.module.client.state.fear) === 0 && fearSetting(t.gm) === 0, 4000, "the Fear spent once, in the relay and the setting");
  });
});

describe("Daggerheart's earlier 1.x form: its own postRollDuality handler ignores skips.resources", () => {
  test("the relay's Hope and Fear are counted once: the system's handler sees no source actor, the message keeps it", async () => {
    const t = await table("early");
    assert.equal(typeof t.gm.CONFIG.Dice.daggerheart.DualityRoll.addDualityResourceUpdates, "undefined", "the form without addDualityResourceUpdates");
    let fears = 0;
    let hopes = 0;
    for (let round = 0; round < 12 && (fears < 1 || hopes < 1); round++) {
      const { config } = await t.aria.system.duality({ actor: t.actor, trait: 1 });
      assert.equal(config.skips.resources, true);
      assert.equal(config.source.actor, t.actor.uuid, "the source actor is back in the configuration");
      if (config.roll.result.duality === -1) fears += 1;
      else hopes += 1;
      await until(() => Number(t.gm.module.client.state.fear) === fears && fearSetting(t.gm) === fears, 4000, "the relay's Fear: once per roll with Fear, and the setting");
      await until(() => Number(t.gm.module.client.state.hope[t.ariaId] ?? 0) === Math.min(hopes, 6), 4000, "the relay's Hope: once per roll with Hope");
      await t.gm.module.settled();
      await t.aria.module.settled();
      assert.equal(t.actor.system.resources.hope.value, Math.min(hopes, 6), "the sheet's Hope is the relay's, not one more");
    }
    assert.ok(fears >= 1 && hopes >= 1, "rolls with Hope and with Fear");
    assert.equal(Number(t.gm.module.client.state.fear), fears, "no Fear gained twice through the system's tracker");
  });
});
