// Roll20's part of the stand-in editor page: what Roll20 does when its chat sends a message.
//
// - Enter in the textarea (without Shift) and a click on the send button send the textarea's text, as
//   Roll20's own handlers do (they are on those elements, so a capture listener on the window runs first).
// - A line starting with "!" is an API command: Roll20 hands it to the game's Mod scripts and shows nothing.
// - "/w gm TEXT" is a whisper to the GM: shown to its sender and to GMs only.
// - "&{template:NAME} {{key=value}} …" is drawn as a roll template; "[[ … ]]" is an inline roll. A constant
//   is shown as it is; anything else Roll20 would roll, so the stand-in marks it as rolled (the tests
//   count those: the bridge must never make Roll20 roll). "[text](url)" is a link. Character references
//   (&#123;) show as their characters and are never parsed.
// - The chat is shared between the pages of one game, like a Roll20 game's chat between its players: each
//   message goes to the test server (POST /chat/GAME) and every page polls it, its own messages included,
//   as Roll20 round-trips them. A whisper to the GM reaches GM pages and its sender only.
//   ?player=NAME&gm=1&game=GAME says who this page is and which game it is in.
(function () {
  "use strict";
  const params = new URLSearchParams(location.search);
  const me = { name: params.get("player") || "Player", gm: params.get("gm") === "1" };
  const game = params.get("game") || "game";
  const list = document.querySelector("#textchat .content");
  const input = document.querySelector("#textchat-input textarea");
  const send = document.querySelector("#textchat-input button");
  const state = { sent: [], shown: [], rolled: 0, me };
  window.fakeRoll20 = state;
  let counter = 0;

  function decode(text) {
    return text.replace(/&#(\d+);?/g, (_, n) => String.fromCodePoint(Number(n)));
  }

  // Inline rolls, links and plain text of one template value, as DOM nodes.
  function inline(value) {
    const nodes = [];
    const pattern = /\[\[([\s\S]*?)\]\]|\[([^\]]*)\]\((https?:\/\/[^)\s]+)\)/g;
    let at = 0;
    for (let m; (m = pattern.exec(value)); ) {
      if (m.index > at) nodes.push(document.createTextNode(decode(value.slice(at, m.index))));
      if (m[1] !== undefined) {
        const span = document.createElement("span");
        span.className = "inlinerollresult showtip tipsy-n-right";
        const expr = m[1].trim();
        if (/^-?\d+(\.\d+)?$/.test(expr)) {
          span.textContent = expr;
        } else {
          span.classList.add("rolled");
          span.textContent = "rolled";
          state.rolled++;
        }
        span.dataset.expr = expr;
        nodes.push(span);
      } else {
        const a = document.createElement("a");
        a.href = m[3];
        a.textContent = decode(m[2]);
        nodes.push(a);
      }
      at = m.index + m[0].length;
    }
    if (at < value.length) nodes.push(document.createTextNode(decode(value.slice(at))));
    return nodes;
  }

  function template(text) {
    const head = /^&\{template:([A-Za-z0-9_-]+)\}/.exec(text);
    if (!head) return null;
    const box = document.createElement("div");
    box.className = `sheet-rolltemplate-${head[1]}`;
    const table = document.createElement("table");
    box.append(table);
    const fields = /\{\{([^=}]*)=([\s\S]*?)\}\}/g;
    for (let m; (m = fields.exec(text)); ) {
      const key = decode(m[1].trim());
      if (key === "name") {
        const caption = document.createElement("caption");
        caption.append(...inline(m[2]));
        table.append(caption);
        continue;
      }
      const row = document.createElement("tr");
      const k = document.createElement("td");
      k.textContent = key;
      const v = document.createElement("td");
      v.append(...inline(m[2]));
      row.append(k, v);
      table.append(row);
    }
    return box;
  }

  function show(message) {
    const div = document.createElement("div");
    div.className = `message ${message.whisper ? "whisper" : "general"}`;
    div.dataset.messageid = message.id;
    const by = document.createElement("span");
    by.className = "by";
    by.textContent = message.whisper ? `(To GM) ${message.who}: ` : `${message.who}: `;
    div.append(by);
    div.append(template(message.body) ?? document.createTextNode(decode(message.body)));
    list.append(div);
    state.shown.push({ id: message.id, who: message.who, whisper: message.whisper, body: message.body });
  }

  function receive(message) {
    // A whisper to the GM reaches GMs and its sender only.
    if (message.whisper && !me.gm && message.who !== me.name) return;
    show(message);
  }

  let seen = 0;
  async function poll() {
    try {
      const answer = await fetch(`/chat/${encodeURIComponent(game)}?after=${seen}`, { cache: "no-store" });
      const messages = await answer.json();
      for (const message of messages) {
        seen = Math.max(seen, message.n);
        receive(message);
      }
    } catch {
      /* the test server is going away */
    }
    setTimeout(poll, 60);
  }

  // Roll20's send: whatever the textarea holds when its handler runs.
  function sendNow() {
    const text = input.value.trim();
    if (!text) return;
    input.value = "";
    state.sent.push(text);
    if (typeof window.roll20Sent === "function") window.roll20Sent(me.name, text);
    if (text.startsWith("!")) return; // an API command: to the Mod scripts, never shown
    const whisper = /^\/w\s+gm\s+/i.exec(text);
    const message = {
      id: `-fake${Date.now().toString(36)}${(counter++).toString(36)}${Math.random().toString(36).slice(2, 6)}`,
      who: me.name,
      gm: me.gm,
      whisper: Boolean(whisper),
      body: whisper ? text.slice(whisper[0].length) : text,
    };
    fetch(`/chat/${encodeURIComponent(game)}`, { method: "POST", body: JSON.stringify(message) });
  }

  poll();
  send.addEventListener("click", sendNow);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      sendNow();
    }
  });
})();
