// The module's translations: every key the scripts use is in lang/en.json and every string there is used;
// `format` calls pass the placeholders their strings have; and, with a pseudo-language built here from
// en.json as the world's language, everything the module shows (the panel, the connection form, the settings,
// the dice method, chat marks, the cards it posts, its notifications) comes from that language: no English
// string of en.json and no raw TABLERELAY key is left on screen. The English texts are checked the same way.

import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, test } from "node:test";
import { closeAll, createRoom, server, until } from "../../js/test/helpers.mjs";
import { CommandError, parseCommand } from "../scripts/commands.mjs";
import { RelayUnavailable } from "../scripts/fulfillment.mjs";
import { TableRelayModule } from "../scripts/module.mjs";
import { connectionFormHTML, markHTML, panelHTML, sealedCardHTML } from "../scripts/ui.mjs";
import { World } from "./harness.mjs";
import { HarnessLocalization, MODULE_ROOT, flatten, manifestLanguages, placeholders, readTranslations } from "./localization.mjs";

const SCRIPTS = resolve(MODULE_ROOT, "scripts");
const EN = flatten(readTranslations(resolve(MODULE_ROOT, "lang", "en.json")));
const sources = Object.fromEntries(
  readdirSync(SCRIPTS, { recursive: true })
    .map(String)
    .filter((name) => name.endsWith(".mjs"))
    .map((name) => [name, readFileSync(join(SCRIPTS, name), "utf8")]),
);

/** Every TABLERELAY key written literally in the scripts. */
function keysIn(/** @type {Record<string, string>} */ files) {
  const used = new Set();
  for (const text of Object.values(files)) for (const m of text.matchAll(/["'`](TABLERELAY\.[\w.]+)["'`]/g)) used.add(m[1]);
  return used;
}

/** The parts of a list split at its top-level commas (not those inside parentheses, brackets or quotes). */
function topLevel(/** @type {string} */ list) {
  const parts = [""];
  let depth = 0;
  let quote = "";
  for (const c of list) {
    if (quote) quote = c === quote ? "" : quote;
    else if (`"'\``.includes(c)) quote = c;
    else if ("([".includes(c)) depth++;
    else if (")]".includes(c)) depth--;
    else if (c === "," && depth === 0) {
      parts.push("");
      continue;
    }
    parts[parts.length - 1] += c;
  }
  return parts;
}

/**
 * Every call that passes a key and then an object literal of data (`format("K", { a, b: x })`, `notify(level,
 * "K", {…})`, `new CommandError("K", {…})`…): the key and the names the object gives.
 */
function formatCalls(/** @type {Record<string, string>} */ files) {
  const calls = [];
  for (const [file, text] of Object.entries(files)) {
    for (const m of text.matchAll(/"(TABLERELAY\.[\w.]+)"\s*,\s*\{([^{}]*)\}/g)) {
      const names = topLevel(m[2])
        .map((part) => part.split(":")[0].trim())
        .filter(Boolean);
      calls.push({ file, key: m[1], names });
    }
  }
  return calls;
}

describe("lang/en.json and the scripts", () => {
  test("module.json names the English file, and it is where it says", () => {
    const languages = manifestLanguages();
    assert.deepEqual(
      languages.map(({ lang, name }) => ({ lang, name })),
      [{ lang: "en", name: "English" }],
    );
    assert.equal(languages[0].path, resolve(MODULE_ROOT, "lang", "en.json"));
  });

  test("every key the scripts use is in en.json, and every string of en.json is used", () => {
    const used = keysIn(sources);
    assert.ok(used.size >= 60, `only ${used.size} keys found: the scan must be broken`);
    const missing = [...used].filter((key) => typeof EN[key] !== "string");
    assert.deepEqual(missing, [], "keys the scripts use that en.json lacks");
    const orphans = Object.keys(EN).filter((key) => !used.has(key));
    assert.deepEqual(orphans, [], "strings of en.json no script uses");
    for (const [key, value] of Object.entries(EN)) {
      assert.ok(key.startsWith("TABLERELAY."), `${key} is in the module's namespace`);
      assert.equal(typeof value, "string");
      // Foundry's format takes every {…} for a placeholder: braces are for placeholders only.
      assert.doesNotMatch(value.replace(/{\w+}/g, ""), /[{}]/, `${key} has a brace that is no placeholder`);
    }
  });

  test("the scan finds what it is meant to find", () => {
    const files = { "a.mjs": 'x.format("TABLERELAY.A.b", { who, count: f(n, ","), s: "a, b" }); y("TABLERELAY.C")' };
    assert.deepEqual([...keysIn(files)], ["TABLERELAY.A.b", "TABLERELAY.C"]);
    assert.deepEqual(formatCalls(files), [{ file: "a.mjs", key: "TABLERELAY.A.b", names: ["who", "count", "s"] }]);
  });

  test("a call's data names exactly the placeholders of its string", () => {
    const calls = formatCalls(sources);
    assert.ok(calls.length >= 15, `only ${calls.length} calls with data found: the scan must be broken`);
    for (const { file, key, names } of calls) {
      assert.deepEqual(names.sort(), [...new Set(placeholders(EN[key]))].sort(), `${file}: ${key}`);
    }
    // A key used with no data in any call must have no placeholders, unless a table of keys passes it on
    // (the sealed card's sentence per visibility), the key reaches format with data held elsewhere (a
    // CommandError's) or its data holds markup the scan does not read; those are checked at run time below,
    // by the harness's strict format.
    const withData = new Set(calls.map((c) => c.key));
    const passedOn = new Set(["TABLERELAY.Card.Made.gm", "TABLERELAY.Card.Made.blind", "TABLERELAY.Card.Made.self", "TABLERELAY.Card.Made.hidden", "TABLERELAY.Command.NothingToRoll", "TABLERELAY.Connection.StatusAs"]);
    for (const key of keysIn(sources)) {
      if (placeholders(EN[key]).length && !withData.has(key)) assert.ok(passedOn.has(key), `${key} has placeholders but no call gives it data`);
    }
  });

  test("at run time every string is given the data its placeholders need (all the HTML's variants)", async () => {
    const strict = new HarnessLocalization({ lang: "en" });
    await strict.initialize();
    const rendered = [];
    for (const visibility of ["gm", "blind", "self", "secret"]) {
      rendered.push(sealedCardHTML({ seq: 1, visibility, actor: { name: "Aria" }, commitment: "ab".repeat(32) }, strict));
    }
    rendered.push(sealedCardHTML({ seq: 1, visibility: "gm" }, strict));
    const reasons = Object.keys(EN)
      .filter((key) => key.startsWith("TABLERELAY.Check."))
      .map((key) => ({ key, data: Object.fromEntries(placeholders(EN[key]).map((name) => [name, "x"])) }))
      .map((reason) => (Object.keys(reason.data).length ? reason : { key: reason.key }));
    const marks = [
      [{ state: "not-relay" }, undefined],
      [{ state: "not-relay", reason: "why" }, { via: false, reason: "why" }],
      ...reasons.map((reason) => [{ state: "failed", reason, seqs: [3] }, { via: true, seq: 3 }]),
      ...reasons.map((reason) => [{ state: "unchecked", reason, seqs: [3, 4] }, { via: true, seqs: [3, 4] }]),
      [{ state: "checking" }, { via: true, seq: 3 }],
      [{ state: "verified", seqs: [3] }, { via: true, seq: 3 }],
      [{ state: "verified", seqs: [3] }, { via: true, seq: 3, revealed: 4 }],
    ];
    for (const [verdict, flags] of marks) rendered.push(markHTML(verdict, flags, { showVerified: true }, strict));
    for (const status of ["open", "connecting", "reconnecting", "closed", "idle"]) {
      for (const isGM of [true, false]) {
        rendered.push(panelHTML({ fear: 2, hope: { p1: 3 } }, { isGM, status, names: { p1: "Aria" } }, strict));
        for (const hasToken of [true, false]) {
          for (const participant of [null, "p1"]) {
            rendered.push(connectionFormHTML({ relayUrl: "", hasToken, isGM, status, participant }, strict));
          }
        }
      }
    }
    for (const html of rendered) assert.doesNotMatch(html, /TABLERELAY\.|undefined/);
    for (const line of ["/tr", "/tr a.b x=1 x=2", "/tr a.b system=c.d", '/tr a.b t=["x', `/tr 1d4 # ${"x".repeat(201)}`]) {
      assert.throws(() => parseCommand(line), (err) => err instanceof CommandError && !/TABLERELAY\./.test(strict.format(err.key, err.data)));
    }
  });

  test("the harness's Localization behaves as Foundry's", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tablerelay-i18n-"));
    writeFileSync(join(dir, "fr.json"), JSON.stringify({ "TABLERELAY.Panel": { Fear: "Peur" }, TABLERELAY: { Panel: { FearCount: "{count} Peur" } } }));
    const fr = new HarnessLocalization({ lang: "fr", languages: [...manifestLanguages(), { lang: "fr", path: join(dir, "fr.json") }] });
    assert.equal(fr.localize("TABLERELAY.Panel.Fear"), "TABLERELAY.Panel.Fear", "nothing is translated before initialize");
    await fr.initialize();
    assert.equal(fr.lang, "fr");
    assert.equal(fr.localize("TABLERELAY.Panel.Fear"), "Peur", "dotted and nested keys both load");
    assert.equal(fr.format("TABLERELAY.Panel.FearCount", { count: "3" }), "3 Peur");
    assert.equal(fr.localize("TABLERELAY.Panel.GainFear"), "Gain 1 Fear", "English stands in for a missing string");
    assert.equal(fr.has("TABLERELAY.Panel.GainFear"), true);
    assert.equal(fr.has("TABLERELAY.Panel.GainFear", false), false);
    assert.equal(fr.localize("TABLERELAY.Nope"), "TABLERELAY.Nope", "a missing key shows as itself");
    assert.throws(() => fr.format("TABLERELAY.Panel.FearCount", {}), /exactly its placeholders/);
    assert.throws(() => fr.localize("TABLERELAY.Panel.FearCount"), /use format/);
    const unknown = new HarnessLocalization({ lang: "xx" });
    await unknown.initialize();
    assert.equal(unknown.lang, "en", "a language no package offers falls back to English");
  });
});

// ---- the pseudo-language ----------------------------------------------------------------------------------

/** Latin letters to look-alikes, so no English word survives; placeholders are kept. */
const LOOKALIKE = Object.fromEntries(
  [..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"].map((c, i) => [c, [..."àƀçďéƒğĥïĵķļɱñöþʠŕšţüṽŵẋýžÀƁÇĎÉƑĞĤÏĴĶĻṀÑÖÞǪŔŠŢÜṼŴẊÝŽ"][i]]),
);

/** A string of the pseudo-language: every letter replaced, `{placeholders}` kept, the whole within ⟦ ⟧. */
function pseudo(/** @type {string} */ text) {
  const words = text.split(/({\w+})/).map((part, i) => (i % 2 ? part : [...part].map((c) => LOOKALIKE[c] ?? c).join("")));
  return `⟦${words.join("")}⟧`;
}

/** The strings a person sees in some HTML: its text and its title, aria-label and placeholder attributes. */
function visible(/** @type {string} */ html) {
  const decode = (/** @type {string} */ s) => s.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)));
  const attributes = [...html.matchAll(/\s(?:title|aria-label|placeholder)="([^"]*)"/g)].map((m) => decode(m[1]));
  const text = decode(html.replace(/<[^>]*>/g, "\n")).split("\n");
  return [...attributes, ...text].map((s) => s.trim()).filter(Boolean);
}

/**
 * What on screen is not the pseudo-language: any Latin letter left once the data it shows (names, ids,
 * addresses, the brand) is taken out, and any English string of en.json.
 * @param {string[]} texts @param {string[]} data
 */
function notPseudo(texts, data) {
  const english = Object.values(EN)
    .flatMap((value) => value.split(/{\w+}/))
    .map((part) => part.trim())
    .filter((part) => /[A-Za-z]{3}/.test(part));
  const found = [];
  for (const text of texts) {
    let rest = text;
    for (const d of [...data].sort((a, b) => b.length - a.length)) rest = rest.split(d).join(" ");
    if (/TABLERELAY\./.test(text)) found.push(`raw key: ${text}`);
    else if (/[A-Za-z]/.test(rest)) found.push(`not translated: ${text}`);
    const leaked = english.find((part) => rest.includes(part));
    if (leaked) found.push(`English "${leaked}": ${text}`);
  }
  return found;
}

describe("a world in another language", () => {
  const modules = [];
  after(() => {
    for (const m of modules) m.client?.close();
    closeAll();
  });

  test("the check sees English, raw keys and untranslated words", () => {
    assert.deepEqual(notPseudo([pseudo("Fear")], []), []);
    assert.deepEqual(notPseudo(["⟦àƀ⟧ Fear"], []), ["not translated: ⟦àƀ⟧ Fear", 'English "Fear": ⟦àƀ⟧ Fear']);
    assert.deepEqual(notPseudo(["TABLERELAY.Panel.Fear"], [])[0], "raw key: TABLERELAY.Panel.Fear");
    assert.deepEqual(notPseudo([`${pseudo("made a roll")} Aria`], ["Aria"]), []);
    assert.deepEqual(visible('<p title="a &#39;b&#39;">c<b>d</b></p>'), ["a 'b'", "c", "d"]);
  });

  /** A started module on a harness client of `world`, as module.test.mjs starts one. */
  async function foundry(world, userId, { token, url = server.url, rolls = "all", unreachable = "fallback", generation } = {}) {
    const client = world.client(userId, { document: true, generation });
    const module = new TableRelayModule(client);
    modules.push(module);
    client.module = module;
    module.init();
    await client.game.i18n.initialize();
    if (!world.configured) {
      Object.entries({ relayUrl: url, rolls, unreachable }).forEach(([key, value]) => world.worldSettings.set(`tablerelay.${key}`, value));
      world.configured = true;
    }
    if (token) client.storage.set("tablerelay.token", token);
    module.ready();
    if (token && url === server.url) {
      await until(() => module.connected && module.client.you, 8000, `${userId} connected`);
      await until(() => client.game.user.getFlag("tablerelay", "participant") === module.client.you.id, 4000, "participant flag");
    }
    return client;
  }

  /** A world whose language is `lang`, with a language file of it made from en.json by `word`. */
  function world(lang, word) {
    const dir = mkdtempSync(join(tmpdir(), "tablerelay-lang-"));
    const translated = Object.fromEntries(Object.entries(EN).map(([key, value]) => [key, word(value)]));
    writeFileSync(join(dir, `${lang}.json`), JSON.stringify(translated, null, 2));
    return new World(
      [
        { id: "GMuser0000000001", name: "Gamemaster", isGM: true },
        { id: "Player0000000001", name: "Aria" },
        { id: "Player0000000002", name: "Brom" },
      ],
      { language: lang, languages: [{ lang, name: "Pseudo", path: join(dir, `${lang}.json`) }] },
    );
  }

  const settingsTexts = (client) => {
    const { menus, settings } = client.settingsConfig();
    return [...menus.flatMap((m) => [m.label, m.buttonText, m.hint]), ...settings.flatMap((s) => [s.label, s.hint, ...Object.values(s.choices ?? {})])];
  };

  test("everything the module shows comes from the world's language", async () => {
    const room = createRoom();
    const w = world("xx", pseudo);
    const gm = await foundry(w, "GMuser0000000001", { token: room.gm });
    const aria = await foundry(w, "Player0000000001", { token: room.player });
    const brom = await foundry(w, "Player0000000002", {});
    const shown = [];
    const data = new Set(["tablerelay", "Gamemaster", "Aria", "Brom", "wss://relay.example.org/ws", "/tr", "edges"]);
    for (const c of [gm, aria]) data.add(c.module.client.you.id);

    // Settings (their names, hints, choices), the menu, the dice method, the connection form and its title.
    shown.push(...settingsTexts(gm), ...settingsTexts(brom));
    assert.equal(gm.settingsConfig().settings.length, 4, "the GM sees the four world settings");
    shown.push(gm.diceConfig().tablerelay);
    for (const c of [gm, brom]) {
      const form = await c.openMenu("tablerelay.connection");
      shown.push(form.title, ...visible(form.html));
    }

    // The panel, with a Hope row and the GM's buttons.
    await gm.module.api.resource("hope", "gain", 2, { participant: aria.module.client.you.id });
    await until(() => /tablerelay-hope/.test(gm.document.getElementById("tablerelay-panel").innerHTML), 4000, "the Hope row");
    for (const c of [gm, aria, brom]) shown.push(...visible(c.document.getElementById("tablerelay-panel").innerHTML));

    // A public roll (its mark), a GM roll (the sealed card the players get), its reveal (its mark).
    aria.chat("/tr 2d6");
    await until(() => w.messages.some((m) => m.flags.tablerelay?.kind === "roll"), 4000, "the public roll");
    const hidden = await gm.module.api.roll({ system: "dice", formula: "1d20" }, { visibility: "gm" });
    await until(() => w.messages.filter((m) => m.flags.tablerelay?.seq === hidden.seq).length === 2, 4000, "the card");
    const card = w.messages.find((m) => m.flags.tablerelay?.seq === hidden.seq && m.flags.tablerelay.sealed);
    data.add(hidden.commitment).add(hidden.commitment.slice(0, 16));
    shown.push(...visible(card.content));
    for (const m of w.messages) shown.push(...visible(await gm.renderedChecked(m)));
    await gm.module.api.reveal(hidden.seq);
    await until(() => w.messages.some((m) => m.flags.tablerelay?.revealed), 4000, "the reveal");
    for (const m of w.messages) shown.push(...visible(await aria.renderedChecked(m)));
    assert.ok(shown.some((s) => s.includes(pseudo("revealed ✓ matches its seal · signed ✓"))), "the reveal's mark is there");

    // Notifications: a bad address, a broken command, an error from the API.
    await gm.as(() => gm.module.saveConnection({ relayUrl: "ftp://nowhere" }));
    gm.chat("/tr");
    gm.chat("/tr drawsteel.power edges=1 edges=2");
    await assert.rejects(brom.module.api.roll({ system: "dice", formula: "1d4" }), (err) => Boolean(shown.push(err.message)));
    shown.push(...[...gm.notifications, ...aria.notifications].map(([, text]) => text));
    assert.ok(gm.notifications.length >= 3, JSON.stringify(gm.notifications));

    assert.ok(shown.length > 60, `${shown.length} strings`);
    if (process.env.SHOW_I18N) console.log(shown);
    assert.deepEqual(notPseudo(shown, [...data]), []);
  });

  test("an outage, its refusal and the marked roll speak the world's language too", async () => {
    const w = world("xx", pseudo);
    const fallback = await foundry(w, "GMuser0000000001", { token: "x", url: "ws://127.0.0.1:9/ws" });
    const roll = fallback.newRoll("1d20");
    await fallback.as(() => roll.evaluate());
    const message = await fallback.as(() => fallback.ChatMessage.create({ content: "", rolls: [JSON.stringify(roll.toJSON())] }));
    const shown = [...fallback.notifications.map(([, text]) => text), ...visible(await fallback.renderedChecked(message)), message.flags.tablerelay.reason];
    assert.ok(fallback.notifications.some(([level]) => level === "warn"));

    const r = world("xx", pseudo);
    const refuse = await foundry(r, "GMuser0000000001", { token: "x", url: "ws://127.0.0.1:9/ws", unreachable: "refuse" });
    await assert.rejects(
      refuse.as(() => refuse.newRoll("1d20").evaluate()),
      (err) => err instanceof RelayUnavailable && Boolean(shown.push(err.message, err.reason)),
    );
    shown.push(...refuse.notifications.map(([, text]) => text));
    assert.ok(refuse.notifications.some(([level]) => level === "error"));
    assert.deepEqual(notPseudo(shown, ["tablerelay"]), []);
  });

  test("on Foundry v12 too, whose settings window may show choices as registered", async () => {
    const w = world("xx", pseudo);
    const gm = await foundry(w, "GMuser0000000001", { generation: 12 });
    const texts = settingsTexts(gm);
    assert.ok(texts.includes(pseudo("Only /tr commands")), "the module worded its choices at i18nInit");
    assert.deepEqual(notPseudo(texts, []), []);
  });

  test("in English, the same places show en.json's strings", async () => {
    const w = new World([{ id: "GMuser0000000001", name: "Gamemaster", isGM: true }]);
    const gm = await foundry(w, "GMuser0000000001", { generation: 12 });
    const { menus, settings } = gm.settingsConfig();
    const rolls = settings.find((s) => s.id === "tablerelay.rolls");
    assert.deepEqual([rolls.label, rolls.hint], [EN["TABLERELAY.Settings.rolls.Name"], EN["TABLERELAY.Settings.rolls.Hint"]]);
    assert.deepEqual(rolls.choices, { all: "All rolls", commands: "Only /tr commands" });
    assert.deepEqual(
      menus.map((m) => [m.label, m.buttonText, m.hint]),
      [["Connection", "Relay address and token", "Connect this browser to the table's relay."]],
    );
    assert.equal(gm.diceConfig().tablerelay, "tablerelay (the relay's secure dice)");
    const form = await gm.openMenu("tablerelay.connection");
    assert.equal(form.title, "tablerelay: connection");
    assert.match(form.html, /Status: <strong>not set up<\/strong>/);
    assert.deepEqual(
      notPseudo([form.title], []),
      ["not translated: tablerelay: connection", 'English "tablerelay: connection": tablerelay: connection'],
      "English is not the pseudo-language",
    );
    for (const text of [...settingsTexts(gm), ...visible(form.html), ...visible(gm.document.getElementById("tablerelay-panel").innerHTML)]) {
      assert.doesNotMatch(text, /TABLERELAY\./);
    }
  });
});
