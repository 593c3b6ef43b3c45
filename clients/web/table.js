// /table: the GM and player page. The same feed as /watch, plus a roll form for every system, reveal
// buttons for sealed rolls this user may open, and Fear/Hope controls. The token rides in the fragment.
import { h } from "./dom.js";
import { bindPage, connectFromPage, hasSession, showStatus } from "./feed.js";
import { FEAR_MAX, Feed, HOPE_MAX } from "./feed-render.js";
import { SYSTEM_FORMS, parseInteger } from "./systems.js";
import { bindCampaign, bindThisIsMe, isPersonal } from "./campaign.js";

const $ = (id) => document.getElementById(id);
const NAME_KEY = "tablerelay.name";
const SYSTEM_KEY = "tablerelay.system";

function stored(key) {
  try {
    return localStorage.getItem(key);
  } catch {
    return null;
  }
}
function store(key, value) {
  try {
    localStorage.setItem(key, value);
  } catch {
    /* storage off: nothing to remember */
  }
}

// ---- the roll form -------------------------------------------------------------------------------------

let inputs = []; // [{field, read(): {ok, value} , el}]

function fieldId(field, suffix = "") {
  return `f-${field.key}${field.index !== undefined ? `-${field.index}` : ""}${suffix}`;
}

function intInput(id, { min, max, value, placeholder, label } = {}) {
  return h("input", {
    id,
    type: "text",
    inputmode: "numeric",
    pattern: "[+\\-]?[0-9]+",
    value: value ?? "",
    placeholder,
    "aria-label": label,
    "data-min": min,
    "data-max": max,
    autocomplete: "off",
  });
}

function readInt(el, label, { optional, min, max }) {
  const raw = el.value.trim();
  if (raw === "") return optional ? { ok: true, value: undefined } : { ok: false, error: `${label} needs a whole number.` };
  const n = parseInteger(raw);
  if (n === null) return { ok: false, error: `${label} must be a whole number; got “${raw}”.` };
  if (min !== undefined && n < min) return { ok: false, error: `${label} must be at least ${min}.` };
  if (max !== undefined && n > max) return { ok: false, error: `${label} must be at most ${max}.` };
  return { ok: true, value: n };
}

function buildField(field) {
  const id = fieldId(field);
  const start = field.initial ?? field.default;
  switch (field.type) {
    case "int": {
      const el = intInput(id, { min: field.min, max: field.max, value: start ?? "", placeholder: field.placeholder });
      return [labelled(field, id, el), () => readInt(el, field.label, { optional: field.optional || (field.default !== undefined && el.value.trim() === ""), min: field.min, max: field.max })];
    }
    case "text":
    case "letters":
    case "tier": {
      const el = h("input", { id, type: "text", value: start ?? "", placeholder: field.placeholder, autocomplete: "off" });
      const read = () => {
        const v = el.value.trim();
        if (!v) return field.required ? { ok: false, error: `${field.label} is needed.` } : { ok: true, value: undefined };
        if (field.type === "letters") {
          const letters = v.split(/[\s,]+/).filter(Boolean).map((s) => s.toUpperCase());
          return { ok: true, value: letters.length === 1 ? letters[0] : letters };
        }
        return { ok: true, value: v };
      };
      return [labelled(field, id, el), read];
    }
    case "texts":
    case "ints": {
      const el = h("input", { id, type: "text", placeholder: field.placeholder, autocomplete: "off" });
      const read = () => {
        const parts = el.value.split(",").map((s) => s.trim()).filter(Boolean);
        if (!parts.length) return { ok: true, value: undefined };
        if (field.type === "texts") return { ok: true, value: parts };
        const values = parts.map(parseInteger);
        if (values.some((v) => v === null)) return { ok: false, error: `${field.label} must be whole numbers separated by commas.` };
        return { ok: true, value: values };
      };
      return [labelled(field, id, el), read];
    }
    case "bool": {
      const el = h("input", { id, type: "checkbox", checked: Boolean(start) });
      const wrap = h("label", { class: "check wide" }, el, field.label);
      return [wrap, () => ({ ok: true, value: el.checked })];
    }
    case "select": {
      const el = h("select", { id });
      for (const [value, text] of field.options) {
        el.append(h("option", { value: String(value), selected: String(value) === String(start ?? "") }, text));
      }
      const read = () => {
        const option = field.options.find(([value]) => String(value) === el.value);
        const value = option ? option[0] : el.value;
        return { ok: true, value: value === "" ? undefined : value };
      };
      return [labelled(field, id, el), read];
    }
    case "checks": {
      const boxes = field.options.map((v) => h("input", { type: "checkbox", value: String(v), "aria-label": `Tier ${v}` }));
      const set = h("fieldset", { class: "field wide" }, h("legend", {}, field.label), h("div", { class: "inline-options" }, boxes.map((b) => h("label", { class: "check" }, b, `Tier ${b.value}`))));
      return [set, () => ({ ok: true, value: boxes.filter((b) => b.checked).map((b) => Number(b.value)) })];
    }
    case "characteristics": {
      const els = field.letters.map((l) => intInput(`${id}-${l}`, { value: field.initial?.[l] ?? 0, label: l }));
      const set = h(
        "fieldset",
        { class: "field wide" },
        h("legend", {}, field.label),
        h("div", { class: "fields letters" }, field.letters.map((l, i) => h("label", { class: "field" }, h("span", {}, l), els[i]))),
      );
      const read = () => {
        const value = {};
        for (const [i, l] of field.letters.entries()) {
          const r = readInt(els[i], `Characteristic ${l}`, {});
          if (!r.ok) return r;
          value[l] = r.value;
        }
        return { ok: true, value };
      };
      return [set, read];
    }
    case "rows":
      return buildRows(field);
    default:
      throw new Error(`unknown field type ${field.type}`);
  }
}

function labelled(field, id, el) {
  return h(
    "label",
    { class: `field${field.wide || field.type === "tier" || field.type === "texts" || field.type === "ints" ? " wide" : ""}`, for: id },
    h("span", {}, field.label, field.hint ? h("span", { class: "field-hint" }, ` (${field.hint})`) : ""),
    el,
  );
}

function buildRows(field) {
  const rows = h("div", { class: "rows", style: { "--cols": String(field.columns.length - 1) } });
  const entries = [];
  const addRow = (initial = {}) => {
    const cells = field.columns.map((c) =>
      c.type === "int"
        ? intInput(undefined, { value: initial[c.key] ?? "", min: c.min, placeholder: "0" })
        : h("input", { type: "text", value: initial[c.key] ?? "", placeholder: c.label }),
    );
    const entry = { cells };
    const remove = h("button", { type: "button", class: "small", "aria-label": "Remove this target", onclick: () => { row.remove(); entries.splice(entries.indexOf(entry), 1); } }, "×");
    const row = h("div", { class: "row" }, field.columns.map((c, i) => h("label", {}, h("span", {}, c.label), cells[i])), remove);
    cells.forEach((cell, i) => cell.setAttribute("aria-label", `Target ${entries.length + 1} ${field.columns[i].label}`));
    entries.push(entry);
    rows.append(row);
  };
  for (const initial of field.initialRows ?? []) addRow(initial);
  const set = h(
    "fieldset",
    { class: "field wide" },
    h("legend", {}, field.label, field.hint ? h("span", { class: "field-hint" }, ` (${field.hint})`) : ""),
    rows,
    h("div", {}, h("button", { type: "button", class: "small", onclick: () => addRow() }, "+ Add target")),
  );
  const read = () => {
    const value = [];
    for (const [n, entry] of entries.entries()) {
      const item = {};
      for (const [i, c] of field.columns.entries()) {
        const el = entry.cells[i];
        if (c.type === "int") {
          const r = readInt(el, `Target ${n + 1} ${c.label.toLowerCase()}`, { optional: true, min: c.min });
          if (!r.ok) return r;
          if (r.value !== undefined) item[c.key] = r.value;
        } else if (el.value.trim()) {
          item[c.key] = el.value.trim();
        }
      }
      if (Object.keys(item).length) value.push(item);
    }
    return { ok: true, value: value.length ? value : undefined };
  };
  return [set, read];
}

function sameAsDefault(field, value) {
  if (!("default" in field)) return false;
  if (Array.isArray(field.default)) return Array.isArray(value) && value.length === 0 && field.default.length === 0;
  return String(field.default) === String(value ?? "");
}

function showSystem(systemId) {
  const form = SYSTEM_FORMS.find((s) => s.id === systemId) ?? SYSTEM_FORMS[0];
  const box = $("system-fields");
  box.replaceChildren();
  inputs = [];
  for (const field of form.fields) {
    const [el, read] = buildField(field);
    inputs.push({ field, el, read });
    box.append(el);
  }
  updateConditional();
}

function currentValues() {
  const values = {};
  for (const { field, read } of inputs) {
    if (field.type === "select" || field.type === "text") {
      const r = read();
      if (r.ok) values[field.key] = r.value;
    }
  }
  return values;
}

function updateConditional() {
  const values = currentValues();
  for (const { field, el } of inputs) {
    if (!field.when) continue;
    el.hidden = !Object.entries(field.when).every(([k, v]) => values[k] === v);
  }
}

/** The intent from the form, or {error}. */
function readIntent(systemId) {
  const intent = { system: systemId };
  for (const { field, el, read } of inputs) {
    if (el.hidden) continue;
    const r = read();
    if (!r.ok) return { error: r.error };
    if (r.value === undefined) continue;
    if (field.type === "tier") {
      (intent.tiers ??= [])[field.index] = r.value;
      continue;
    }
    if (!field.required && sameAsDefault(field, r.value)) continue;
    intent[field.key] = r.value;
  }
  return { intent };
}

// ---- page ----------------------------------------------------------------------------------------------

const params = new URLSearchParams(location.search);
const relay = connectFromPage({ name: params.get("name") || stored(NAME_KEY) || undefined });

const systemSelect = $("system");
for (const s of SYSTEM_FORMS) systemSelect.append(h("option", { value: s.id }, s.name));
systemSelect.value = SYSTEM_FORMS.some((s) => s.id === stored(SYSTEM_KEY)) ? stored(SYSTEM_KEY) : "daggerheart.duality";
showSystem(systemSelect.value);
systemSelect.addEventListener("change", () => {
  store(SYSTEM_KEY, systemSelect.value);
  showSystem(systemSelect.value);
});
$("system-fields").addEventListener("change", updateConditional);

if (!relay) {
  $("feed").replaceChildren(h("div", { class: "notice" }, h("p", {}, "This page needs a table link: ", h("code", {}, "/table#TOKEN"), " with a GM or player token.")));
  $("status").textContent = "No token";
  $("roll-button").disabled = true;
} else {
  const isGm = () => relay.you?.role === "gm";
  const revealed = new Set();
  let feed;

  const canReveal = (event) => {
    if (revealed.has(event.seq) || feed.reveals.has(event.seq) || event.revealed != null) return false;
    if (event.visibility === "public") return false;
    if (isGm()) return true;
    // The roller of a gm/self roll may open it; a blind roll is for the GM to open.
    return event.actor?.id === relay.you?.id && (event.visibility === "gm" || event.visibility === "self");
  };

  const revealButton = (event) => {
    if (!canReveal(event)) return null;
    const button = h("button", { type: "button", class: "reveal small", "aria-label": `Reveal roll ${event.seq} to everyone` }, "Reveal to everyone");
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        await relay.reveal(event.seq);
        revealed.add(event.seq);
      } catch (err) {
        button.disabled = false;
        button.after(h("span", { class: "form-error", role: "alert" }, ` ${err.message}`));
      }
    });
    return button;
  };

  feed = new Feed($("feed"), { announcer: $("announcer"), actions: revealButton });

  const resourceError = $("resource-error");
  const change = (name, op, n, participant) =>
    relay.resource(name, op, n, participant ? { participant } : {}).then(
      () => (resourceError.textContent = ""),
      (err) => (resourceError.textContent = err.message),
    );

  const controls = (name, participant, value) => {
    if (relay.state.archived) return null; // read-only: nothing to change
    const gm = isGm();
    const mine = participant && participant === relay.you?.id;
    if (name === "fear" && gm) {
      return h(
        "div",
        { class: "tracker-controls" },
        h("button", { type: "button", class: "small", "aria-label": "Spend 1 Fear", disabled: Number(value) <= 0, onclick: () => change("fear", "spend", 1) }, "− Spend"),
        h("button", { type: "button", class: "small", "aria-label": "Gain 1 Fear", disabled: Number(value) >= (relay.room?.fear_max ?? FEAR_MAX), onclick: () => change("fear", "gain", 1) }, "+ Gain"),
        h("button", { type: "button", class: "small", "aria-label": "Set Fear to 0", onclick: () => change("fear", "set", 0) }, "Clear"),
      );
    }
    if (name === "hope" && (gm || mine)) {
      const who = mine ? "your" : "this player's";
      return h(
        "div",
        { class: "tracker-controls" },
        h("button", { type: "button", class: "small", "aria-label": `Spend 1 of ${who} Hope`, disabled: Number(value) <= 0, onclick: () => change("hope", "spend", 1, participant) }, "− Spend"),
        gm ? h("button", { type: "button", class: "small", "aria-label": `Give 1 Hope`, disabled: Number(value) >= (relay.room?.hope_max ?? HOPE_MAX), onclick: () => change("hope", "gain", 1, participant) }, "+ Gain") : null,
      );
    }
    return null;
  };

  bindPage(relay, { feed, trackers: $("trackers"), members: $("members"), controls });
  bindThisIsMe(relay, $("me-panel"));
  bindCampaign(relay, $("campaign"));
  const readOnly = () => {
    $("roll-button").disabled = true;
    $("form-error").textContent = "This room is archived: its history stays here to read, and nothing new can be rolled.";
  };
  relay.on("archive", readOnly);
  showStatus($("status"), relay);

  relay.on("welcome", (welcome) => {
    $("room-name").textContent = `· ${welcome.room?.name ?? ""}`;
    document.title = `${welcome.room?.name ?? "tablerelay"} · table`;
    const you = welcome.you ?? {};
    $("you").replaceChildren("You: ", h("b", {}, you.name ?? "?"), ` (${you.role === "gm" ? "GM" : you.role ?? ""})`);
    if (welcome.archived) readOnly();
    else if (you.role === "spectator") {
      $("roll-button").disabled = true;
      $("form-error").textContent = "This is a spectator link: it can watch but not roll. Ask the GM for a player link.";
    }
  });
  // Fair dice (spec/fairness.md): a GM may publish the open dice seed at any time, once the room has one.
  let seedOpen = null;
  const seedPanel = () => {
    $("seed-panel").hidden = !(isGm() && seedOpen !== null && !relay.state.archived);
  };
  relay.on("welcome", (welcome) => {
    if (welcome.seed) seedOpen = welcome.seed.n;
    seedPanel();
  });
  relay.on("seed_commit", (event) => {
    seedOpen = event.n;
    seedPanel();
  });
  $("seed-reveal").addEventListener("click", async () => {
    const button = $("seed-reveal");
    const status = $("seed-status");
    button.disabled = true;
    status.textContent = "Revealing…";
    try {
      const event = await relay.revealSeed();
      status.textContent = `Dice seed ${event.n ?? ""} revealed; the rolls it made are being checked.`;
    } catch (err) {
      status.textContent = err.message;
    } finally {
      button.disabled = false;
    }
  });
  relay.on("close", (error) => {
    $("feed").prepend(h("p", { class: "notice", role: "alert" }, `The server closed the connection: ${error.message}`));
    $("roll-button").disabled = true;
  });

  $("roll-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const error = $("form-error");
    const { intent, error: problem } = readIntent(systemSelect.value);
    if (problem) {
      error.textContent = problem;
      return;
    }
    const visibility = new FormData(e.target).get("visibility") ?? "public";
    const label = $("label").value.trim();
    const button = $("roll-button");
    button.disabled = true;
    error.textContent = "";
    try {
      await relay.roll(intent, { visibility, label: label || undefined });
      $("label").value = "";
    } catch (err) {
      error.textContent = err.message;
    } finally {
      button.disabled = relay.status === "closed";
    }
  });

  window.tablerelay = relay;
  if (hasSession(relay.token) || params.get("name") || isPersonal(relay.token)) {
    relay.connect().catch(() => {}); // the close listener explains a refusal
  } else {
    // A first visit with this link: ask for a name before joining, so the table never sees "Player 3f2a".
    const join = $("join-form");
    const rollForm = $("roll-form");
    join.hidden = false;
    rollForm.hidden = true;
    $("status").textContent = "Not joined yet";
    $("name").value = stored(NAME_KEY) ?? "";
    $("name").focus();
    join.addEventListener("submit", (e) => {
      e.preventDefault();
      const name = $("name").value.trim();
      if (name) {
        store(NAME_KEY, name);
        relay.name = name;
      }
      join.hidden = true;
      rollForm.hidden = false;
      relay.connect().catch(() => {});
    });
  }
}
