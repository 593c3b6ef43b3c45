// /events/ROOM/SEQ: one relay event, shown as this browser may see it and checked against the relay's keys.
// The Roll20 bridge links its chat marks here. The page holds no secret of its own: it uses a session this
// browser already has for the room (from /watch or /table), or a token pasted into it, and shows the event
// exactly as that token's audience receives it (a hidden roll stays sealed).
import { TableRelay } from "../js/tablerelay.js";
import { Feed } from "./feed-render.js";

const match = /\/events\/([A-Za-z0-9_-]{1,64})\/(\d{1,12})\/?$/.exec(location.pathname);
const verdict = document.getElementById("verdict");
const status = document.getElementById("status");
const form = document.getElementById("token-form");

/** The relay's root, as this page was reached (also under a proxy's path prefix). */
const base = new URL(location.pathname.slice(0, match ? match.index + 1 : 1), location.href);

function say(text, kind) {
  verdict.textContent = text;
  verdict.dataset.kind = kind;
}

/** A session token this browser keeps for the room (the pages store them per invite). */
function storedSession(room) {
  try {
    for (let i = 0; i < localStorage.length; i++) {
      const key = localStorage.key(i);
      if (!key?.startsWith("tablerelay.session.")) continue;
      const token = localStorage.getItem(key);
      const payload = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
      if (payload.room === room) return token;
    }
  } catch {
    // an unreadable entry is not ours to judge; go on without it
  }
  return null;
}

async function show(room, seq, token) {
  const ws = new URL("ws", base);
  ws.protocol = ws.protocol === "https:" ? "wss:" : "ws:";
  const client = new TableRelay(ws.href, token, { reconnect: false });
  status.textContent = "Connecting…";
  let welcome;
  try {
    welcome = await client.connect();
  } catch (err) {
    say(`The relay refused the token: ${err.message}`, "bad");
    status.textContent = "Refused";
    form.hidden = false;
    return;
  }
  if (welcome.room?.id !== room) {
    say("That token is for another table.", "bad");
    client.close();
    form.hidden = false;
    return;
  }
  document.getElementById("room-name").textContent = `· ${welcome.room?.name ?? ""}`;
  // The welcome's history carries the last events; the client has checked each one's signature by now.
  const event = client.event(seq);
  client.close();
  status.textContent = "Checked";
  if (!event) {
    say(`Event ${seq} is older than the ${welcome.history?.length ?? 0} events this page can fetch; export the room to check it.`, "unknown");
    return;
  }
  const feed = new Feed(document.getElementById("feed"), { members: true });
  feed.add(event, { live: false });
  if (event.verified === true) say(`✓ Signed by this relay (key ${event.kid}). This is the event as the relay stored it.`, "good");
  else say(`✗ The signature does not verify: ${event.verifyError ?? "unknown reason"}. Do not trust this event.`, "bad");
}

if (!match) {
  say("This address names no event: it should look like /events/ROOM/SEQ.", "bad");
  status.textContent = "No event";
} else {
  const room = match[1];
  const seq = Number(match[2]);
  document.getElementById("event-seq").textContent = `#${seq}`;
  document.title = `tablerelay · event #${seq}`;
  const session = storedSession(room);
  if (session) {
    show(room, seq, session);
  } else {
    say("Paste a token for this table to see the event.", "unknown");
    status.textContent = "No token";
    form.hidden = false;
  }
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    form.hidden = true;
    show(room, seq, document.getElementById("token").value.trim());
  });
}
