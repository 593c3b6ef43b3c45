// Fair dice (spec/fairness.md) in the bridge, against a REAL relay rolling them (TABLERELAY_FAIR_DICE=true:
// tests/roll20/test_node.py starts it and passes TABLERELAY_TEST_FAIR_URL; run alone, the JS client's test
// helpers start one): each linked roll's verdict reaches the overlay, changes at the GM's seed reveal, and an
// alarm reaches the red banner. The words and icons are checked against the pages' own.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, describe, test } from "node:test";
import WebSocket from "../../js/node_modules/ws/index.js";
import { TableRelay, decodeMsgpack, encodeMsgpack } from "../../js/tablerelay.js";
import { createRoom, fairServer, until } from "../../js/test/helpers.mjs";
import { Bridge } from "../src/bridge.js";
import { FairBook, ICONS, judgementOf, verdictWords } from "../src/fairness.js";
import { memoryStore } from "../src/storage.js";

const opened = [];
after(() => {
  for (const thing of opened) (thing.stop ?? thing.close).call(thing);
});

/** A socket class whose received frames the test may change (a relay lying to this one bridge). */
function tampering(tamper) {
  return class extends WebSocket {
    addEventListener(type, listener, options) {
      if (type !== "message") return super.addEventListener(type, listener, options);
      return super.addEventListener(type, (event) => {
        const frame = decodeMsgpack(new Uint8Array(event.data));
        for (const f of frame.t === "welcome" ? [frame, ...(frame.history ?? [])] : [frame]) tamper(f);
        listener({ data: encodeMsgpack(frame) });
      }, options);
    }
  };
}

/** A bridge on the fair relay whose view records what the overlay would draw. */
async function bridge(relay, token, { Socket = WebSocket } = {}) {
  const posted = [];
  const view = { status() {}, state() {}, error() {}, note() {}, fair: (book) => (view.shown = { rolls: book.list(), alarms: [...book.alarms] }), shown: null };
  const b = new Bridge({
    store: memoryStore(),
    chat: { intercept: () => () => {}, post: async (text) => void posted.push(text), shows: () => false },
    settings: { relayUrl: relay.url, token, post: "mine", name: "Ana" },
    view,
    clientOptions: { WebSocket: Socket, minDelay: 20, maxDelay: 200 },
  });
  opened.push(b);
  await b.start();
  return { b, view, posted };
}

async function gmClient(relay, token) {
  const client = new TableRelay(relay.url, token, { WebSocket, name: "GM" });
  opened.push(client);
  await client.connect();
  return client;
}

const shownVerdict = (view, seq) => view.shown?.rolls.find((j) => j.seq === seq)?.verdict;

describe("the bridge's verdicts", () => {
  test("a linked roll is 'awaiting seed', then 'fair' once the GM reveals the seed; no alarm", async () => {
    const relay = await fairServer();
    const room = createRoom(undefined, relay);
    const gm = await gmClient(relay, room.gm);
    const { b, view, posted } = await bridge(relay, room.player);
    await b.command("!tr 1d20+2 -- Stealth");
    await until(() => posted.length === 1, 8000, "the chat line");
    const seq = b.client.seq;
    await until(() => shownVerdict(view, seq), 8000, "the roll's verdict in the overlay");
    assert.equal(shownVerdict(view, seq), "awaiting seed");
    assert.equal(view.shown.rolls[0].label, "Stealth");
    assert.match(posted[0], new RegExp(`/events/${room.room}/${seq}\\)`), "the line links to the relay's page of the roll");
    const reveal = await gm.revealSeed();
    assert.equal(reveal.kind, "seed_reveal");
    await until(() => shownVerdict(view, seq) === "fair", 8000, "the verdict to turn fair");
    const j = view.shown.rolls.find((r) => r.seq === seq);
    assert.match(verdictWords(j).explanation, /^Fair: recomputed in this browser from the server's dice seed 1/);
    assert.deepEqual(view.shown.alarms, []);
  });

  test("a seed reveal that does not match its commitment: the roll fails and the alarm reaches the banner", async () => {
    const relay = await fairServer();
    const room = createRoom(undefined, relay);
    const gm = await gmClient(relay, room.gm);
    const flip = (frame) => {
      if (frame.kind === "seed_reveal") frame.seed = Uint8Array.from(frame.seed, (byte, i) => (i === 0 ? byte ^ 1 : byte));
    };
    const { b, view } = await bridge(relay, room.player, { Socket: tampering(flip) });
    await b.command("!tr 2d6");
    await until(() => view.shown?.rolls.length === 1, 8000, "the roll's verdict");
    const { seq } = view.shown.rolls[0];
    assert.equal(shownVerdict(view, seq), "awaiting seed");
    await gm.revealSeed();
    await until(() => shownVerdict(view, seq) === "failed", 8000, "the roll to fail");
    assert.ok(view.shown.alarms.some((a) => /seed 1 does not match what it committed to/.test(a.message)), JSON.stringify(view.shown.alarms));
    const words = verdictWords(view.shown.rolls.find((r) => r.seq === seq));
    assert.equal(words.kind, "failed");
    assert.match(words.explanation, /^Fairness check failed: .*does not match its commitment/);
  });
});

describe("the words and icons", () => {
  test("each verdict has the pages' word, explanation and icon shapes; an unknown one is never shown as fair", () => {
    const pages = readFileSync(new URL("../../web/fair-render.js", import.meta.url), "utf8");
    const j = (verdict, witnesses = 0) => ({ seq: 1, label: "", verdict, reason: "r", witnesses, n: 2 });
    for (const verdict of ["fair", "unwitnessed", "awaiting seed", "sealed", "failed"]) {
      const words = verdictWords(j(verdict));
      assert.equal(words.kind, verdict);
      // The pages word the first sentence the same way (clients/web/fair-render.js, verdictExplanation).
      const opening = words.explanation.slice(0, 22);
      assert.ok(pages.includes(opening), `the pages say "${opening}"`);
      for (const [, attrs] of ICONS[verdict]) for (const value of Object.values(attrs)) assert.ok(pages.includes(`"${value}"`), `${verdict}: the pages draw ${value}`);
      assert.doesNotMatch(words.word, /[✓✔✗✘☑⌛]/u, "a word, not a glyph");
    }
    assert.equal(verdictWords(j("fair", 2)).word, "Fair · 2 witnesses");
    assert.equal(verdictWords(j("fair", 1)).word, "Fair · 1 witness");
    assert.equal(verdictWords(j("new verdict")).kind, "failed");
    assert.equal(judgementOf({ seq: 3, kind: "roll" }), null, "a relay without fair dice gives no verdict");
    const value = new Uint8Array(16);
    const gmRoll = { seq: 4, verdict: "fair", actor: { id: "g", role: "gm" }, fair: { n: 1, witnesses: [["g", value], ["p", value]] } };
    assert.equal(judgementOf(gmRoll).witnesses, 1, "a GM's own value for the GM's roll is no witness");
    assert.equal(judgementOf({ ...gmRoll, actor: { id: "g", role: "player" } }).witnesses, 2);
  });

  test("the overlay's list keeps the newest rolls, updates them in place, and lists an alarm once", () => {
    const book = new FairBook();
    const roll = (seq, verdict, label = "") => ({ seq, verdict, verdictReason: "", label, fair: { n: 1, witnesses: [] } });
    for (let seq = 1; seq <= 8; seq++) book.note(roll(seq, "awaiting seed", `r${seq}`));
    assert.deepEqual(book.list().map((r) => r.seq), [8, 7, 6, 5, 4, 3]);
    assert.equal(book.note(roll(5, "fair"), { add: false }), true);
    assert.equal(book.list().find((r) => r.seq === 5).label, "r5", "a revealed roll keeps its label");
    assert.deepEqual(book.list().map((r) => r.seq), [8, 7, 6, 5, 4, 3], "in place");
    assert.equal(book.note(roll(1, "fair"), { add: false }), false, "a roll no longer listed is not brought back");
    assert.equal(book.alarm({ message: "x", seq: 2 }), true);
    assert.equal(book.alarm({ message: "x", seq: 2 }), false);
    assert.deepEqual(book.alarms, [{ message: "x", seq: 2 }]);
  });
});
