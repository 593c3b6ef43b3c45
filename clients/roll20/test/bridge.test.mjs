// The bridge (src/bridge.js) with the real JS client against a real relay, and a chat shared by the game's
// bridges in memory: who posts, and what a reload picks up. The relay comes from tests/roll20/test_node.py
// (TABLERELAY_TEST_URL, _DATA, _CLI), or is started by the JS client's test helpers.

import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import WebSocket from "../../js/node_modules/ws/index.js";
import { createRoom, server, until } from "../../js/test/helpers.mjs";
import { Bridge } from "../src/bridge.js";
import { memoryStore } from "../src/storage.js";

/** A game's chat as the bridges see it: every message, in order, shown to everyone (whispers to GMs). */
function gameChat() {
  const messages = [];
  return {
    messages,
    /** The chat of one player's page. */
    page(name, gm = false) {
      return {
        intercept: () => () => {},
        async post(text) {
          messages.push({ by: name, text });
        },
        shows(tag) {
          const seen = messages.filter((m) => gm || !m.text.startsWith("/w gm ") || m.by === name);
          const decoded = (t) => t.replace(/&#(\d+);/g, (_, n) => String.fromCodePoint(Number(n)));
          return seen.some((m) => new RegExp(`${tag.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![0-9]|\\s(?:sealed|gm)\\b)`).test(decoded(m.text)));
        },
      };
    },
  };
}

const quiet = { status() {}, state() {}, error() {}, note() {} };
const bridges = [];
const clients = [];

/** Another player's client without a bridge (the /table page, a bot). */
async function plainClient(token, name) {
  const { TableRelay } = await import("../../js/tablerelay.js");
  const client = new TableRelay(server.url, token, { WebSocket, name });
  clients.push(client);
  await client.connect();
  return client;
}

function bridge(token, chat, { post = "all", store = memoryStore(), name } = {}) {
  const b = new Bridge({
    store,
    chat,
    settings: { relayUrl: server.url, token, post, fallbackDelay: 150, name },
    view: quiet,
    clientOptions: { WebSocket, minDelay: 20, maxDelay: 200 },
  });
  bridges.push(b);
  return b;
}

const tagged = (messages, seq) => messages.filter((m) => new RegExp(`&#35;${seq}(?![0-9])(?! sealed| gm)`).test(m.text));

after(() => {
  for (const b of bridges) b.stop();
  for (const c of clients) c.close();
});

describe("the bridge against a real relay", () => {
  test("three bridges, one roll each way: every event is posted exactly once", async () => {
    const room = createRoom();
    const chat = gameChat();
    const gm = bridge(room.gm, chat.page("Gwen", true), { name: "Gwen" });
    const ana = bridge(room.player, chat.page("Ana"), { post: "mine", name: "Ana" });
    const bob = bridge(room.player, chat.page("Bob"), { name: "Bob" });
    await gm.start();
    await ana.start();
    await bob.start();
    // Ana's own roll (she posts at once), the GM's, and one from a client without a bridge.
    const a = await ana.client.roll({ system: "dice", formula: "1d20" });
    const g = await gm.client.roll({ system: "dice", formula: "2d6" });
    const other = await plainClient(room.player, "Cara");
    const c = await other.roll({ system: "dice", formula: "3d4" });
    await until(() => tagged(chat.messages, c.seq).length === 1, 5000, "Cara's roll posted by a fallback");
    await new Promise((r) => setTimeout(r, 600)); // every fallback's wait has passed
    assert.deepEqual(tagged(chat.messages, a.seq).map((m) => m.by), ["Ana"]);
    assert.deepEqual(tagged(chat.messages, g.seq).map((m) => m.by), ["Gwen"]);
    assert.deepEqual(tagged(chat.messages, c.seq).map((m) => m.by), ["Gwen"]);
  });

  test("a reload while a fallback post is waiting takes the event up again and posts it once", async () => {
    const room = createRoom();
    const chat = gameChat();
    const store = memoryStore();
    const first = bridge(room.gm, chat.page("Gwen", true), { store });
    await first.start();
    const other = await plainClient(room.player, "Cara");
    const c = await other.roll({ system: "dice", formula: "1d8" });
    await first.settled();
    first.stop(); // the page reloads before the fallback's wait is over
    const again = bridge(room.gm, chat.page("Gwen", true), { store });
    await again.start();
    await until(() => tagged(chat.messages, c.seq).length === 1, 5000, "the roll posted after the reload");
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(tagged(chat.messages, c.seq).length, 1);
    assert.equal(chat.messages.length, 1);
  });
});
