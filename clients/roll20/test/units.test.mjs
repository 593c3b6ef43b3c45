// The bridge's pure parts: commands, the election of posters, the posted log, settings.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { CommandError, isCommand, parseCommand } from "../src/commands.js";
import { primaryPoster, schedule } from "../src/election.js";
import { PostedLog } from "../src/posted.js";
import { normalizeSettings, settingsProblem } from "../src/settings.js";
import { memoryStore, userscriptStore } from "../src/storage.js";

describe("!tr commands", () => {
  test("dice formulas go to the dice system in Roll20's dialect", () => {
    assert.deepEqual(parseCommand("!tr 4d6kh3"), { intent: { system: "dice", formula: "4d6kh3", dialect: "roll20" }, visibility: "public" });
    assert.deepEqual(parseCommand("  !tr 2d20kh1 + 7  "), { intent: { system: "dice", formula: "2d20kh1 + 7", dialect: "roll20" }, visibility: "public" });
    assert.deepEqual(parseCommand("!tr {4d6+3d8}kh1 -- Fireball"), {
      intent: { system: "dice", formula: "{4d6+3d8}kh1", dialect: "roll20" },
      visibility: "public",
      label: "Fireball",
    });
  });

  test("system.name key=value rolls a system, with values typed as on the command line", () => {
    assert.deepEqual(parseCommand("!tr drawsteel.power characteristic=2 edges=1").intent, { system: "drawsteel.power", characteristic: 2, edges: 1 });
    assert.deepEqual(parseCommand("!tr daggerheart.duality modifier=-1 spend_hope=true experience=2").intent, {
      system: "daggerheart.duality", modifier: -1, spend_hope: true, experience: 2,
    });
    assert.deepEqual(parseCommand("!tr nexus.test attribute_die=d12+1 skill_rank=2").intent, { system: "nexus.test", attribute_die: "d12+1", skill_rank: 2 });
    assert.deepEqual(parseCommand('!tr daggerheart.attack modifier=4 targets=[{"name": "Rook", "evasion": 12}]').intent, {
      system: "daggerheart.attack", modifier: 4, targets: [{ name: "Rook", evasion: 12 }],
    });
    assert.deepEqual(parseCommand("!tr dice formula=2d6 dialect=foundry").intent, { system: "dice", formula: "2d6", dialect: "foundry" });
    assert.equal(typeof parseCommand("!tr dice formula=1d6 n=9007199254740993").intent.n, "bigint");
  });

  test("the four commands set the visibility", () => {
    assert.equal(parseCommand("!tr 1d6").visibility, "public");
    assert.equal(parseCommand("!trgm 1d6").visibility, "gm");
    assert.equal(parseCommand("!TRB 1d6").visibility, "blind");
    assert.equal(parseCommand("!trs 1d6").visibility, "self");
  });

  test("other lines and other API commands are not ours", () => {
    for (const text of ["4d6", "/r 1d20", "!track", "!trx 1d6", "hello !tr 1d6", "", "!t r"]) {
      assert.equal(isCommand(text), false, text);
      assert.equal(parseCommand(text), null, text);
    }
    assert.equal(isCommand("!tr"), true);
  });

  test("mistakes are sentences", () => {
    assert.throws(() => parseCommand("!tr"), CommandError);
    assert.throws(() => parseCommand("!tr drawsteel.power characteristic"), /key=value/);
    assert.throws(() => parseCommand("!tr drawsteel.power edges=1 edges=2"), /given twice/);
    assert.throws(() => parseCommand("!tr drawsteel.power system=x"), /first word/);
    assert.throws(() => parseCommand(`!tr 1d6 -- ${"x".repeat(201)}`), /200/);
  });
});

describe("who posts", () => {
  const gm = { id: "gm-1", name: "Gwen", role: "gm" };
  const ana = { id: "a", name: "Ana", role: "player" };
  const bob = { id: "b", name: "Bob", role: "player" };
  const spec = { id: "s", name: "Sam", role: "spectator" };
  const members = [ana, spec, bob, gm];
  const main = { slot: "main" };
  const whisper = { slot: "whisper" };
  const all = { post: "all", fallbackDelay: 1000 };
  const mine = { post: "mine", fallbackDelay: 1000 };

  test("the roller posts at once, whatever its setting", () => {
    const event = { visibility: "public", actor: ana };
    assert.deepEqual(schedule(main, event, members, ana, mine), { at: 0, check: false });
  });

  test("everyone else stands by: GMs first, then players in join order; spectators and 'mine' never", () => {
    const event = { visibility: "public", actor: ana };
    assert.deepEqual(schedule(main, event, members, gm, all), { at: 1000, check: true });
    assert.deepEqual(schedule(main, event, members, bob, all), { at: 2000, check: true });
    assert.equal(schedule(main, event, members, bob, mine), null);
    assert.deepEqual(schedule(main, event, members, spec, all), { at: 3000, check: true });
  });

  test("a blind roll's whisper: only GMs hold it, so the first GM is its primary poster", () => {
    const event = { visibility: "blind", actor: ana };
    assert.equal(primaryPoster(whisper, event, members), gm.id);
    assert.deepEqual(schedule(whisper, event, members, gm, mine), { at: 0, check: false });
    assert.equal(primaryPoster(whisper, { visibility: "gm", actor: ana }, members), ana.id);
    assert.equal(primaryPoster(whisper, { visibility: "blind", actor: ana }, [ana, bob]), null);
  });
});

describe("the posted log", () => {
  test("remembers posts and progress per room and epoch, across a reload", async () => {
    const store = memoryStore();
    const first = await new PostedLog(store, "room", "e1").load();
    assert.equal(first.known, false);
    await first.add("12");
    await first.add("13s");
    await first.through(13);
    const again = await new PostedLog(store, "room", "e1").load();
    assert.equal(again.known, true);
    assert.equal(again.upTo, 13);
    assert.ok(again.has("12") && again.has("13s") && !again.has("13"));
    const otherEpoch = await new PostedLog(store, "room", "e2").load();
    assert.equal(otherEpoch.known, false);
    assert.equal(otherEpoch.has("12"), false);
  });

  test("a second tab's posts are seen after refresh()", async () => {
    const store = memoryStore();
    const a = await new PostedLog(store, "r", "e").load();
    const b = await new PostedLog(store, "r", "e").load();
    await a.add("5");
    assert.equal(b.has("5"), false);
    await b.refresh();
    assert.equal(b.has("5"), true);
  });
});

describe("settings and storage", () => {
  test("defaults and checks", () => {
    const s = normalizeSettings({ relayUrl: " wss://relay.example/ws ", token: " t ", post: "everything", fallbackDelay: "-3" });
    assert.deepEqual(s, { relayUrl: "wss://relay.example/ws", token: "t", name: "", post: "mine", fallbackDelay: 1500 });
    assert.equal(settingsProblem(s), null);
    assert.match(settingsProblem({ ...s, relayUrl: "https://relay.example" }), /wss:/);
    assert.match(settingsProblem({ ...s, token: "" }), /token/);
  });

  test("a userscript manager's storage holds JSON text (GM.* or the older GM_*)", async () => {
    const saved = {};
    const old = userscriptStore({ GM_getValue: (k) => saved[k], GM_setValue: (k, v) => { saved[k] = v; } });
    await old.set("settings", { post: "all" });
    assert.equal(saved.settings, '{"post":"all"}');
    assert.deepEqual(await old.get("settings"), { post: "all" });
    assert.equal(await old.get("missing"), undefined);
    const modern = userscriptStore({ GM: { getValue: async (k) => saved[k], setValue: async (k, v) => { saved[k] = v; } } });
    assert.deepEqual(await modern.get("settings"), { post: "all" });
  });
});
