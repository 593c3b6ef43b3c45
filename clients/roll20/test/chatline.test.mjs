// Every sample result's chat line, as the bridge posts it, read by an independent Roll20-syntax parser
// (dice-roller-parser, which implements Roll20's dice syntax): each inline roll is a constant, rolls no
// die, and evaluates to the relay's number. The samples come from the Python rules core
// (tests/roll20/samples.py), written to the file named by TABLERELAY_ROLL20_SAMPLES.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import diceRollerParser from "dice-roller-parser";
import { escapeRoll20, eventPageUrl, eventTag, postsFor, verification, withLabel } from "../src/chatline.js";

const samplesFile = process.env.TABLERELAY_ROLL20_SAMPLES;
assert.ok(samplesFile, "TABLERELAY_ROLL20_SAMPLES must name the samples file (tests/roll20/test_node.py writes it)");
const samples = JSON.parse(readFileSync(samplesFile, "utf8"));
const roller = new diceRollerParser.DiceRoller();
const ctx = { roomId: "8fdfc859f53c1c38", epoch: "1ea9399a0ffbba9d", relayUrl: "wss://relay.example/ws" };
const actor = { id: "3a6c01fa60370eb6", name: "Ana", role: "player" };

/** Does a parsed roll contain a die anywhere? (dice-roller-parser's node types for dice are "die", "fate"…) */
function rollsADie(node) {
  if (node === null || typeof node !== "object") return false;
  if (typeof node.type === "string" && /die|dice|fate/i.test(node.type)) return true;
  return Object.values(node).some(rollsADie);
}

const INLINE = /\[\[([\s\S]*?)\]\]/g;

/**
 * Check one posted line: its inline rolls (their count, each a constant worth `total`), and that nothing
 * outside them is Roll20 syntax that would act (a stray `[[`, a query, an attribute, a macro).
 */
function checkLine(text, total, where) {
  const inline = [...text.matchAll(INLINE)].map((m) => m[1]);
  const expected = typeof total === "number" ? 1 : 0;
  assert.equal(inline.length, expected, `${where}: ${inline.length} inline rolls in ${text}`);
  for (const expr of inline) {
    if (Number.isInteger(total)) {
      const parsed = roller.parse(`[[${expr}]]`);
      assert.equal(parsed.type, "inline", where);
      assert.equal(parsed.label, "", `${where}: the parser left "${parsed.label}" unread`);
      assert.ok(!rollsADie(parsed), `${where}: [[${expr}]] would roll a die`);
      assert.equal(roller.rollValue(`[[${expr}]]`), total, where);
    } else {
      // dice-roller-parser's grammar has integer literals only; Roll20 reads decimals. Assert exactly that
      // limit (a parser that learns decimals makes this fail, and the check above then applies to them).
      assert.throws(() => roller.parse(`[[${expr}]]`), /but "\." found/, where);
      assert.match(expr, /^-?\d+\.\d+$/, where);
      assert.equal(Number(expr), total, where);
    }
  }
  const outside = text.replace(INLINE, "").replace(/\[[^\]]*\]\(https?:\/\/[^)\s]+\)/g, "");
  for (const ch of ["[", "]", "|", "@", "%", "?", "$", "~"]) {
    assert.ok(!outside.includes(ch), `${where}: a raw ${ch} outside the inline rolls: ${text}`);
  }
  // Only the template call and references start with "&"; no "#" outside a reference (a macro call).
  assert.ok(!/&(?!\{template:default\}|#\d+;)/.test(outside), `${where}: a raw & in ${text}`);
  assert.ok(!/(?<!&)#/.test(outside), `${where}: a raw # in ${text}`);
  // The template's fields: `{{key=value}}` pairs and nothing else.
  const body = outside.replace(/^\/w gm /, "").replace("&{template:default}", "");
  assert.match(body, /^(\s*\{\{[^{}=]+=[^{}]*\}\})+\s*$/, `${where}: not only template fields: ${text}`);
}

describe("the posted chat line of every sample result", () => {
  test("covers every system and the dice formulas", () => {
    const systems = new Set(samples.map((s) => s.system));
    for (const system of [
      "dice",
      "drawsteel.power",
      "drawsteel.ability",
      "daggerheart.duality",
      "daggerheart.attack",
      "honors_edge.roll",
      "honors_edge.skill",
      "honors_edge.damage",
      "nexus.test",
      "nexus.check",
    ]) {
      assert.ok(systems.has(system), `no sample for ${system}`);
    }
    assert.ok(samples.length > 100, `only ${samples.length} samples`);
  });

  test("holds only constant inline rolls worth the relay's numbers (public rolls)", () => {
    samples.forEach((s, i) => {
      const event = { kind: "roll", seq: i + 1, visibility: "public", actor, label: null, result: { total: s.total }, roll20: { chat: s.chat } };
      const [post, ...more] = postsFor(event, ctx);
      assert.equal(more.length, 0);
      assert.ok(post.text.startsWith(`${s.chat} {{Relay=`), s.name);
      checkLine(post.text, s.total, s.name);
    });
  });

  test("titles the line with the roll's label exactly as the renderer does", () => {
    let decimals = 0;
    samples.forEach((s, i) => {
      // The relay renders without the label; the bridge's withLabel must give the renderer's own line.
      assert.equal(withLabel(s.chat, s.label), s.chat_labelled, s.name);
      const event = { kind: "roll", seq: i + 1, visibility: "public", actor, label: s.label, result: { total: s.total }, roll20: { chat: s.chat } };
      const [post] = postsFor(event, ctx);
      checkLine(post.text, s.total, `${s.name} (labelled)`);
      if (typeof s.total === "number" && !Number.isInteger(s.total)) decimals++;
    });
    assert.ok(decimals >= 1, "the samples include a decimal total (7 / 2)");
  });

  test("a GM roll: a sealed public line without the roll, and the full line as a whisper", () => {
    samples.forEach((s, i) => {
      const event = {
        kind: "roll", seq: i + 1, visibility: "gm", actor, label: s.label, commitment: "ab".repeat(32),
        result: { total: s.total, text: s.text }, roll20: { chat: s.chat },
      };
      const [sealed, whisper] = postsFor(event, ctx);
      assert.equal(sealed.slot, "sealed");
      assert.ok(!sealed.text.startsWith("/w"), "the sealed line is public");
      checkLine(sealed.text, undefined, `${s.name} (sealed)`);
      assert.ok(!sealed.text.includes(escapeRoll20(s.text)) && !sealed.text.includes("Total"), "nothing of the roll in the sealed line");
      assert.ok(sealed.text.includes(`{{Commitment=${"abababababababab ".repeat(4).trim()}}}`), "the commitment is shown");
      assert.equal(whisper.slot, "whisper");
      assert.ok(whisper.text.startsWith("/w gm &{template:default}"), whisper.text);
      checkLine(whisper.text, s.total, `${s.name} (whisper)`);
    });
  });

  test("a sealed placeholder yields only the sealed line; a self roll is never sent in full", () => {
    const sealed = { kind: "roll", seq: 3, visibility: "blind", actor, sealed: true, commitment: "cd".repeat(32) };
    assert.deepEqual(postsFor(sealed, ctx).map((p) => p.slot), ["sealed"]);
    const self = { kind: "roll", seq: 4, visibility: "self", actor, label: "x", commitment: "ef".repeat(32), result: { total: 3 }, roll20: { chat: samples[0].chat } };
    assert.deepEqual(postsFor(self, ctx).map((p) => p.slot), ["sealed"]);
  });

  test("a reveal: the roll in public with the result of the commitment check", () => {
    samples.slice(0, 40).forEach((s, i) => {
      const roll = { seq: 2, actor, visibility: "gm", label: s.label, result: { total: s.total, text: s.text, formula: "2d10 + 2" } };
      for (const verified of [true, false, null]) {
        const reveal = { kind: "reveal", seq: 10 + i, visibility: "public", actor, of: 2, roll, verified };
        const [post] = postsFor(reveal, ctx);
        checkLine(post.text, s.total, `${s.name} (reveal, ${verified})`);
        const word = { true: "matches the commitment", false: "does NOT match", null: "not checked" }[String(verified)];
        assert.ok(post.text.includes(escapeRoll20(word)), post.text);
      }
      // A reveal the relay rendered (as the roll it opens) uses that line, titled with the roll's label.
      const rendered = { kind: "reveal", seq: 98, visibility: "public", actor, of: 2, roll, verified: true, roll20: { chat: s.chat } };
      const [own] = postsFor(rendered, ctx);
      assert.ok(own.text.startsWith(s.chat_labelled + " {{Revealed="), own.text);
      checkLine(own.text, s.total, `${s.name} (a rendered reveal)`);
      // With the earlier full event at hand (its audience), the renderer's own line is used.
      const earlier = { kind: "roll", seq: 2, visibility: "gm", actor, label: s.label, roll20: { chat: s.chat }, result: { total: s.total } };
      const [post] = postsFor({ kind: "reveal", seq: 99, visibility: "public", actor, of: 2, roll, verified: true }, { ...ctx, recall: () => earlier });
      assert.ok(post.text.startsWith(s.chat_labelled), post.text);
      checkLine(post.text, s.total, `${s.name} (reveal of a held roll)`);
    });
  });
});

describe("the verification hook for signed events (spec: signing.md)", () => {
  const base = { kind: "roll", seq: 12, visibility: "public", actor, label: null, result: { total: samples[0].total }, roll20: { chat: samples[0].chat } };

  test("an unsigned event carries no mark and no link", () => {
    assert.equal(verification(base), null);
    const [post] = postsFor(base, ctx);
    assert.ok(post.text.endsWith(`{{Relay=${escapeRoll20(eventTag(ctx, 12, "main"))}}}`), post.text);
  });

  test("a verified signed event carries ✓ and a link to the relay's event page", () => {
    const signed = { ...base, kid: "0123456789abcdef", sig: new Uint8Array(64), verified: true };
    const [post] = postsFor(signed, ctx);
    const href = eventPageUrl(ctx.relayUrl, ctx.roomId, 12);
    assert.equal(href, "https://relay.example/events/8fdfc859f53c1c38/12");
    assert.ok(post.text.endsWith(`[✓ signed](${href})}}`), post.text);
    checkLine(post.text, samples[0].total, "signed");
  });

  test("a signature that fails is marked as failing; one not yet checked says only signed", () => {
    const failing = { ...base, kid: "k", sig: new Uint8Array(64), verified: false };
    assert.ok(postsFor(failing, ctx)[0].text.includes("[✗ signature does not verify](https://relay.example/events/"));
    const reasoned = { ...base, kid: "k", sig: new Uint8Array(64), verified: { ok: false, reason: "bad key" } };
    assert.equal(verification(reasoned)?.ok, false);
    const unchecked = { ...base, kid: "k", sig: new Uint8Array(64) };
    assert.ok(postsFor(unchecked, ctx)[0].text.includes("[signed](https://relay.example/events/"));
    // ws:// relays link to http://.
    assert.equal(eventPageUrl("ws://127.0.0.1:8765/ws", "r", 3), "http://127.0.0.1:8765/events/r/3");
  });
});

describe("the line checker itself", () => {
  // Controls: lines the checks above must refuse, so a checker that stopped checking would fail here.
  test("refuses a rolled inline roll, a wrong number, and raw Roll20 syntax", () => {
    const ok = "&{template:default} {{name=x}} {{Total=[[7]]}}";
    checkLine(ok, 7, "control");
    assert.throws(() => checkLine("&{template:default} {{name=x}} {{Total=[[1d20]]}}", 7, "control"), /roll a die|7/);
    assert.throws(() => checkLine(ok, 8, "control"));
    assert.throws(() => checkLine("&{template:default} {{name=@{hp}}} {{Total=[[7]]}}", 7, "control"), /raw @/);
    assert.throws(() => checkLine("&{template:default} {{name=#x}} {{Total=[[7]]}}", 7, "control"), /raw #/);
    assert.throws(() => checkLine("&{template:default} {{name=x}} {{Total=[[7]]}} [[2]]", 7, "control"), /2 inline rolls/);
    assert.throws(() => checkLine("&{template:default} {{name=x}} {{Total=[[7]]}} tail", 7, "control"), /only template fields/);
  });
});

describe("a rendering that does more than the renderer promises is not posted as it came", () => {
  test("every sample's rendering passes; lines that would roll, query or run a command do not", async () => {
    const { isConstantTemplate } = await import("../src/chatline.js");
    for (const s of samples) assert.ok(isConstantTemplate(s.chat) && isConstantTemplate(s.chat_labelled), s.name);
    for (const bad of [
      "/w gm &{template:default} {{name=x}}",
      "!token-mod --set bar1|0",
      "&{template:default} {{name=x}} {{Total=[[1d20]]}}",
      "&{template:default} {{name=?{Who|a,b}}}",
      "&{template:default} {{name=@{target|hp}}}",
      "&{template:default} {{name=x}} then more",
      "&{template:default} {{name=x}} &{template:other}",
    ]) {
      assert.equal(isConstantTemplate(bad), false, bad);
    }
    const event = { kind: "roll", seq: 5, visibility: "public", actor, label: "L", result: { total: 4, text: "t" }, roll20: { chat: "!token-mod --set bar1|0" } };
    const [post] = postsFor(event, ctx);
    assert.ok(post.text.startsWith("&{template:default} {{name=L}} {{Total=[[4]]}}"), post.text);
  });
});
