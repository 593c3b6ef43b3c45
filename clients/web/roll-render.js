// How one roll is drawn: its system's name, its dice (kept and dropped, Hope and Fear, exploding chains), its
// outcome in its game's own terms, and the sentence a screen reader hears about it.

import { h, str } from "./dom.js";

// ---- systems -------------------------------------------------------------------------------------------

export const SYSTEM_NAMES = {
  "drawsteel.power": ["Draw Steel", "Power roll"],
  "drawsteel.ability": ["Draw Steel", "Ability roll"],
  "daggerheart.duality": ["Daggerheart", "Duality roll"],
  "daggerheart.attack": ["Daggerheart", "Adversary attack"],
  "honors_edge.roll": ["Honor's Edge", "Roll and keep"],
  "honors_edge.skill": ["Honor's Edge", "Skill roll"],
  "honors_edge.damage": ["Honor's Edge", "Damage roll"],
  "nexus.test": ["Nexus", "Skill test"],
  "nexus.check": ["Nexus", "Check"],
  dice: ["Dice", "Formula"],
  faces: ["Foundry VTT", "Dice faces"],
};

export function systemName(system, intent) {
  const [game, roll] = SYSTEM_NAMES[system] ?? [system ?? "Roll", ""];
  if (system === "dice") return `Dice · ${intent?.dialect === "roll20" ? "Roll20" : "Foundry"} formula`;
  return roll ? `${game} · ${roll}` : game;
}

export const VISIBILITY_WORDS = {
  gm: "GM roll",
  blind: "Blind roll",
  self: "Self roll",
};

// ---- dice ----------------------------------------------------------------------------------------------

function shapeClass(faces) {
  const f = Number(faces);
  return [4, 6, 8, 10, 12, 20, 100, 2].includes(f) ? `d${f}` : "d6";
}

function faceText(die) {
  if (Number(die.faces) === 3 && Math.abs(Number(die.value)) <= 1) {
    return ["−", "0", "+"][Number(die.value) + 1]; // a Fate die
  }
  return str(die.value);
}

function oneDie(faces, value, { role, kept = true, exploded = false, big = false, fate = false } = {}) {
  const classes = ["die", shapeClass(faces)];
  if (!kept) classes.push("dropped");
  if (exploded) classes.push("exploded");
  if (role === "hope" || role === "fear") classes.push(role);
  if (kept && role !== "hope" && role !== "fear" && Number(value) === Number(faces) && Number(faces) > 2) {
    classes.push("max");
  }
  if (big) classes.push("big");
  const words = [fate ? "Fate die" : `d${str(faces)}`, `showing ${value}`];
  if (role) words.unshift(role);
  if (!kept) words.push("dropped");
  if (exploded) words.push("exploded");
  return h("span", { class: classes.join(" "), role: "img", "aria-label": words.join(" ") }, h("span", {}, value));
}

/** Draws result.dice: kept vs dropped, roles (Hope/Fear), exploding chains. */
export function diceRow(result) {
  const dice = Array.isArray(result?.dice) ? result.dice : [];
  if (!dice.length) return null;
  const big = dice.length <= 3;
  const row = h("div", { class: "dice", role: "group", "aria-label": `${dice.length} ${dice.length === 1 ? "die" : "dice"}` });
  for (const die of dice) {
    const kept = die.kept !== false;
    if (Array.isArray(die.chain) && die.chain.length > 1) {
      // An exploding die: one die for keeping, drawn as its chain of faces.
      const chain = h("span", {
        class: "chain multi",
        role: "group",
        "aria-label": `exploding d${str(die.faces)}: ${die.chain.map(str).join(" + ")} = ${str(die.value)}${kept ? "" : ", dropped"}`,
      });
      die.chain.forEach((face, i) => {
        if (i) chain.append(h("span", { class: "chain-plus", "aria-hidden": "true" }, "+"));
        const last = i === die.chain.length - 1;
        chain.append(oneDie(die.faces, face, { kept, exploded: !last, big }));
      });
      chain.append(h("span", { class: "chain-sum", "aria-hidden": "true" }, `= ${str(die.value)}`));
      row.append(chain);
      continue;
    }
    const role = typeof die.role === "string" ? die.role : undefined;
    const showRole = role && !["d6"].includes(role);
    row.append(
      h(
        "span",
        { class: "die-wrap" },
        oneDie(die.faces, faceText(die), { role, kept, exploded: die.exploded === true, big, fate: die.kind === "fate" }),
        showRole ? h("span", { class: "die-role", "aria-hidden": "true" }, role === "attribute" ? "attr" : role) : null,
      ),
    );
  }
  return row;
}

// ---- outcomes in each game's own terms -----------------------------------------------------------------

const badge = (text, kind = "") => h("span", { class: `badge ${kind}` }, text);
const totalLine = (result, extra) =>
  result?.total === null || result?.total === undefined
    ? null
    : h("span", { class: "total" }, "Total ", h("b", {}, str(result.total)), extra ? ` ${extra}` : "");

const EDGE_WORDS = { edge: "Edge", double_edge: "Double edge", bane: "Bane", double_bane: "Double bane" };

function drawSteelPower(r) {
  const tier = Number(r.tier);
  const badges = [];
  if (r.critical) badges.push(badge("Critical", "crit"));
  if (EDGE_WORDS[r.edge_state]) badges.push(badge(EDGE_WORDS[r.edge_state], r.edge_state.includes("edge") ? "good" : "bad"));
  if (r.automatic) badges.push(badge(`Automatic tier ${str(r.automatic)}`));
  if (r.downgraded) badges.push(badge(`Downgraded from tier ${str(r.tier_rolled)}`));
  if (r.kind === "test") badges.push(badge("Test"));
  return [
    h("span", { class: `headline tier${tier}${r.critical ? " crit" : ""}` }, `Tier ${str(r.tier)}`),
    totalLine(r, r.natural !== undefined ? `(natural ${str(r.natural)})` : ""),
    badges.length ? h("span", { class: "badges" }, badges) : null,
  ];
}

function drawSteelAbility(r) {
  const targets = Array.isArray(r.targets) ? r.targets : [];
  const crit = targets.some((t) => t.critical) || r.critical;
  const first = targets[0] ?? r;
  const parts = [
    h(
      "span",
      { class: `headline tier${Number(first.tier)}${crit ? " crit" : ""}` },
      targets.length > 1 && targets.some((t) => str(t.tier) !== str(first.tier))
        ? `${targets.length} targets`
        : `Tier ${str(first.tier)}`,
    ),
    totalLine(r, r.natural !== undefined ? `(natural ${str(r.natural)})` : ""),
    crit ? h("span", { class: "badges" }, badge("Critical", "crit")) : null,
  ];
  const list = h("ul", { class: "targets", "aria-label": "Outcome per target" });
  for (const t of targets) {
    const dmg = t.damage !== null && t.damage !== undefined ? `${str(t.damage)}${t.damage_type ? ` ${t.damage_type}` : ""} damage` : "";
    const detail = [dmg, t.effect].filter(Boolean).join("; ");
    list.append(
      h(
        "li",
        {},
        h("span", { class: "t-name" }, t.name || "Target"),
        h("span", { class: `badge tier${Number(t.tier)}` }, `Tier ${str(t.tier)}`),
        t.critical ? badge("Critical", "crit") : null,
        detail ? h("span", { class: "t-detail" }, detail) : null,
      ),
    );
  }
  return targets.length ? [...parts, list] : parts;
}

function duality(r) {
  const crit = r.with === "critical";
  const words = crit ? "Critical success" : r.with === "hope" ? "With Hope" : "With Fear";
  const headClass = crit ? "crit" : r.with === "hope" ? "hope" : "fear";
  const badges = [];
  if (r.success === true && !crit) badges.push(badge("Success", "good"));
  if (r.success === false) badges.push(badge("Failure", "bad"));
  if (r.difficulty !== null && r.difficulty !== undefined) badges.push(badge(`Difficulty ${str(r.difficulty)}`));
  if (r.reaction) badges.push(badge("Reaction"));
  for (const effect of r.effects ?? []) {
    const sign = Number(effect.delta) > 0 ? "+" : "";
    badges.push(badge(`${sign}${str(effect.delta)} ${effect.resource === "fear" ? "Fear" : "Hope"}`, effect.resource));
  }
  return [
    h("span", { class: `headline ${headClass}` }, words),
    totalLine(r),
    badges.length ? h("span", { class: "badges" }, badges) : null,
  ];
}

function adversaryAttack(r) {
  const targets = Array.isArray(r.targets) ? r.targets : [];
  const crit = Boolean(r.critical) || targets.some((t) => t.critical);
  const hits = targets.filter((t) => t.hit).length;
  const headline = crit
    ? "Critical hit"
    : targets.length === 0
      ? "Attack"
      : targets.length === 1
        ? targets[0].hit ? "Hit" : "Miss"
        : `${hits} of ${targets.length} hit`;
  const headClass = crit ? "crit" : hits ? "good" : targets.length ? "bad" : "";
  const parts = [
    h("span", { class: `headline ${headClass}` }, headline),
    totalLine(r, r.natural !== undefined ? `(natural ${str(r.natural)})` : ""),
  ];
  const badges = [];
  if (r.mode && r.mode !== "normal") badges.push(badge(r.mode === "advantage" ? "Advantage" : "Disadvantage", r.mode === "advantage" ? "good" : "bad"));
  if (r.spend_fear || (r.requires && r.requires.fear)) badges.push(badge("Spent Fear", "fear"));
  if (badges.length) parts.push(h("span", { class: "badges" }, badges));
  if (targets.length) {
    const list = h("ul", { class: "targets", "aria-label": "Outcome per target" });
    for (const t of targets) {
      list.append(
        h(
          "li",
          {},
          h("span", { class: "t-name" }, t.name || "Target"),
          t.critical ? badge("Critical hit", "crit") : t.hit ? badge("Hit", "good") : badge("Miss", "bad"),
          t.evasion !== undefined ? h("span", { class: "t-detail" }, `Evasion ${str(t.evasion)}`) : null,
        ),
      );
    }
    parts.push(list);
  }
  return parts;
}

function honorsEdge(r) {
  const pool = r.pool || (r.rolled !== undefined ? `${str(r.rolled)}k${str(r.kept)}` : "");
  const hasTn = r.tn !== null && r.tn !== undefined;
  const badges = [];
  if (hasTn) badges.push(badge(`TN ${str(r.tn)}`));
  const success = Number(r.success_margins ?? 0);
  const failure = Number(r.failure_margins ?? 0);
  if (r.success === true && success > 0) badges.push(badge(`${success} success margin${success === 1 ? "" : "s"}`, "good"));
  if (r.success === false && failure > 0) badges.push(badge(`${failure} failure margin${failure === 1 ? "" : "s"}`, "bad"));
  if (Number(r.assist ?? 0) > 0) badges.push(badge(`Assist +${str(r.assist)}`));
  const headline = hasTn
    ? h("span", { class: `headline ${r.success ? "good" : "bad"}` }, r.success ? "Success" : "Failure")
    : h("span", { class: "headline" }, str(r.total));
  return [
    headline,
    hasTn ? totalLine(r, pool ? `(${pool})` : "") : h("span", { class: "total" }, pool ? `${pool}, kept dice summed` : ""),
    badges.length ? h("span", { class: "badges" }, badges) : null,
  ];
}

const LEVEL_WORDS = {
  blunder: ["Blunder", "bad"],
  failure: ["Failure", "bad"],
  weak: ["Weak success", "good"],
  strong: ["Strong success", "good"],
  critical: ["Critical success", "crit"],
};

function nexusTest(r) {
  const [words, kind] = LEVEL_WORDS[r.success_level] ?? [str(r.success_level), ""];
  const diff = r.difference !== undefined ? `${Number(r.difference) >= 0 ? "+" : ""}${str(r.difference)}` : "";
  const badges = [badge(`TN ${str(r.tn)}`)];
  if (diff) badges.push(badge(diff, Number(r.difference) >= 0 ? "good" : "bad"));
  const boons = Number(r.net_boons ?? 0);
  if (boons) badges.push(badge(`${Math.abs(boons)} ${boons > 0 ? "boon" : "bane"}${Math.abs(boons) === 1 ? "" : "s"}`, boons > 0 ? "good" : "bad"));
  return [h("span", { class: `headline ${kind}` }, words), totalLine(r), h("span", { class: "badges" }, badges)];
}

const CHECK_WORDS = { durability: "Durability check", supply: "Supply check", individual: "Check" };

function nexusCheck(r) {
  let outcome = r.outcome;
  let kind = "";
  if (r.kind === "durability") {
    kind = outcome === "ok" ? "good" : "bad";
    outcome = { ok: "Holds", damaged: "Damaged", destroyed: "Destroyed" }[outcome] ?? outcome;
  } else if (r.kind === "supply") {
    kind = outcome === "gone" ? "bad" : outcome === r.die ? "good" : "";
    outcome = outcome === "gone" ? "Supply gone" : outcome === r.die ? `Supply holds at ${r.die}` : `Supply down to ${outcome}`;
  } else if (outcome && typeof outcome === "object") {
    outcome = outcome.outcome ?? JSON.stringify(outcome);
  }
  return [
    h("span", { class: `headline ${kind}` }, str(outcome)),
    h("span", { class: "total" }, `${CHECK_WORDS[r.kind] ?? "Check"}: `, h("b", {}, str(r.value ?? r.total))),
  ];
}

function formula(r) {
  return [h("span", { class: "headline" }, str(r.total)), r.formula ? null : totalLine(r)];
}

/** Faces a VTT asked for: they have no total of their own, the VTT's formula adds them up. */
function faces(r) {
  return [h("span", { class: "total" }, r.for ? ["for ", h("b", {}, str(r.for))] : "faces for a VTT roll")];
}

const OUTCOMES = {
  "drawsteel.power": drawSteelPower,
  "drawsteel.ability": drawSteelAbility,
  "daggerheart.duality": duality,
  "daggerheart.attack": adversaryAttack,
  "honors_edge.roll": honorsEdge,
  "honors_edge.skill": honorsEdge,
  "honors_edge.damage": honorsEdge,
  "nexus.test": nexusTest,
  "nexus.check": nexusCheck,
  dice: formula,
  faces,
};

/** A critical success (or hit) anywhere in a roll's result: its card is marked. */
export function isCritical(r) {
  return Boolean(
    r?.critical || r?.with === "critical" || r?.success_level === "critical" || r?.targets?.some?.((t) => t.critical),
  );
}

/** The body of an open roll: dice, outcome, formula, summary. */
export function rollBody(event) {
  const r = event.result ?? {};
  const render = OUTCOMES[r.system] ?? formula;
  let outcome;
  try {
    outcome = render(r);
  } catch {
    outcome = [h("span", { class: "headline" }, str(r.total))]; // an unexpected shape: still show the total
  }
  return [
    event.label ? h("p", { class: "label" }, event.label) : null,
    diceRow(r),
    h("div", { class: "outcome" }, outcome),
    r.formula ? h("div", { class: "formula" }, r.formula) : null,
    r.text ? h("p", { class: "summary" }, struck(r.text)) : null,
  ];
}

/** The rules' summaries mark dropped dice as ~~n~~; show them struck through. */
function struck(text) {
  const parts = String(text).split(/~~(.*?)~~/);
  return parts.map((part, i) => (i % 2 ? h("s", { "aria-label": `${part} dropped` }, part) : part));
}

/** A sentence for screen readers (the live region) about a roll. */
export function rollSentence(event) {
  const who = event.actor?.name ?? "Someone";
  if (event.sealed) return `${who} made a sealed ${VISIBILITY_WORDS[event.visibility]?.toLowerCase() ?? "roll"}.`;
  const text = event.result?.text ?? `total ${str(event.result?.total)}`;
  return `${who} rolled${event.label ? ` ${event.label}` : ""}: ${text}`;
}
