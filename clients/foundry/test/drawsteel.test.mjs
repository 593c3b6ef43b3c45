// The Draw Steel system's own power rolls resolved by a REAL relay process (run by
// tests/test_foundry_module.py), through the module in the harness of Foundry's globals and a harness of the
// system's prompt and dialog (drawsteel-system.mjs), for 0.10/0.11 and 1.0.

import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { closeAll, createRoom, server, until } from "../../js/test/helpers.mjs";
import { TableRelayModule } from "../scripts/module.mjs";
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
  const client = world.client(userId);
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

/** Two goblins: one the hero has an edge against, one with a double bane (its own and the roll's). */
const TARGETS = () => [
  { actor: "Actor.goblinA", modifiers: { edges: 1, banes: 0 } },
  { actor: "Actor.goblinB", modifiers: { edges: 0, banes: 1 } },
];

for (const version of [0, 1]) {
  describe(`Draw Steel ${version ? "1.0" : "0.10/0.11"} power rolls resolved by the relay`, () => {
    test("an ability roll against two targets with different edges and banes gives the relay's tier for each", async () => {
      const t = await table({ version });
      const { baseRoll, messages } = await t.aria.system.prompt({ formula: "2d10 + 2", modifiers: { edges: 0, banes: 1 }, targets: TARGETS() });
      assert.equal(messages.length, 2, "one card per target");
      const seq = messages[0].flags.tablerelay.seq;
      await until(() => t.events.some((e) => e.seq === seq), 4000, "the GM hears the roll");
      const event = t.events.find((e) => e.seq === seq);
      assert.deepEqual(event.intent.targets.map((x) => [x.name, x.edges, x.banes]), [["Actor.goblinA", 1, 1], ["Actor.goblinB", 0, 2]]);
      assert.equal(event.intent.characteristics.M, 2);
      assert.deepEqual(baseRoll.dice[0].results.map((r) => r.result), event.result.dice.map((d) => d.value), "the 2d10 shows the relay's faces");
      for (const [i, message] of messages.entries()) {
        const flags = message.flags.tablerelay;
        assert.equal(flags.seq, seq);
        assert.equal(flags.target, i);
        assert.equal(flags.mismatch, undefined, "the system's tier is the relay's");
        assert.equal(message.rolls[0].total, event.result.targets[i].total);
        for (const viewer of [t.gm, t.aria, t.brom]) {
          assert.deepEqual(await viewer.module.api.check(message), { state: "verified", seqs: [seq] }, `${viewer.userId} checks target ${i}`);
        }
      }
      await t.gm.module.settled();
      await t.aria.module.settled();
      assert.equal(t.world.messages.length, 2, "no relay post beside the system's cards");
    });

    test("a system that computes another tier gets the mismatch mark on every client", async () => {
      const t = await table({ version, wrongTier: true });
      const { messages } = await t.aria.system.prompt({ formula: "2d10 + 1", targets: TARGETS() });
      for (const message of messages) {
        assert.match(message.flags.tablerelay.mismatch, /the relay's tier/);
        for (const viewer of [t.gm, t.brom]) {
          const verdict = await viewer.module.api.check(message);
          assert.equal(verdict.state, "failed");
          assert.equal(verdict.reason.key, "TABLERELAY.Check.Mismatch");
          assert.match(await viewer.renderedChecked(message), /not the relay/);
        }
      }
    });
  });
}

describe("Draw Steel, hidden", () => {
  test("a GM roll's cards reach the GM only; the other player's socket gets the sealed form (every byte read)", async () => {
    const t = await table({ version: 1 });
    const bytes = [];
    t.brom.module.client._ws.on("message", (data) => bytes.push(Buffer.from(data)));
    t.aria.rollMode = "gmroll";
    const { messages } = await t.aria.system.prompt({ formula: "2d10 + 2", targets: [{ actor: "Actor.SecretGoblin", modifiers: { edges: 1, banes: 0 } }] });
    const seq = messages[0].flags.tablerelay.seq;
    assert.deepEqual([...messages[0].whisper].sort(), [GM, ARIA]);
    assert.equal((await t.gm.module.api.check(messages[0])).state, "verified", "the GM checks the card");
    await until(() => t.world.messages.some((m) => m.flags.tablerelay?.seq === seq && m.flags.tablerelay.sealed), 4000, "the sealed card");
    const card = t.world.messages.find((m) => m.flags.tablerelay?.seq === seq && m.flags.tablerelay.sealed);
    assert.deepEqual(card.whisper, [BROM]);
    const wire = Buffer.concat(bytes);
    for (const secret of ["SecretGoblin", "drawsteel.ability"]) assert.ok(!wire.includes(Buffer.from(secret)), `${secret} never reached Brom's socket`);
  });
});

describe("Draw Steel, the relay's resolution turned off", () => {
  test("the system's roll keeps its own tiers, with the relay's faces", async () => {
    const t = await table({ version: 1 });
    await t.gm.game.settings.set("tablerelay", "drawSteelRolls", false);
    const { messages } = await t.aria.system.prompt({ formula: "2d10 + 2", targets: TARGETS() });
    assert.equal(messages.length, 2);
    assert.equal(messages[0].flags.tablerelay.seq, undefined);
    assert.ok(Array.isArray(messages[0].flags.tablerelay.seqs) || messages[0].flags.tablerelay.via === true);
  });
});
