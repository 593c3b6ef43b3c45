// The Foundry module against a REAL relay process, in the harness of Foundry's globals (harness.mjs).
// Run by tests/test_foundry_module.py, which starts the relay and passes its address in the environment.

import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { closeAll, connect, createRoom, next, server, sleep, until } from "../../js/test/helpers.mjs";
import { TableRelayModule } from "../scripts/module.mjs";
import { RelayUnavailable } from "../scripts/fulfillment.mjs";
import { World } from "./harness.mjs";

/** Ed25519 verification with the relay's published key (its JWK Set), through Node's WebCrypto. */
async function ed25519(bytes, sig, kid) {
  const base = server.url.replace(/^ws/, "http").replace(/\/ws$/, "");
  const { keys } = await (await fetch(`${base}/.well-known/tablerelay-keys.json`)).json();
  const jwk = keys.find((k) => k.kid === kid);
  assert.ok(jwk, `the relay publishes key ${kid}`);
  const key = await crypto.subtle.importKey("jwk", { kty: jwk.kty, crv: jwk.crv, x: jwk.x }, { name: "Ed25519" }, false, ["verify"]);
  return crypto.subtle.verify({ name: "Ed25519" }, key, sig, bytes);
}

const modules = [];
after(() => {
  for (const m of modules) m.client?.close();
  closeAll();
});

/** A started module on a harness client: init, the translations (i18nInit), the world's settings, then ready (which connects). */
async function foundry(world, userId, { token, storage, rolls = "all", unreachable = "fallback", url = server.url, wait = true } = {}) {
  const client = world.client(userId, { storage });
  const module = new TableRelayModule(client);
  modules.push(module);
  client.module = module;
  module.init();
  await client.game.i18n.initialize();
  const gm = world.users.find((u) => u.isGM);
  if (!world.configured) {
    // The GM sets the world's settings once, through the settings API the harness checks.
    const gmClient = client.game.user.isGM ? client : null;
    if (gmClient) {
      await client.game.settings.set("tablerelay", "relayUrl", url);
      await client.game.settings.set("tablerelay", "rolls", rolls);
      await client.game.settings.set("tablerelay", "unreachable", unreachable);
      world.configured = true;
    } else {
      world.worldSettings.set("tablerelay.relayUrl", url);
      world.worldSettings.set("tablerelay.rolls", rolls);
      world.worldSettings.set("tablerelay.unreachable", unreachable);
    }
  }
  if (token && !client.storage.has("tablerelay.token")) client.storage.set("tablerelay.token", token);
  module.ready();
  if (wait && token) await until(() => module.connected && module.client.you, 8000, `${userId} connected`);
  if (wait && token) await until(() => client.game.user.getFlag("tablerelay", "participant") === module.client.you.id, 4000, "participant flag");
  void gm;
  return client;
}

function table({ system } = {}) {
  return new World(
    [
      { id: "GMuser0000000001", name: "Gamemaster", isGM: true },
      { id: "Player0000000001", name: "Aria" },
      { id: "Player0000000002", name: "Brom" },
    ],
    { system },
  );
}

const byFlag = (world, seq) => world.messages.filter((m) => m.flags.tablerelay?.seq === seq || m.flags.tablerelay?.revealed === seq);

describe("dice fulfillment", () => {
  test("a Foundry roll takes every face from the relay in one round trip, and the table sees the same faces", async () => {
    const room = createRoom();
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm });
    const watcher = await connect(room.spectator);
    assert.equal(gm.CONFIG.Dice.fulfillment.defaultMethod, "tablerelay", "the relay is Foundry's default dice while connected");
    assert.equal(typeof gm.CONFIG.Dice.fulfillment.methods.tablerelay.handler, "function");

    const seen = next(watcher, "roll");
    const roll = gm.newRoll("2d20kh + 1d6 + 3");
    await gm.as(() => roll.evaluate());
    const context = roll.options.tablerelay;
    assert.equal(context.via, true);
    assert.equal(context.roundTrips, 1, "one request for every die the roll asks for");
    assert.equal(context.seqs.length, 1);
    const event = await seen;
    assert.equal(event.seq, context.seqs[0]);
    assert.equal(event.intent.system, "faces");
    assert.deepEqual(event.intent.dice, [{ number: 2, faces: 20 }, { number: 1, faces: 6 }]);
    const faces = roll.dice.flatMap((d) => d.results.map((r) => r.result));
    assert.deepEqual(faces, event.result.dice.map((d) => d.value), "Foundry shows the relay's faces, in order");
    const [signature] = context.signatures;
    assert.equal(signature.seq, event.seq);
    assert.equal(signature.verified, true, "the faces event's signature verified");
    assert.ok(await ed25519(Buffer.from(signature.signed, "base64"), Buffer.from(signature.sig, "base64"), signature.kid));
    const [d20] = roll.dice;
    assert.equal(roll.total, Math.max(...d20.results.map((r) => r.result)) + roll.dice[1].total + 3);
  });

  test("dice added by a modifier cost one more round trip each", async () => {
    const room = createRoom();
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm });
    // Eight d2 that explode on 2: about eight more dice, each asked for when Foundry reaches it. All eight
    // show 1 once in 256 rolls, so the roll is made again until a die explodes (twenty misses: 2^-160).
    for (let tries = 1; ; tries++) {
      const roll = gm.newRoll("8d2x");
      await gm.as(() => roll.evaluate());
      const [die] = roll.dice;
      const added = die.results.length - 8;
      assert.equal(roll.options.tablerelay.roundTrips, 1 + added);
      assert.equal(roll.options.tablerelay.seqs.length, 1 + added);
      assert.equal(roll.options.tablerelay.via, true);
      if (added >= 1) break;
      assert.ok(tries < 20, "twenty rolls of eight d2 and not one die exploded");
    }
  });

  test("the roll mode seals the faces for everyone outside the roll's audience", async () => {
    const room = createRoom();
    const world = table();
    const aria = await foundry(world, "Player0000000001", { token: room.player });
    const brom = await connect(room.player);
    const broms = [];
    brom.on("roll", (e) => broms.push(e));
    aria.rollMode = "gmroll";
    const roll = aria.newRoll("3d6");
    await aria.as(() => roll.evaluate());
    await until(() => broms.length === 1, 4000, "Brom's copy of the faces event");
    assert.equal(broms[0].sealed, true, "another player gets the faces sealed");
    assert.equal(broms[0].result, undefined);
    assert.equal(broms[0].visibility, "gm");
  });

  test("an unreachable relay falls back to Foundry's dice, says so, and marks the message", async () => {
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: "not-a-token-that-matters", url: "ws://127.0.0.1:9/ws", wait: false });
    const roll = gm.newRoll("1d20 + 2");
    await gm.as(() => roll.evaluate());
    assert.equal(roll.options.tablerelay.via, false);
    assert.match(roll.options.tablerelay.reason, /not connected/);
    assert.ok(gm.notifications.some(([level, text]) => level === "warn" && /not via relay/.test(text)), JSON.stringify(gm.notifications));
    const message = await gm.as(() => gm.ChatMessage.create({ content: "", rolls: [JSON.stringify(roll.toJSON())] }));
    assert.equal(message.flags.tablerelay.via, false, "the message says its dice are not the relay's");
    assert.match(await gm.renderedChecked(message), /not via relay/);
    assert.doesNotMatch(gm.rendered(message), /checking/, "a roll that says it is not the relay's is marked at once");
  });

  test("an unreachable relay refuses the roll when the world says so", async () => {
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: "x", url: "ws://127.0.0.1:9/ws", unreachable: "refuse", wait: false });
    const roll = gm.newRoll("1d20");
    await assert.rejects(gm.as(() => roll.evaluate()), RelayUnavailable);
    assert.ok(gm.notifications.some(([level]) => level === "error"));
  });
});

describe("relay events become chat messages", () => {
  test("a roll from another client is posted exactly once, by the first active GM, with the relay's numbers", async () => {
    const room = createRoom();
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm });
    const aria = await foundry(world, "Player0000000001", { token: room.player });
    const outsider = await connect(room.player); // the CLI, the /table page, another app: not a Foundry user
    const event = await outsider.roll({ system: "drawsteel.power", characteristic: 2, edges: 1 }, { label: "Knockback" });
    await until(() => byFlag(world, event.seq).length === 1, 4000, "the message");
    await gm.module.settled();
    await aria.module.settled();
    await sleep(100);
    const posted = byFlag(world, event.seq);
    assert.equal(posted.length, 1, "exactly one message per event");
    const [message] = posted;
    assert.equal(message.author, "GMuser0000000001");
    assert.deepEqual(message.whisper, []);
    assert.equal(message.rolls[0].total, event.result.total, "the message's roll is the relay's");
    assert.match(message.flavor, /Knockback/);
    const base = server.url.replace(/^ws/, "http").replace(/\/ws$/, "");
    assert.ok((await gm.renderedChecked(message)).includes(`signed ✓ <a href="${base}/events/${room.room}/${event.seq}"`), "the seq links to the relay's page of the event");
    // The flags hold what checks the message later, offline: key id, signature and the exact signed bytes.
    const flags = message.flags.tablerelay;
    assert.equal(flags.verified, true);
    assert.equal(flags.kid, event.kid);
    const signed = Buffer.from(flags.signed, "base64");
    assert.ok(signed.subarray(0, 20).equals(Buffer.from("tablerelay-event-v1\0")), "the spec's domain");
    assert.ok(await ed25519(signed, Buffer.from(flags.sig, "base64"), flags.kid), "the signature checks with the published key");
    signed[signed.length - 1] ^= 1;
    assert.equal(await ed25519(signed, Buffer.from(flags.sig, "base64"), flags.kid), false, "a flipped byte does not");
  });

  test("a Foundry player's own /tr roll is posted by that player's client", async () => {
    const room = createRoom();
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm });
    const aria = await foundry(world, "Player0000000001", { token: room.player });
    const hooked = [];
    gm.Hooks.on("tablerelay.event", (event) => hooked.push(event.seq));
    assert.equal(aria.chat("/tr 4d6kh3 # Strength"), false, "Foundry must not handle /tr itself");
    await until(() => world.messages.some((m) => m.flags.tablerelay?.kind === "roll"), 4000, "the /tr message");
    await aria.module.settled();
    await gm.module.settled();
    const [message] = world.messages.filter((m) => m.flags.tablerelay?.kind === "roll");
    assert.equal(message.author, "Player0000000001");
    assert.equal(world.messages.filter((m) => m.flags.tablerelay?.kind === "roll").length, 1);
    assert.match(message.flavor, /Strength/);
    // The GM's client hears the event on its own socket, which may come after the player's has posted it.
    await until(() => hooked.includes(message.flags.tablerelay.seq), 4000, "the tablerelay.event hook for it");
    assert.equal(aria.chat("hello table"), true, "other chat lines are Foundry's");
    assert.equal(aria.chat("/tr"), false);
    assert.ok(aria.notifications.some(([level, text]) => level === "error" && /Write what to roll/.test(text)));
  });

  test("a GM roll is whispered to its audience, a sealed card to the rest, and never reaches a player in the clear", async () => {
    const room = createRoom();
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm });
    const aria = await foundry(world, "Player0000000001", { token: room.player });
    // Every byte Aria's relay socket receives.
    const bytes = [];
    const ws = aria.module.client._ws;
    ws.on("message", (data) => bytes.push(Buffer.from(data)));
    const marker = `secret-${Date.now()}`;
    const event = await gm.module.api.roll({ system: "dice", formula: "3d8kh2 + 4" }, { visibility: "gm", label: marker });
    assert.ok(event.result, "the GM's API call resolves with the result");
    await until(() => byFlag(world, event.seq).length === 2, 4000, "the whisper and the card");
    await gm.module.settled();
    await aria.module.settled();
    const [full, card] = [byFlag(world, event.seq).find((m) => !m.flags.tablerelay.sealed), byFlag(world, event.seq).find((m) => m.flags.tablerelay.sealed)];
    assert.deepEqual(full.whisper, ["GMuser0000000001"]);
    assert.equal(full.blind, false);
    assert.deepEqual(card.whisper.sort(), ["Player0000000001", "Player0000000002"]);
    assert.equal(card.rolls.length, 0, "the card holds no roll");
    const ariaSees = world.visibleTo("Player0000000001").filter((m) => m.flags.tablerelay?.seq === event.seq);
    assert.deepEqual(ariaSees.map((m) => m.flags.tablerelay.sealed), [true]);
    const wire = Buffer.concat(bytes);
    assert.ok(!wire.includes(Buffer.from(marker)), "the label never reached Aria's socket");
    // "kh2", not "3d8": k and h are no hex digits, so the check cannot trip on a commitment's hex by chance.
    assert.ok(!wire.includes(Buffer.from("kh2")), "the formula never reached Aria's socket");
    // What Aria's Foundry holds of the roll, base64 decoded too (a signature's signed bytes are the event itself).
    for (const m of ariaSees) {
      const held = [JSON.stringify(m.flags), m.content, ...Object.values(m.flags.tablerelay).filter((v) => typeof v === "string").map((v) => Buffer.from(v, "base64").toString("latin1"))];
      for (const text of held) assert.ok(!text.includes(marker) && !text.includes("kh2"), `the card's ${text.slice(0, 40)} holds the hidden roll`);
    }
    assert.equal(card.flags.tablerelay.signed, undefined, "a card carries no signed bytes: the poster's would be the full roll's");
    // The whisper checks out for its audience; the card, showing no dice, has nothing to vouch for.
    assert.deepEqual(await gm.module.api.check(full), { state: "verified", seqs: [event.seq] });
    assert.deepEqual(await aria.module.api.check(card), { state: "none" });
    assert.doesNotMatch(await aria.renderedChecked(card), /tablerelay-failed/);
  });

  test("a blind roll by a player is posted by the GM; the roller sees only the card", async () => {
    const room = createRoom();
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm });
    const aria = await foundry(world, "Player0000000001", { token: room.player });
    const event = await aria.module.api.roll({ system: "nexus.test", attribute_die: "d8", skill_rank: 2 }, { visibility: "blind" });
    assert.equal(event.sealed, true, "a blind roll comes back sealed to its roller");
    await until(() => byFlag(world, event.seq).length === 2, 4000, "the blind message and the card");
    const full = byFlag(world, event.seq).find((m) => !m.flags.tablerelay.sealed);
    assert.equal(full.author, "GMuser0000000001");
    assert.equal(full.blind, true);
    assert.deepEqual(full.whisper, ["GMuser0000000001"]);
    const ariaSees = world.visibleTo("Player0000000001").filter((m) => m.flags.tablerelay?.seq === event.seq);
    assert.deepEqual(ariaSees.map((m) => m.flags.tablerelay.sealed), [true]);
    void gm;
  });

  test("a revealed roll turns its sealed card into the roll, checked against its seal", async () => {
    const room = createRoom();
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm });
    await foundry(world, "Player0000000001", { token: room.player });
    const event = await gm.module.api.roll({ system: "daggerheart.attack", modifier: 3 }, { visibility: "gm", label: "Ambush" });
    await until(() => byFlag(world, event.seq).length === 2, 4000, "whisper and card");
    // The GM's chat shows both before the reveal: the whisper and the card are two forms of one roll.
    for (const m of byFlag(world, event.seq)) assert.doesNotMatch(await gm.renderedChecked(m), /tablerelay-failed/);
    const reveal = await gm.module.api.reveal(event.seq);
    await until(() => byFlag(world, event.seq).length === 1 && byFlag(world, event.seq)[0].flags.tablerelay.revealed === reveal.seq, 4000, "the reveal");
    const [message] = byFlag(world, event.seq);
    assert.deepEqual(message.whisper, [], "public once revealed");
    assert.equal(message.flags.tablerelay.sealed, false);
    assert.equal(message.flags.tablerelay.sealMatches, true, "the reveal matches the commitment");
    assert.equal(message.flags.tablerelay.verified, true, "the reveal's signature verifies");
    assert.equal(message.rolls[0].total, event.result.total);
    assert.match(await gm.renderedChecked(message), /matches its seal/);
    assert.doesNotMatch(gm.rendered(message), /tablerelay-failed/, "the whisper it replaced is gone: no copy");
    assert.deepEqual(world.visibleTo("Player0000000002").filter((m) => m === message).length, 1);
  });

  test("a reload resumes, posts what it missed once, and reposts nothing", async () => {
    const room = createRoom();
    const world = table();
    const storage = new Map();
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm, storage });
    const outsider = await connect(room.player);
    const first = await outsider.roll({ system: "dice", formula: "1d20" });
    await until(() => byFlag(world, first.seq).length === 1, 4000, "first message");
    await gm.module.settled();
    gm.module.client.close();
    world.leave(gm);
    const missed = await outsider.roll({ system: "dice", formula: "2d6" });
    const again = await foundry(world, "GMuser0000000001", { storage });
    await until(() => byFlag(world, missed.seq).length === 1, 4000, "the missed roll, posted after the reload");
    await again.module.settled();
    await sleep(200);
    assert.equal(byFlag(world, first.seq).length, 1, "the first roll is not posted again");
    assert.equal(byFlag(world, missed.seq).length, 1);
    assert.equal(again.module.client.you.id, gm.module.client.you.id, "the same participant after the reload");
  });
});

describe("every client checks the marks itself", () => {
  /** A fresh room, and a world whose GM and two players are connected to it. */
  async function threeAtTable() {
    const room = createRoom();
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm });
    const aria = await foundry(world, "Player0000000001", { token: room.player });
    const brom = await foundry(world, "Player0000000002", { token: room.player });
    return { room, world, gm, aria, brom };
  }

  /** A Foundry roll of `formula` by `client`, evaluated through the relay and posted as Foundry would. */
  async function foundryRoll(client, formula) {
    const roll = client.newRoll(formula);
    await client.as(() => roll.evaluate());
    return client.as(() => client.ChatMessage.create({ content: "", rolls: [JSON.stringify(roll.toJSON())] }));
  }

  /** A message `client` creates as a macro would: any content, rolls and flags it likes. */
  function forge(client, original, changes = {}) {
    const rolls = original.rolls.map((r) => JSON.stringify(r.toJSON ? r.toJSON() : r._json));
    return client.as(() => client.ChatMessage.create({ content: original.content, rolls, flags: structuredClone(original.flags), ...changes }));
  }

  /** A roll's JSON with its first die's first result set to `value` (its total left as it was). */
  function withDie(message, value) {
    const json = structuredClone(message.rolls[0]._json ?? message.rolls[0].toJSON());
    json.terms.find((t) => t.class === "Die").results[0].result = value;
    return JSON.stringify(json);
  }

  test("a relay roll and a Foundry roll with the relay's faces check out on every other client", async () => {
    const { room, world, gm, aria, brom } = await threeAtTable();
    const outsider = await connect(room.player);
    const event = await outsider.roll({ system: "dice", formula: "4d6kh3 + 1d8x" });
    await until(() => byFlag(world, event.seq).length === 1, 4000, "the relay roll's message");
    const [posted] = byFlag(world, event.seq);
    const own = await foundryRoll(aria, "2d20kh + 1d6 + 3");
    for (const viewer of [gm, aria, brom]) {
      assert.deepEqual(await viewer.module.api.check(posted), { state: "verified", seqs: [event.seq] });
      assert.deepEqual(await viewer.module.api.check(own), { state: "verified", seqs: own.flags.tablerelay.seqs });
      assert.match(await viewer.renderedChecked(own), /signed ✓ (<a [^>]*>)?#/);
    }
    // Shown before it is checked: "checking…" first, then the verdict in the same element.
    const again = await foundryRoll(aria, "1d20");
    const element = brom.render(again);
    assert.match(element.html(), /checking…/);
    await brom.module.verdict(again);
    assert.match(element.html(), /signed ✓ (<a [^>]*>)?#/);
    assert.doesNotMatch(element.html(), /checking…/);
  });

  test("every system's rolls and every kind of die the relay renders check out as posted", async () => {
    const { world, gm, brom } = await threeAtTable();
    const intents = [
      { system: "drawsteel.power", characteristic: 2, edges: 1 },
      { system: "drawsteel.ability", characteristics: { M: 2, A: 1 }, roll_with: "M", tiers: ["3 + M damage", "6 + M damage", "9 + M damage"] },
      { system: "daggerheart.duality", modifier: 2, difficulty: 13 },
      { system: "daggerheart.attack", modifier: 4 },
      { system: "honors_edge.roll", pool: "6k3" },
      { system: "honors_edge.skill", attribute: 2, skill: 1, tn: 15, assist_ranks: [2] },
      { system: "honors_edge.damage", strength: 2, weapon: "+3k0" },
      { system: "nexus.test", attribute_die: "d8", skill_rank: 2, difficulty: "hard", boons: 1 },
      { system: "nexus.check", kind: "supply", die: "d8" },
      ...["4d6kh3 + 2", "2d20kl", "6d6x", "3d6r1", "4dF", "2dc", "{1d8, 1d10}kh", "(1d4)d6", "8d10cs>6", "5d6x5dl2", "1d20 / 3"].map((formula) => ({ system: "dice", formula })),
      ...["2d6!!", "3d6!p", "4d6ro<2", "3d10!>9"].map((formula) => ({ system: "dice", formula, dialect: "roll20" })),
    ];
    for (const intent of intents) {
      const event = await gm.module.api.roll(intent);
      await until(() => byFlag(world, event.seq).length === 1, 4000, `the message of ${JSON.stringify(intent)}`).catch((err) => assert.fail(`${err.message}: ${JSON.stringify(gm.notifications)}`));
      const [message] = byFlag(world, event.seq);
      assert.deepEqual(await brom.module.api.check(message), { state: "verified", seqs: [event.seq] }, JSON.stringify(intent));
    }
    // A hidden roll with fractions, revealed: the relay renders the reveal from the stored roll (its fractions
    // kept as decimal strings), and the card becomes that roll for everyone.
    const hidden = await gm.module.api.roll({ system: "dice", formula: "{1d6/4, 2d4/3}kh1 + 4.5" }, { visibility: "gm" });
    await until(() => byFlag(world, hidden.seq).length === 2, 4000, "the hidden roll's card");
    await gm.module.api.reveal(hidden.seq);
    await until(() => byFlag(world, hidden.seq).some((m) => m.flags.tablerelay.revealed && m.rolls.length === 1), 4000, "the card turned into the roll");
    const opened = byFlag(world, hidden.seq).find((m) => m.flags.tablerelay.revealed);
    assert.equal(opened.rolls[0].total, Number(hidden.result.total));
    assert.deepEqual(await brom.module.api.check(opened), { state: "verified", seqs: [hidden.seq] });
  });

  test("a player's macro cannot wear the relay's mark: changed dice, a missing signature, a copy, another's faces", async () => {
    const { world, gm, aria, brom } = await threeAtTable();
    const event = await gm.module.api.roll({ system: "dice", formula: "1d20 + 4" });
    await until(() => byFlag(world, event.seq).length === 1, 4000, "the relay roll's message");
    const [real] = byFlag(world, event.seq);
    const die = event.result.dice[0].value;
    const better = die === 20 ? 19 : 20;
    const seen = async (message) => [await gm.renderedChecked(message), await brom.renderedChecked(message)];

    const reason = async (message) => {
      const verdict = await brom.module.api.check(message);
      assert.equal(verdict.state, "failed");
      return brom.game.i18n.format(verdict.reason.key, verdict.reason.data ?? {});
    };

    // The relay's signed flags on a roll whose die was changed (its total with it).
    const changed = await forge(aria, real, { rolls: [withDie(real, better)] });
    for (const html of await seen(changed)) assert.match(html, /tablerelay-failed.*do not trust this roll/);
    assert.equal(await reason(changed), `it shows a d20 of ${better} that the relay did not roll`);
    // Only the total changed: a modifier added on the way.
    const json = JSON.parse(JSON.stringify(real.rolls[0]._json));
    json.total += 10;
    const padded = await forge(aria, real, { rolls: [JSON.stringify(json)] });
    assert.equal(await reason(padded), `it shows a total of ${event.result.total + 10}; the relay's is ${event.result.total}`);
    // The poster's own word for it, with no signature, for a seq nobody showed yet.
    const { kid, sig, signed, ...unsigned } = real.flags.tablerelay;
    void kid, void sig, void signed;
    const claimed = await forge(aria, real, { rolls: [withDie(real, better)], flags: { tablerelay: { ...unsigned, seq: event.seq + 50, verified: true } } });
    for (const html of await seen(claimed)) assert.match(html, /do not trust this roll: it carries no signature of the relay/);
    // A copy of the real message: the real dice, signed, shown a second time.
    const copy = await forge(aria, real);
    assert.deepEqual(await brom.module.api.check(copy), { state: "verified", seqs: [event.seq] }, "its signature and dice are the relay's");
    for (const html of await seen(copy)) assert.match(html, new RegExp(`do not trust this roll: an earlier message already shows this relay event (<a [^>]*>)?#${event.seq}<`));
    assert.match(await gm.renderedChecked(real), /signed ✓/, "the original keeps its mark");

    // Aria's Foundry roll, reposted by Brom as his own.
    const own = await foundryRoll(aria, "1d12");
    assert.match(await gm.renderedChecked(own), /signed ✓/);
    const theirs = await forge(brom, own);
    assert.equal(theirs.author, "Player0000000002");
    assert.match(await reason(theirs), new RegExp(`relay event #${own.flags.tablerelay.seqs[0]} was rolled by Aria`));
    assert.match(await gm.renderedChecked(theirs), /tablerelay-failed/, "and it shows faces another message already shows");
    // Brom says he is Aria on the relay (his own user's participant flag), to pass off her next faces.
    const next = await foundryRoll(aria, "1d10");
    const ariaParticipant = aria.game.user.getFlag("tablerelay", "participant");
    await brom.as(() => brom.game.user.setFlag("tablerelay", "participant", ariaParticipant));
    const posing = await brom.as(() => brom.ChatMessage.create({ content: "", rolls: [JSON.stringify(next.rolls[0]._json ?? next.rolls[0].toJSON())], flags: structuredClone(next.flags) }));
    await aria.as(() => next.delete());
    assert.equal(await reason(posing), "another user of this world claims the same relay participant as its author");
    // Dice that never went to the relay, under a Foundry roll's flags with no faces.
    const typed = await forge(brom, own, { rolls: [withDie(own, 7)], flags: { tablerelay: { via: true, seqs: [], room: own.flags.tablerelay.room, epoch: own.flags.tablerelay.epoch } } });
    assert.match(await gm.renderedChecked(typed), /it shows a d12 of 7 that the relay did not roll/);
    assert.doesNotMatch(await gm.renderedChecked(typed), /✓/);
  });

  test("a player's macro cannot silence the relay: a claimed seq, flags no check can read, a seq from the future", async () => {
    const { room, world, gm, aria, brom } = await threeAtTable();
    const first = await gm.module.api.roll({ system: "dice", formula: "1d20" });
    await until(() => byFlag(world, first.seq).length === 1, 4000, "the first roll's message");
    const [real] = byFlag(world, first.seq);
    const { room: roomId, epoch } = real.flags.tablerelay;
    const macro = (tablerelay) => aria.as(() => aria.ChatMessage.create({ content: "a macro's", flags: { tablerelay } }));
    // Aria names the next seqs before the relay makes them (a fair GM roll follows a `pending`), and flags no check reads.
    const claimed = [first.seq + 1, first.seq + 2];
    for (const seq of claimed) await macro({ via: true, room: roomId, epoch, seq });
    await macro({ via: true, room: roomId, epoch, seq: first.seq + 3, sealed: true });
    const unreadable = await macro({ via: true, room: roomId, epoch, seqs: [{ toString: 1 }], seq: { valueOf: 1, toString: 1 } });
    const next = await gm.module.api.roll({ system: "dice", formula: "2d6" });
    assert.ok(claimed.includes(next.seq), `the seq Aria claimed: ${next.seq}`);
    await until(() => byFlag(world, next.seq).some((m) => m.author === "GMuser0000000001"), 4000, "the GM's roll posted all the same").catch((err) => assert.fail(`${err.message}: ${JSON.stringify(byFlag(world, next.seq).map((m) => [m.author, m.flags]))} ${JSON.stringify(gm.notifications)}`));
    const posted = byFlag(world, next.seq).find((m) => m.author === "GMuser0000000001");
    assert.deepEqual(await brom.module.api.check(posted), { state: "verified", seqs: [next.seq] });
    // Every message keeps its mark: the chat's index of shown events reads the unreadable flags too.
    assert.match(await brom.renderedChecked(real), /signed ✓/);
    assert.match(await brom.renderedChecked(unreadable), /tablerelay-failed.*do not trust this roll/);
    assert.match(await gm.renderedChecked(byFlag(world, next.seq).find((m) => m !== posted)), /tablerelay-failed(?!.*data-verdict)/s, "nor the roll's fair dice verdict");

    // A new browser of the GM (a fresh welcome, its history replayed) posts what the chat misses after its last
    // post, though Aria's message claims a seq the room has not reached.
    await macro({ via: true, room: roomId, epoch, seq: 1_000_000 });
    await gm.module.settled();
    gm.module.client.close();
    world.leave(gm);
    const outsider = await connect(room.player);
    const missed = await outsider.roll({ system: "dice", formula: "1d8" });
    const again = await foundry(world, "GMuser0000000001", { token: room.gm, storage: new Map() });
    await until(() => byFlag(world, missed.seq).length === 1, 4000, "the missed roll, posted from the fresh welcome's history");
    await again.module.settled();
    assert.equal(byFlag(world, next.seq).filter((m) => m.author === "GMuser0000000001").length, 1, "nothing posted twice");
  });

  test("a hidden roll is revealed in place though its roller was merged into another participant since", async () => {
    const room = createRoom();
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm });
    const laptop = await foundry(world, "Player0000000001", { token: room.player });
    const before = laptop.module.client.you.id;
    const hidden = await laptop.module.api.roll({ system: "dice", formula: "1d20" }, { visibility: "gm" });
    await until(() => byFlag(world, hidden.seq).length === 2, 4000, "the whisper and the sealed card, by Aria's own client");
    // Aria comes back from another browser with a fresh invite (a new participant), and the GM merges the old one
    // into it: her user's participant flag is the new one from then on.
    laptop.module.client.close();
    world.leave(laptop);
    const tablet = await foundry(world, "Player0000000001", { token: room.player });
    const after = tablet.module.client.you.id;
    assert.notEqual(after, before);
    await gm.module.client.merge(before, after);
    await gm.module.api.reveal(hidden.seq);
    await until(() => byFlag(world, hidden.seq).some((m) => m.flags.tablerelay.revealed), 4000, "the revealed roll");
    await gm.module.settled();
    const shown = byFlag(world, hidden.seq);
    assert.equal(shown.length, 1, "the card became the roll and the whisper went: not a second copy beside them");
    assert.equal(shown[0].author, "Player0000000001");
    assert.match(await gm.renderedChecked(shown[0]), /matches its seal/);
  });

  test("the GM sees which of the relay's faces no chat message shows: a roll made again and kept quiet", async () => {
    const { gm, aria } = await threeAtTable();
    const quiet = aria.newRoll("1d20");
    await aria.as(() => quiet.evaluate()); // rolled, not posted
    const [quietSeq] = quiet.options.tablerelay.seqs;
    const shown = await foundryRoll(aria, "1d20");
    const [shownSeq] = shown.flags.tablerelay.seqs;
    await until(() => gm.module.api.unshown().length >= 1 && gm.module.faces.size >= 2, 4000, "both faces events at the GM");
    const unshown = gm.module.api.unshown();
    assert.deepEqual(unshown.map((f) => f.seq), [quietSeq]);
    assert.equal(unshown[0].actor.id, aria.game.user.getFlag("tablerelay", "participant"));
    assert.deepEqual(unshown[0].values, quiet.dice[0].results.map((r) => r.result));
    assert.ok(!unshown.some((f) => f.seq === shownSeq));
  });

  test("a die set to another method makes the roll say it is not the relay's", async () => {
    const room = createRoom();
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm });
    const aria = await foundry(world, "Player0000000001", { token: room.player });
    aria.diceConfiguration = { d20: "manual" };
    const message = await foundryRoll(aria, "1d20 + 1d6");
    assert.equal(message.flags.tablerelay.via, false);
    assert.match(message.flags.tablerelay.reason, /not rolled by the relay: d20 \(manual\)/);
    assert.match(await gm.renderedChecked(message), /not via relay/);
  });

  test("a browser with no token checks with the relay's published keys; a relay that does not answer leaves it unchecked", async () => {
    const room = createRoom();
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm });
    const guest = await foundry(world, "Player0000000002", {});
    const event = await gm.module.api.roll({ system: "dice", formula: "3d6" });
    await until(() => byFlag(world, event.seq).length === 1, 4000, "the message");
    const [message] = byFlag(world, event.seq);
    assert.equal(guest.module.connected, false);
    assert.deepEqual(await guest.module.api.check(message), { state: "verified", seqs: [event.seq] });

    const away = table();
    const lost = await foundry(away, "GMuser0000000001", { token: "x", url: "ws://127.0.0.1:9/ws", wait: false });
    const copied = await lost.as(() => lost.ChatMessage.create({ content: "", rolls: message.rolls.map((r) => JSON.stringify(r._json)), flags: structuredClone(message.flags) }));
    const verdict = await lost.module.api.check(copied);
    assert.equal(verdict.state, "unchecked");
    assert.match(await lost.renderedChecked(copied), /relay, not checked here/);
    assert.doesNotMatch(await lost.renderedChecked(copied), /✓/);
  });
});

describe("Fear and Hope", () => {
  test("the GM's Fear goes through the relay and is mirrored into the Daggerheart system's setting", async () => {
    const room = createRoom();
    const world = table({ system: "daggerheart" });
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm });
    // The Daggerheart system's own world setting, registered as the system registers it.
    gm.game.settings.register("daggerheart", "ResourcesFear", { scope: "world", config: false, type: Number, default: 0 });
    await gm.module.api.resource("fear", "gain", 3);
    await until(() => gm.game.settings.get("daggerheart", "ResourcesFear") === 3, 4000, "the mirrored Fear");
    await gm.game.settings.set("daggerheart", "ResourcesFear", 1); // the system's tracker: spends through the relay
    await until(() => Number(gm.module.client.state.fear) === 1, 4000, "the tracker's spend of 2, in the relay");
    await gm.game.settings.set("daggerheart", "ResourcesFear", 2);
    await until(() => Number(gm.module.client.state.fear) === 2 && gm.game.settings.get("daggerheart", "ResourcesFear") === 2, 4000, "a gain of 1");
    await gm.game.settings.set("tablerelay", "daggerheartRolls", false); // off: the tracker is read-only
    await gm.game.settings.set("daggerheart", "ResourcesFear", 7);
    await until(() => gm.game.settings.get("daggerheart", "ResourcesFear") === 2 && Number(gm.module.client.state.fear) === 2, 4000, "Fear put back");
    assert.ok(gm.notifications.some(([, text]) => /Fear is kept by the relay/.test(text)));
    await assert.rejects(gm.module.api.resource("fear", "spend", 5), /needs 5 Fear/);
  });
});

describe("settings and the API", () => {
  test("tokens live in the browser's storage only; the world holds none", async () => {
    const room = createRoom();
    const world = table();
    const gm = await foundry(world, "GMuser0000000001", { token: room.gm });
    const aria = await foundry(world, "Player0000000001", { token: room.player });
    for (const value of world.worldSettings.values()) assert.ok(!String(JSON.stringify(value)).includes(room.gm));
    for (const user of world.users) assert.ok(!JSON.stringify(user.flags).includes(room.player));
    assert.equal(gm.storage.get("tablerelay.token"), room.gm);
    assert.ok(!aria.storage.has("tablerelay.token") || aria.storage.get("tablerelay.token") === room.player);
    assert.equal(gm.module.connectionValues().hasToken, true);
    assert.ok(!JSON.stringify(gm.module.connectionValues()).includes(room.gm), "the form is never given the token");
    assert.equal(gm.game.modules.get("tablerelay").api, gm.module.api);
    assert.equal(gm.module.api.connected, true);
    await aria.as(() => aria.module.saveConnection({ token: "" }, true));
    assert.equal(aria.storage.get("tablerelay.token"), "");
    assert.equal(aria.module.api.connected, false);
  });
});
