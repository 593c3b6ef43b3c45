// The module's pure parts: command parsing, who posts, audiences, the faces broker's batching and fallback.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { audienceOf, isPosted, posterFor, visibilityOf } from "../scripts/audience.mjs";
import { CommandError, parseCommand } from "../scripts/commands.mjs";
import { FacesBroker, RelayUnavailable, resultFor } from "../scripts/fulfillment.mjs";
import { rollMessages } from "../scripts/messages.mjs";
import { markHTML } from "../scripts/ui.mjs";
import { relayAddress } from "../scripts/module.mjs";
import { eventPageUrl } from "../scripts/client.mjs";
import { HarnessLocalization } from "./localization.mjs";

// lang/en.json as Foundry loads it, for the sentences the pure parts leave to be worded.
const english = new HarnessLocalization({ lang: "en" });
await english.initialize();

/** The English sentence of the CommandError `fn` throws. */
function commandError(fn) {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof CommandError, String(err));
    return english.format(err.key, err.data);
  }
  return assert.fail("no CommandError was thrown");
}

describe("chat commands", () => {
  test("formulas, system intents, labels and visibilities", () => {
    assert.deepEqual(parseCommand("/tr 4d6kh3"), {
      command: "/tr",
      visibility: "public",
      intent: { system: "dice", formula: "4d6kh3", dialect: "foundry" },
    });
    assert.deepEqual(parseCommand("/trgm drawsteel.power characteristic=2 edges=1 # Knockback"), {
      command: "/trgm",
      visibility: "gm",
      intent: { system: "drawsteel.power", characteristic: 2, edges: 1 },
      label: "Knockback",
    });
    assert.equal(parseCommand("/TRB 1d20").visibility, "blind");
    assert.equal(parseCommand("/trs 1d20").visibility, "self");
    const ability = parseCommand(
      '/tr drawsteel.ability characteristics={"M": 2} roll_with=M tiers=["2 damage", "5 damage", "7 damage"]',
    );
    assert.deepEqual(ability.intent.tiers, ["2 damage", "5 damage", "7 damage"]);
    assert.deepEqual(ability.intent.characteristics, { M: 2 });
    assert.equal(ability.intent.roll_with, "M");
    // A formula with spaces stays a formula, and so does one that merely starts like a system name.
    assert.deepEqual(parseCommand("/tr 2d20kh + 7").intent, { system: "dice", formula: "2d20kh + 7", dialect: "foundry" });
  });

  test("lines that are not ours, and lines that are broken", () => {
    assert.equal(parseCommand("/roll 1d20"), null);
    assert.equal(parseCommand("/track 3"), null, "a command that only starts with /tr is someone else's");
    assert.equal(parseCommand("hello"), null);
    // The errors carry a translation key and its data; the module words them where it shows them.
    assert.throws(() => parseCommand("/tr"), { name: "CommandError", key: "TABLERELAY.Command.NothingToRoll", data: { command: "/tr" } });
    assert.match(commandError(() => parseCommand("/TRGM")), /^Write what to roll after \/trgm: a formula such as 4d6kh3/);
    assert.equal(commandError(() => parseCommand("/tr drawsteel.power a=1 a=2")), "The argument 'a' is given twice.");
    assert.match(commandError(() => parseCommand("/tr drawsteel.power system=nexus.test")), /first word/);
    assert.match(commandError(() => parseCommand('/tr nexus.test table=["open')), /left open/);
    assert.equal(commandError(() => parseCommand(`/tr 1d20 # ${"x".repeat(201)}`)), "A label may be at most 200 characters long.");
  });
});

describe("relay addresses", () => {
  test("what a GM may type names the relay's socket", () => {
    assert.equal(relayAddress("relay.example.org"), "wss://relay.example.org/ws");
    assert.equal(relayAddress("https://relay.example.org"), "wss://relay.example.org/ws");
    assert.equal(relayAddress("http://127.0.0.1:8765"), "ws://127.0.0.1:8765/ws");
    assert.equal(relayAddress("wss://relay.example.org/dice/ws"), "wss://relay.example.org/dice/ws");
    assert.equal(relayAddress(""), "");
    assert.equal(relayAddress("ftp://relay"), "");
  });
});

const users = [
  { id: "b-gm", isGM: true, active: true, participant: "gm-1" },
  { id: "a-gm", isGM: true, active: false, participant: "gm-1" },
  { id: "c-aria", isGM: false, active: true, participant: "p-aria" },
  { id: "d-brom", isGM: false, active: true, participant: null },
];

describe("who posts, who sees", () => {
  test("the roller's own active client posts what it may see; else the first active GM", () => {
    for (const visibility of ["public", "gm", "self"]) {
      assert.equal(posterFor({ kind: "roll", visibility, actor: { id: "p-aria" } }, users), "c-aria", visibility);
    }
    assert.equal(posterFor({ kind: "roll", visibility: "blind", actor: { id: "p-aria" } }, users), "b-gm");
    assert.equal(posterFor({ kind: "roll", visibility: "public", actor: { id: "p-cli" } }, users), "b-gm");
    assert.equal(posterFor({ kind: "reveal", visibility: "public", actor: { id: "p-aria" } }, users), "b-gm");
    const noGM = users.filter((u) => !u.isGM);
    assert.equal(posterFor({ kind: "roll", visibility: "public", actor: { id: "p-cli" } }, noGM), null);
    assert.equal(posterFor({ kind: "reveal", visibility: "public", actor: { id: "p-aria" } }, noGM), "c-aria");
  });

  test("audiences follow the relay's table", () => {
    const roll = (visibility) => ({ visibility, actor: { id: "p-aria" } });
    assert.deepEqual(audienceOf(roll("public"), users), ["b-gm", "a-gm", "c-aria", "d-brom"]);
    assert.deepEqual(audienceOf(roll("gm"), users), ["b-gm", "a-gm", "c-aria"]);
    assert.deepEqual(audienceOf(roll("blind"), users), ["b-gm", "a-gm"]);
    assert.deepEqual(audienceOf(roll("self"), users), ["c-aria"]);
    assert.equal(visibilityOf("gmroll"), "gm");
    assert.equal(visibilityOf("nonsense"), "public");
  });

  test("faces events are not posted; other rolls and reveals are", () => {
    assert.equal(isPosted({ kind: "roll", intent: { system: "faces" } }), false);
    assert.equal(isPosted({ kind: "roll", intent: { system: "dice" } }), true);
    assert.equal(isPosted({ kind: "roll", sealed: true }), true);
    assert.equal(isPosted({ kind: "reveal", roll: { intent: { system: "faces" } } }), false);
    assert.equal(isPosted({ kind: "resource" }), false);
  });

  test("a sealed event becomes a public card with no roll in it", () => {
    const sealed = { kind: "roll", seq: 4, epoch: "e", visibility: "gm", sealed: true, commitment: "ab".repeat(32), actor: { id: "gm-1", name: "GM" } };
    const [card] = rollMessages(sealed, { room: "r", users, roll: null, i18n: english });
    assert.deepEqual(card.whisper, []);
    assert.equal(card.rolls, undefined);
    assert.equal(card.flags.tablerelay.sealed, true);
    assert.equal(card.flags.tablerelay.commitment, sealed.commitment);
    const signed = { ...sealed, sealed: undefined, kid: "k", sig: new Uint8Array(64), result: { dice: [] }, label: "Ambush" };
    const [, other] = rollMessages({ ...signed, visibility: "gm" }, { room: "r", users, roll: { total: 1 }, i18n: english });
    for (const key of ["kid", "sig", "signed"]) assert.equal(other.flags.tablerelay[key], undefined, `a card carries no ${key}`);
  });
});

/** A term shaped like Foundry's DiceTerm, enough for the broker. */
const term = (number, faces, denomination = `d${faces}`) => ({ number, faces, denomination, results: [] });

describe("marks", () => {
  test("a failed check is shown loud whatever the setting; the rest only when asked", () => {
    const quiet = { showVerified: false };
    const loud = { showVerified: true };
    const mark = (verdict, options, flags = {}) => markHTML(verdict, flags, options, english);
    const failed = { state: "failed", reason: { key: "TABLERELAY.Check.Die", data: { faces: "20", value: "20" } }, seqs: [3] };
    assert.match(mark(failed, quiet), /do not trust this roll: it shows a d20 of 20 that the relay did not roll #3/);
    assert.match(mark({ state: "not-relay", reason: "offline" }, quiet), /not via relay/);
    assert.match(mark({ state: "not-relay", reason: "offline" }, quiet), /title="[^"]*\(offline\)"/);
    assert.equal(mark({ state: "verified", seqs: [3] }, quiet), "");
    assert.match(mark({ state: "verified", seqs: [3] }, loud), /signed ✓ #3/);
    assert.match(mark({ state: "verified", seqs: [3] }, loud, { revealed: 5 }), /revealed ✓ matches its seal · signed ✓ #3/);
    assert.equal(mark({ state: "verified", seqs: [3] }, loud, { sealed: true }), "", "a sealed card says it all");
    assert.equal(mark({ state: "unchecked", reason: { key: "TABLERELAY.Check.NoKeys" }, seqs: [7] }, quiet), "");
    assert.match(mark({ state: "unchecked", reason: { key: "TABLERELAY.Check.NoKeys" }, seqs: [7] }, loud), /relay, not checked here #7/);
    assert.doesNotMatch(mark({ state: "unchecked", seqs: [7] }, loud), /✓/, "an unchecked claim never looks checked");
    assert.match(mark({ state: "checking" }, loud), /checking…/);
    assert.equal(mark({ state: "checking" }, quiet), "");
    assert.equal(mark({ state: "none" }, loud), "");
    const linked = mark({ state: "verified", seqs: [3, 4] }, { showVerified: true, page: (seq) => eventPageUrl("wss://dice.example.org/ws", "r o", seq) });
    assert.match(linked, /signed ✓ <a href="https:\/\/dice.example.org\/events\/r%20o\/3" target="_blank" rel="noopener noreferrer">#3<\/a>, <a [^>]*\/events\/r%20o\/4"/);
  });
});

describe("the faces broker", () => {
  const broker = (answer, { connected = true, policy = "fallback" } = {}) => {
    const asked = [];
    const told = [];
    const b = new FacesBroker({
      request: async (request) => {
        asked.push(request);
        return answer(request);
      },
      connected: () => connected,
      policy: () => policy,
      onUnavailable: (reason) => told.push(reason),
      text: (key, data) => english.format(key, data),
    });
    return { b, asked, told };
  };
  const counting = () => {
    let next = 0;
    return (request) => ({ seq: 10 + request.dice.length, values: request.dice.flatMap((d) => Array.from({ length: d.number }, () => (next++ % d.faces) + 1)) });
  };

  test("known dice are asked for at once and handed out in order; later dice one request each", async () => {
    const { b, asked } = broker(counting());
    const a = term(2, 20);
    const c = term(3, 6);
    const context = await b.prefetch([a, c], { visibility: "public" });
    assert.equal(asked.length, 1);
    assert.deepEqual(asked[0].dice, [{ number: 2, faces: 20 }, { number: 3, faces: 6 }]);
    assert.deepEqual([await b.face(a), await b.face(a)], [1, 2]);
    assert.deepEqual([await b.face(c), await b.face(c), await b.face(c)], [3, 4, 5]);
    a.results.push({}, {});
    assert.equal(await b.face(a), 6, "an extra die (an explosion) is one more request");
    assert.equal(asked.length, 2);
    assert.equal(context.roundTrips, 2);
    assert.equal(context.via, true);
  });

  test("a term of computed size asks for all its dice when Foundry reaches it", async () => {
    const { b, asked } = broker(counting());
    const computed = term(undefined, 6);
    await b.prefetch([computed], { visibility: "public" });
    assert.equal(asked.length, 0, "nothing known yet");
    computed.number = 4;
    await b.face(computed);
    assert.deepEqual(asked[0].dice, [{ number: 4, faces: 6 }]);
    for (let i = 0; i < 3; i++) await b.face(computed);
    assert.equal(asked.length, 1);
  });

  test("an inner roll evaluated on its own uses the faces its outer roll already asked for", async () => {
    const { b, asked } = broker(counting());
    const inner = term(1, 4);
    const outer = term(undefined, 6);
    const context = await b.prefetch([inner, outer], { visibility: "public" });
    assert.equal(await b.prefetch([inner], { visibility: "public" }), context, "the same roll, the same context");
    assert.equal(asked.length, 1, "no second request for the inner die");
    assert.equal(await b.face(inner), 1);
  });

  test("offline: fall back (and stay with Foundry's dice for the whole roll) or refuse", async () => {
    const off = broker(counting(), { connected: false });
    const d = term(1, 20);
    const context = await off.b.prefetch([d], { visibility: "public" });
    assert.equal(context.via, false);
    assert.equal(await off.b.face(d), undefined, "undefined lets Foundry roll it");
    assert.equal(off.told.length, 1);
    const refuse = broker(counting(), { connected: false, policy: "refuse" });
    await assert.rejects(refuse.b.prefetch([term(1, 20)], { visibility: "public" }), (err) => {
      assert.ok(err instanceof RelayUnavailable);
      assert.equal(err.reason, "the relay is not connected");
      assert.equal(err.message, "tablerelay: the relay could not roll these dice (the relay is not connected); the roll was refused.");
      return true;
    });
    const wrong = broker(() => ({ seq: 1, values: [1] }));
    const ctx = await wrong.b.prefetch([term(2, 6)], { visibility: "public" });
    assert.equal(ctx.via, false);
    assert.match(ctx.reason, /wrong number of faces/);
  });

  test("a coin or Fate die maps each face to one of its own results", () => {
    const coin = { faces: 2, denomination: "c", mapRandomFace: (u) => Math.round(u) };
    assert.deepEqual([1, 2].map((f) => resultFor(coin, f)).sort(), [0, 1]);
    const fate = { faces: 3, denomination: "f", mapRandomFace: (u) => Math.ceil(u * 3 - 2) };
    assert.deepEqual([1, 2, 3].map((f) => resultFor(fate, f)).sort(), [-1, 0, 1]);
    assert.equal(resultFor({ faces: 20, denomination: "d20" }, 17), 17);
  });
});
