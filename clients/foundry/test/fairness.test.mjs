// Fair dice (spec/fairness.md) in the Foundry module, against a REAL relay process rolling them (the default;
// tests/test_foundry_module.py starts one and passes TABLERELAY_TEST_FAIR_URL, and one without fair dice as
// TABLERELAY_TEST_PLAIN_URL; run alone, the JS client's helpers start them from .venv): each relay roll's card
// carries this client's verdict beside its signature mark, redrawn when a GM reveals the dice seed or a hidden
// roll; player clients witness; an alarm raises a notification and a red banner.

import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { after, describe, test } from "node:test";
import { SeedBook, decodeMsgpack, encodeMsgpack } from "../../js/tablerelay.js";
import { closeAll, createRoom, fairServer, plainServer, until } from "../../js/test/helpers.mjs";
import { awaitingBasis, judge, outsideWitnesses, rollKeys } from "../scripts/fairness.mjs";
import { alarmBannerHTML, fairMarkHTML } from "../scripts/ui.mjs";
import { TableRelayModule } from "../scripts/module.mjs";
import { World } from "./harness.mjs";
import { HarnessLocalization } from "./localization.mjs";

// `ws` as the JS client's own tests resolve it (clients/js's locked dependencies), as harness.mjs does.
const WebSocket = createRequire(new URL("../../js/package.json", import.meta.url))("ws");

const modules = [];
after(() => {
  for (const m of modules) m.client?.close();
  closeAll();
});

/**
 * A socket class for one Foundry client: it records every frame the module sends, and lets the test change
 * the frames it receives (a relay that lies to this one client).
 */
function net(tamper = () => {}) {
  const sent = [];
  class Socket extends WebSocket {
    send(data) {
      sent.push(decodeMsgpack(new Uint8Array(data)));
      return super.send(data);
    }
    addEventListener(type, listener, options) {
      if (type !== "message") return super.addEventListener(type, listener, options);
      return super.addEventListener(type, (event) => {
        const frame = decodeMsgpack(new Uint8Array(event.data));
        for (const f of frame.t === "welcome" ? [frame, ...(frame.history ?? [])] : [frame]) tamper(f);
        listener({ data: encodeMsgpack(frame) });
      }, options);
    }
  }
  return { Socket, sent };
}

/** A started module on a harness client of `world`, connected to the fair relay, with a page for the banner. */
async function foundry(world, userId, token, relay, { tamper } = {}) {
  const client = world.client(userId, { document: true });
  const wire = net(tamper);
  client.WebSocket = wire.Socket;
  client.wire = wire;
  const module = new TableRelayModule(client);
  modules.push(module);
  client.module = module;
  module.init();
  await client.game.i18n.initialize();
  if (!world.configured) {
    world.worldSettings.set("tablerelay.relayUrl", relay.url);
    world.worldSettings.set("tablerelay.rolls", "all");
    world.worldSettings.set("tablerelay.unreachable", "refuse");
    world.configured = true;
  }
  client.storage.set("tablerelay.token", token);
  module.ready();
  await until(() => module.connected && module.client.you, 8000, `${userId} connected`);
  await until(() => client.game.user.getFlag("tablerelay", "participant") === module.client.you.id, 4000, "participant flag");
  return client;
}

async function fairTable({ tamper } = {}) {
  const relay = await fairServer();
  const room = createRoom(undefined, relay);
  const world = new World([
    { id: "GMuser0000000001", name: "Gamemaster", isGM: true },
    { id: "Player0000000001", name: "Aria" },
    { id: "Player0000000002", name: "Brom" },
  ]);
  const gm = await foundry(world, "GMuser0000000001", room.gm, relay);
  const aria = await foundry(world, "Player0000000001", room.player, relay, { tamper });
  return { relay, room, world, gm, aria };
}

const byFlag = (world, seq) => world.messages.filter((m) => m.flags.tablerelay?.seq === seq);
/** The verdict a rendered card shows, or null for none. */
const verdictIn = (html) => /data-verdict="([^"]+)"/.exec(html)?.[1] ?? null;

describe("verdict marks on chat cards", () => {
  test("a player's roll is marked 'awaiting seed' on every client, and 'fair' once the GM reveals the seed", async () => {
    const { world, gm, aria } = await fairTable();
    const event = await aria.module.api.roll({ system: "dice", formula: "2d6 + 1" }, { label: "Sneak" });
    assert.equal(event.verdict, "awaiting seed", "the relay rolls fair dice here");
    await until(() => byFlag(world, event.seq).length === 1, 4000, "the card");
    await aria.module.settled();
    const [card] = byFlag(world, event.seq);
    const onGm = gm.render(card);
    const onAria = aria.render(card);
    for (const element of [onGm, onAria]) {
      // A card may be drawn before its viewer's client has the roll: its mark follows when the roll arrives.
      await until(() => verdictIn(element.html()) !== null, 8000, "the card's verdict");
      const html = element.html();
      assert.equal(verdictIn(html), "awaiting seed", html);
      assert.match(html, /<svg class="tablerelay-fair-icon"/, "the icon is drawn in SVG");
      assert.match(html, /title="Awaiting seed: the relay committed to dice seed 1 before this roll/);
      assert.match(html, /<details class="tablerelay-fair [^"]*"/, "a tap opens the explanation");
      assert.doesNotMatch(html.slice(html.indexOf("data-tablerelay-fair")), /[✓✔✗✘☑⌛]/u, "no font glyph stands for an icon");
    }
    // The signature mark is still there, before the verdict.
    assert.ok(onGm.html().indexOf("data-tablerelay-mark") < onGm.html().indexOf("data-tablerelay-fair"));

    const reveal = await gm.module.api.revealSeed();
    assert.equal(reveal.kind, "seed_reveal");
    const sent = gm.wire.sent.filter((f) => f.t === "seed");
    assert.deepEqual(sent.map((f) => f.op), ["reveal"], "the GM's client sent one seed reveal frame");
    // The cards already drawn turn in place, on both screens.
    await until(() => verdictIn(onGm.html()) === "fair", 8000, "the GM's card to turn fair");
    await until(() => verdictIn(onAria.html()) === "fair", 8000, "Aria's card to turn fair");
    assert.match(onAria.html(), /title="Fair: this browser recomputed these dice from the relay&#39;s dice seed 1[^"]*the roller&#39;s seed/);
    assert.equal(verdictIn(gm.render(card).html()), "fair", "and a card drawn now shows it too");
    assert.deepEqual([gm.notifications, aria.notifications].flat().filter(([level]) => level === "error"), []);
    assert.equal(gm.document.getElementById("tablerelay-alarm"), null, "no alarm, no banner");
  });

  test("a Foundry roll's card shows the verdict of the faces it took from the relay", async () => {
    const { gm, aria } = await fairTable();
    const roll = aria.newRoll("1d20 + 3");
    await aria.as(() => roll.evaluate());
    const [seq] = roll.options.tablerelay.seqs;
    const message = await aria.as(() => aria.ChatMessage.create({ content: "", rolls: [JSON.stringify(roll.toJSON())] }));
    assert.deepEqual(message.flags.tablerelay.seqs, [seq]);
    const element = gm.render(message);
    await until(() => verdictIn(element.html()) !== null, 8000, "the card's verdict");
    assert.equal(verdictIn(element.html()), "awaiting seed");
    await gm.module.api.revealSeed();
    await until(() => verdictIn(element.html()) === "fair", 8000, "the card to turn fair");
  });

  test("a GM's hidden roll: sealed on the players' card, then the roll's verdict at its reveal, and the seed's after", async () => {
    const { world, gm, aria } = await fairTable();
    const event = await gm.module.api.roll({ system: "dice", formula: "1d12" }, { visibility: "gm", label: "Ambush" });
    await until(() => byFlag(world, event.seq).length === 2, 4000, "the whisper and the card");
    await gm.module.settled();
    const card = byFlag(world, event.seq).find((m) => m.flags.tablerelay.sealed);
    const onAria = aria.render(card);
    await until(() => verdictIn(onAria.html()) !== null, 8000, "the card's verdict");
    assert.equal(verdictIn(onAria.html()), "sealed");
    assert.match(onAria.html(), /title="Sealed: a hidden roll/);
    await gm.module.api.reveal(event.seq);
    await until(() => byFlag(world, event.seq).some((m) => m.flags.tablerelay.revealed), 4000, "the card turned into the roll");
    const opened = byFlag(world, event.seq).find((m) => m.flags.tablerelay.revealed);
    const shown = aria.render(opened);
    // None until this client's check of the card vouches for it (a macro's card naming a roll gets none).
    await until(() => ![null, "sealed"].includes(verdictIn(shown.html())), 8000, "the revealed roll's verdict");
    assert.equal(verdictIn(shown.html()), "awaiting seed", "the revealed roll waits for its seed");
    await gm.module.api.revealSeed();
    await until(() => verdictIn(shown.html()) !== "awaiting seed", 8000, "the seed's verdict");
    // Aria's client witnessed the GM's roll (its hello said so, and it answered): a contribution from outside
    // the GM's side, so the roll is fair. A hidden roll asks its roller too (spec/fairness.md): the GM's own
    // value is in the roll, and is no witness.
    assert.equal(verdictIn(shown.html()), "fair", shown.html());
    assert.match(shown.html(), /fair · 1 witness</);
  });
});

describe("the GM's seed button", () => {
  test("a GM's panel offers to reveal the dice seed on a fair relay, and the cards turn when it is pressed", async () => {
    const { world, gm, aria } = await fairTable();
    // A fair room commits its first seed with its first roll: the button comes with it.
    const event = await aria.module.api.roll({ system: "dice", formula: "1d8" });
    const panel = gm.document.getElementById("tablerelay-panel");
    await until(() => /data-action="seed-reveal"/.test(panel.innerHTML), 4000, "the GM's seed button");
    assert.match(panel.innerHTML, /Reveal dice seed/);
    assert.doesNotMatch(aria.document.getElementById("tablerelay-panel").innerHTML, /seed-reveal/, "a player's panel has none");
    await until(() => byFlag(world, event.seq).length === 1, 4000, "the card");
    const element = gm.render(byFlag(world, event.seq)[0]);
    await until(() => verdictIn(element.html()) === "awaiting seed", 8000, "the card's verdict");
    // The button, as Foundry hands its click to the panel's listener.
    panel.listeners.click[0]({ target: { closest: () => ({ dataset: { action: "seed-reveal" } }) } });
    await until(() => verdictIn(element.html()) === "fair", 8000, "the card to turn fair");
    await until(() => gm.notifications.some(([level, text]) => level === "info" && /dice seed 1 revealed/.test(text)), 4000, "the GM's notice");
    assert.deepEqual(gm.wire.sent.filter((f) => f.t === "seed").map((f) => f.op), ["reveal"]);
  });

  test("without fair dice: no seed button, and no verdict mark on a card", async () => {
    const plain = await plainServer();
    const room = createRoom(undefined, plain);
    const world = new World([{ id: "GMuser0000000001", name: "Gamemaster", isGM: true }]);
    const gm = await foundry(world, "GMuser0000000001", room.gm, plain);
    const event = await gm.module.api.roll({ system: "dice", formula: "1d8" });
    assert.equal(event.verdict, undefined);
    await until(() => byFlag(world, event.seq).length === 1, 4000, "the card");
    await gm.module.settled();
    const html = await gm.renderedChecked(byFlag(world, event.seq)[0]);
    assert.match(html, /signed ✓/, "the signature mark is there");
    assert.equal(verdictIn(html), null, "and no fair dice mark");
    assert.doesNotMatch(gm.document.getElementById("tablerelay-panel").innerHTML, /seed-reveal/);
  });
});

describe("player clients witness", () => {
  test("the module's hello says witness: true, and a GM's public roll carries the player's value", async () => {
    const { world, gm, aria } = await fairTable();
    const hellos = aria.wire.sent.filter((f) => f.t === "hello");
    assert.ok(hellos.length >= 1);
    for (const hello of hellos) assert.equal(hello.witness, true, "a player's Foundry client witnesses");
    const event = await gm.module.api.roll({ system: "dice", formula: "1d20" }, { label: "GM's public" });
    const witnesses = event.fair.witnesses.map(([id]) => id);
    assert.deepEqual(witnesses, [aria.module.client.you.id], "Aria's client answered; the GM is no witness of its own roll");
    await until(() => byFlag(world, event.seq).length === 1, 4000, "the card");
    const element = aria.render(byFlag(world, event.seq)[0]);
    await until(() => verdictIn(element.html()) !== null, 8000, "the card's verdict");
    await gm.module.api.revealSeed();
    await until(() => verdictIn(element.html()) === "fair", 8000, "the GM's roll to turn fair");
    assert.match(element.html(), /fair · 1 witness</);
  });

  test("a GM's roll nobody witnessed is 'unwitnessed', never 'fair'", async () => {
    const relay = await fairServer();
    const room = createRoom(undefined, relay);
    const world = new World([{ id: "GMuser0000000001", name: "Gamemaster", isGM: true }]);
    const gm = await foundry(world, "GMuser0000000001", room.gm, relay);
    const event = await gm.module.api.roll({ system: "dice", formula: "1d20" });
    assert.deepEqual(event.fair.witnesses, []);
    await until(() => byFlag(world, event.seq).length === 1, 4000, "the card");
    const element = gm.render(byFlag(world, event.seq)[0]);
    await until(() => verdictIn(element.html()) !== null, 8000, "the card's verdict");
    await gm.module.api.revealSeed();
    await until(() => verdictIn(element.html()) !== "awaiting seed", 8000, "the seed's verdict");
    assert.equal(verdictIn(element.html()), "unwitnessed");
    assert.match(element.html(), /nobody outside the relay contributed/);
  });
});

describe("alarms", () => {
  test("a seed reveal that does not match its commitment: a notification, a red banner and a failed card", async () => {
    // Aria's relay connection lies about the seed it reveals (the relay itself is honest: the GM sees fair).
    const flip = (frame) => {
      if (frame.kind === "seed_reveal") frame.seed = Uint8Array.from(frame.seed, (b, i) => (i === 0 ? b ^ 1 : b));
    };
    const { world, gm, aria } = await fairTable({ tamper: flip });
    const event = await aria.module.api.roll({ system: "dice", formula: "1d20" });
    await until(() => byFlag(world, event.seq).length === 1, 4000, "the card");
    const [card] = byFlag(world, event.seq);
    const onAria = aria.render(card);
    const onGm = gm.render(card);
    await until(() => verdictIn(onAria.html()) !== null && verdictIn(onGm.html()) !== null, 8000, "the cards' verdicts");
    assert.equal(verdictIn(onAria.html()), "awaiting seed");
    await gm.module.api.revealSeed();
    await until(() => verdictIn(onAria.html()) === "failed", 8000, "Aria's card to fail");
    assert.match(onAria.html(), /tablerelay-fair-failed/);
    assert.match(onAria.html(), /does not match its commitment/);
    const alarms = aria.notifications.filter(([level, text]) => level === "error" && /fairness alarm/.test(text));
    assert.equal(alarms.length, 1, `one notice for the outbreak: ${JSON.stringify(aria.notifications)}`);
    const banner = aria.document.getElementById("tablerelay-alarm");
    assert.ok(banner, "the red banner is on Aria's page");
    assert.match(banner.innerHTML, /role="alert"/);
    assert.match(banner.innerHTML, /Fairness alarm/);
    assert.match(banner.innerHTML, /seed 1 does not match what it committed to/);
    assert.match(banner.innerHTML, new RegExp(`Roll ${event.seq} failed its fairness check`), "and the roll's own alarm");
    assert.match(banner.innerHTML, /<svg class="tablerelay-fair-icon"/);
    // The honest connection found nothing wrong: its card is fair and its page has no banner.
    await until(() => verdictIn(onGm.html()) === "fair", 8000, "the GM's card to turn fair");
    assert.equal(gm.document.getElementById("tablerelay-alarm"), null);
    // Dismissed, the banner goes; the card stays failed.
    banner.listeners.click[0]({ target: { closest: (s) => (s === "[data-action=dismiss]" ? {} : null) } });
    assert.equal(banner.innerHTML, "");
    assert.equal(verdictIn(onAria.html()), "failed");
  });
});

describe("the marks' HTML", () => {
  test("every verdict has its words and icon, the worst of several wins, and nothing is shown without one", async () => {
    const i18n = new HarnessLocalization({ lang: "en" });
    await i18n.initialize();
    const j = (verdict, witnesses = 0) => ({ verdict, reason: "why", witnesses, n: 3 });
    const words = { fair: "fair", unwitnessed: "unwitnessed", "awaiting seed": "awaiting seed", sealed: "sealed", failed: "fairness check failed" };
    for (const [verdict, word] of Object.entries(words)) {
      const html = fairMarkHTML(j(verdict), i18n);
      assert.equal(verdictIn(html), verdict);
      assert.ok(html.includes(`<span class="tablerelay-fair-word">${word}</span>`), html);
      assert.doesNotMatch(html, /TABLERELAY\.|undefined/);
    }
    assert.match(fairMarkHTML(j("fair", 2), i18n), />fair · 2 witnesses</);
    assert.equal(verdictIn(fairMarkHTML(j("something new"), i18n)), "failed", "an unknown verdict is never shown as fair");
    assert.equal(fairMarkHTML(null, i18n), "");
    const marks = new Map([["r:e:1", j("fair", 2)], ["r:e:2", j("awaiting seed")], ["r:e:3", j("fair", 1)]]);
    assert.equal(judge(marks, ["r:e:1", "r:e:2"]).verdict, "awaiting seed");
    assert.equal(judge(marks, ["r:e:1", "r:e:3"]).witnesses, 1);
    assert.equal(judge(marks, ["r:e:1", "r:e:9"]), null, "one roll unknown here: no verdict");
    assert.deepEqual(rollKeys({ via: true, room: "r", epoch: "e", seqs: [1, 2] }), ["r:e:1", "r:e:2"]);
    assert.deepEqual(rollKeys({ via: true, room: "r", epoch: "e", seq: 4, revealed: 5 }), ["r:e:4"]);
    assert.deepEqual(rollKeys({ via: false, room: "r", epoch: "e", seq: 4 }), []);
    assert.deepEqual(rollKeys({ via: true, room: "r", epoch: "e", seqs: [1, { toString: 1 }] }), [], "a macro's flags no number reads");
    assert.deepEqual(rollKeys({ via: true, room: "r", epoch: "e", seq: "7" }), ["r:e:7"]);
    const gmRoll = { actor: { id: "g", role: "gm" }, fair: { witnesses: [["g", new Uint8Array(16)], ["p", new Uint8Array(16)]] } };
    assert.equal(outsideWitnesses(gmRoll), 1, "a GM's own value for the GM's roll is no witness");
    assert.equal(outsideWitnesses({ ...gmRoll, actor: { id: "g", role: "player" } }), 2, "a player's own value is one");
    assert.equal(alarmBannerHTML([], i18n), "");
    assert.match(fairMarkHTML(j("fair"), i18n), /outside the relay \(the roller&#39;s seed\)/, "the reason in the world's words");
    assert.doesNotMatch(fairMarkHTML(j("awaiting seed"), i18n), /why/, "the JS client's English reason only for a failure");
    assert.match(fairMarkHTML(j("failed"), i18n), /Fairness check failed: why\./);
  });

  test("which 'awaiting seed' a roll's is, read from the JS client's own reasons, has its own words", async () => {
    const i18n = new HarnessLocalization({ lang: "en" });
    await i18n.initialize();
    const fair = { n: 1, seed: new Uint8Array(16), pending: null, nonce: null, witnesses: [], draws: [] };
    const roll = { seq: 5, kind: "roll", actor: { id: "p", role: "player" }, intent: { system: "dice", formula: "1d6" }, fair };
    const seen = new SeedBook();
    seen.noteOpen({ n: 1, commit: "00" });
    const plain = { ...roll };
    await seen.check("r", plain);
    // A client that joined after seed 1's commitment left the history: then after the seed's reveal.
    const book = new SeedBook();
    await book.check("r", roll);
    const unseen = { ...roll };
    await book.seedRevealed("r", { n: 1, seed: new Uint8Array(32), seq: 6 });
    const words = [];
    for (const [event, basis] of [[plain, undefined], [unseen, "unseen"], [roll, "recomputed"]]) {
      assert.equal(event.verdict, "awaiting seed");
      assert.equal(awaitingBasis(event.verdictReason), basis, event.verdictReason);
      const html = fairMarkHTML({ verdict: event.verdict, reason: event.verdictReason, witnesses: 0, n: 1, basis }, i18n);
      assert.doesNotMatch(html, new RegExp(event.verdictReason.slice(0, 20)));
      words.push(/title="([^"]*)"/.exec(html)[1]);
    }
    assert.equal(new Set(words).size, 3, words.join("\n"));
    assert.match(alarmBannerHTML([{ message: "<b>x</b>", seq: 3 }], i18n), /&#60;b&#62;x&#60;\/b&#62;/, "alarm text is escaped");
  });
});

