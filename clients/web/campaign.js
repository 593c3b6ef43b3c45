// /table, campaign management: the player's "this is me" link, and the GM's panel (rename, merge, remove,
// invite links and their rotation, export download, archive). Everything here goes through the GM's
// own connection and token; the server checks the role again for every request (docs/campaigns.md).
import { h } from "./dom.js";

const ROLE = { gm: "GM", player: "Player" };

/** True for a token that names its participant (a personal link or a GM token): no name to ask for. */
export function isPersonal(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return typeof JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4))).sub === "string";
  } catch {
    return false;
  }
}

/** The link that makes another device the same participant: this page with the session token. */
export function personalLink(session) {
  const url = new URL(location.href);
  url.hash = session;
  return url.toString();
}

async function copy(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Select the link and copy it";
  }
  setTimeout(() => (button.textContent = "Copy"), 2000);
}

function linkRow(id, label, link) {
  const input = h("input", { id, type: "text", readonly: true, value: link, "aria-label": label, class: "link-field" });
  const button = h("button", { type: "button", class: "small" }, "Copy");
  button.addEventListener("click", () => {
    input.select();
    copy(link, button);
  });
  return h("div", { class: "link-row" }, input, button);
}

/** The player's own link, shown once the welcome gave this page its personal token. */
export function bindThisIsMe(relay, root) {
  relay.on("welcome", (welcome) => {
    if (!welcome.session || welcome.you?.role !== "player") {
      root.hidden = true;
      return;
    }
    root.hidden = false;
    root.replaceChildren(
      h("h2", {}, "This is me"),
      h("p", { class: "hint" }, "Open this link on your other device, or in a private window, to be the same player there: same name, same Hope. Keep it to yourself."),
      linkRow("me-link", "Your personal link", personalLink(welcome.session)),
    );
  });
}

/** Participants as the GM sees them: from the welcome's roster, kept current by the events. */
class Roster {
  constructor() {
    this.people = new Map();
  }

  reset(list) {
    this.people = new Map((list ?? []).map((p) => [p.id, { ...p }]));
  }

  apply(event) {
    const p = (m) => this.people.get(m?.id);
    switch (event.kind) {
      case "join":
        if (event.member?.role !== "spectator") this.people.set(event.member.id, { ...(p(event.member) ?? {}), ...event.member, present: true, removed: false });
        break;
      case "leave":
        if (p(event.member)) p(event.member).present = false;
        break;
      case "rename":
        if (p(event.member)) p(event.member).name = event.member.name;
        break;
      case "merge":
        this.people.delete(event.merged?.id);
        break;
      case "kick":
        if (p(event.member)) Object.assign(p(event.member), { present: false, removed: true });
        break;
      default:
        return false;
    }
    return true;
  }

  list() {
    return [...this.people.values()].sort((a, b) => (a.role === b.role ? a.name.localeCompare(b.name) : a.role === "gm" ? -1 : 1));
  }
}

/** The GM's campaign panel; hidden for everyone else. */
export function bindCampaign(relay, root) {
  const roster = new Roster();
  const error = h("p", { class: "form-error", id: "campaign-error", role: "alert" });
  const people = h("ul", { class: "roster", id: "roster" });
  const invites = h("div", { id: "invite-links" });
  let archived = false;

  const act = async (button, work) => {
    button.disabled = true;
    error.textContent = "";
    try {
      await work();
    } catch (err) {
      error.textContent = err.message;
    } finally {
      button.disabled = archived && button !== download;
    }
  };

  const row = (person) => {
    const others = roster.list().filter((o) => o.id !== person.id && o.role === person.role && !o.removed);
    const name = h("input", { type: "text", value: person.name, maxlength: 100, "aria-label": `New name for ${person.name}`, class: "rename-field" });
    const rename = h("button", { type: "button", class: "small", "data-action": "rename" }, "Rename");
    rename.addEventListener("click", () => act(rename, () => relay.rename(person.id, name.value.trim())));
    const into = h("select", { "aria-label": `Merge ${person.name} into` }, h("option", { value: "" }, "Merge into…"), ...others.map((o) => h("option", { value: o.id }, o.name)));
    const merge = h("button", { type: "button", class: "small", "data-action": "merge" }, "Merge");
    merge.addEventListener("click", () => {
      if (!into.value) return void (error.textContent = `Pick who ${person.name} merges into.`);
      const target = roster.people.get(into.value);
      if (!confirm(`Merge ${person.name} into ${target?.name}? Their Hope adds up; the history keeps both names.`)) return;
      act(merge, () => relay.merge(person.id, into.value));
    });
    const kick = h("button", { type: "button", class: "small danger", "data-action": "kick" }, "Remove");
    kick.addEventListener("click", () => {
      if (!confirm(`Remove ${person.name}? Their devices are disconnected and their link stops working.`)) return;
      act(kick, () => relay.kick(person.id));
    });
    const self = person.id === relay.you?.id;
    const state = person.removed ? "removed" : person.present ? "here" : "away";
    return h(
      "li",
      { class: `roster-row ${state}`, "data-participant": person.id },
      h("span", { class: "who" }, h("b", {}, person.name), ` ${ROLE[person.role] ?? person.role} · ${state}`),
      person.removed ? null : h("span", { class: "roster-actions" }, name, rename, self ? null : h("span", {}, into, merge, kick)),
    );
  };

  const redraw = () => {
    people.replaceChildren(...roster.list().map(row));
    for (const b of root.querySelectorAll("button")) b.disabled = archived && b !== download;
  };

  const showInvites = (answer) =>
    invites.replaceChildren(
      h("p", { class: "hint" }, `Invite links (generation ${answer.generation}):`),
      h("label", { class: "field" }, h("span", {}, "Player invite"), linkRow("invite-player", "Player invite link", answer.links.player)),
      h("label", { class: "field" }, h("span", {}, "Spectator link"), linkRow("invite-spectator", "Spectator link", answer.links.spectator)),
    );

  const show = h("button", { type: "button", class: "small", id: "show-invites" }, "Show invite links");
  show.addEventListener("click", () => act(show, async () => showInvites(await relay.invites())));
  const rotate = h("button", { type: "button", class: "small", id: "rotate-invites" }, "Replace invite links");
  rotate.addEventListener("click", () => {
    if (!confirm("Replace the invite links? The old player and spectator links stop working; players who joined keep their own links.")) return;
    act(rotate, async () => showInvites(await relay.invites({ rotate: true })));
  });
  const download = h("button", { type: "button", class: "small", id: "export-room" }, "Download export");
  download.addEventListener("click", () =>
    act(download, async () => {
      const response = await fetch(new URL(`export/${encodeURIComponent(relay.room.id)}`, location.href), {
        headers: { Authorization: `Bearer ${relay.token}` },
      });
      if (!response.ok) throw new Error((await response.text()).trim() || `The export failed (${response.status}).`);
      const url = URL.createObjectURL(await response.blob());
      const a = h("a", { href: url, download: `${relay.room.id}.jsonl` });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    }),
  );
  const archive = h("button", { type: "button", class: "small danger", id: "archive-room" }, "Archive the room");
  archive.addEventListener("click", () => {
    if (!confirm("Archive this room? It becomes read-only: the history stays viewable, and nobody can roll or change anything again.")) return;
    act(archive, () => relay.archive());
  });
  const note = h("p", { class: "hint", id: "archived-note" });

  relay.on("welcome", (welcome) => {
    root.hidden = welcome.you?.role !== "gm";
    if (root.hidden) return;
    archived = welcome.archived === true;
    note.textContent = archived ? "This room is archived: read-only." : "";
    roster.reset(welcome.participants);
    root.replaceChildren(
      h("h2", {}, "Campaign"),
      note,
      people,
      h("div", { class: "campaign-actions" }, show, rotate, download, archive),
      invites,
      error,
    );
    redraw();
  });
  relay.on("event", (event, { replay }) => {
    if (root.hidden || replay) return;
    if (event.kind === "archive") {
      archived = true;
      for (const person of roster.people.values()) person.present = false;
      note.textContent = "This room is archived: read-only.";
      redraw(); // every action but the export download is off now
      return;
    }
    if (roster.apply(event)) redraw();
  });
}
