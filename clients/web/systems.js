// The roll form's fields for each system, following docs/rules.md (the rules core contract). A field that is
// left at its default is not sent, so the server's defaults apply; optional fields left empty are omitted.
//
// Field types: int, text, bool, select, ints (comma list), texts (comma list), checks (several ints),
// letters (one letter or a list), characteristics (M A R I P), rows (a list of maps, e.g. targets).
// `when: {key: value}` shows a field only while another field has that value.

const LETTERS = ["M", "A", "R", "I", "P"];

const drawSteelShared = [
  { key: "edges", label: "Edges", type: "int", min: 0, default: 0 },
  { key: "banes", label: "Banes", type: "int", min: 0, default: 0 },
  { key: "bonus", label: "Bonus − penalty", type: "int", default: 0 },
  { key: "auto_tiers", label: "Automatic tier", type: "checks", options: [1, 2, 3], default: [] },
];

const honorsEdgeOptions = [
  { key: "modifiers", label: "Modifiers", type: "texts", default: [], placeholder: "+1k0, -1k1", hint: "comma-separated +XkY / -XkY" },
  { key: "bonus", label: "Bonus", type: "int", default: 0 },
  { key: "assist_ranks", label: "Assist ranks", type: "ints", default: [], placeholder: "2, 3", hint: "cooperative roll: the ranks are added" },
  { key: "tn", label: "TN", type: "int", min: 0, optional: true, placeholder: "none" },
  { key: "explode", label: "10s explode", type: "bool", default: true },
];

export const SYSTEM_FORMS = [
  {
    id: "drawsteel.power",
    name: "Draw Steel · Power roll",
    fields: [
      { key: "characteristic", label: "Characteristic", type: "int", default: 0 },
      ...drawSteelShared,
      { key: "downgrade_to", label: "Downgrade to", type: "select", options: [["", "no"], [1, "Tier 1"], [2, "Tier 2"], [3, "Tier 3"]], default: "" },
      { key: "kind", label: "Kind", type: "select", options: [["ability", "Ability roll"], ["test", "Test"]], default: "ability" },
    ],
  },
  {
    id: "drawsteel.ability",
    name: "Draw Steel · Ability roll",
    fields: [
      { key: "characteristics", label: "Characteristics", type: "characteristics", letters: LETTERS, initial: { M: 2, A: 1, R: 0, I: 0, P: 1 } },
      { key: "roll_with", label: "Roll with", type: "letters", initial: "M", placeholder: "M or M, A", required: true, hint: "the highest is used" },
      { key: "choose", label: "Choose for “X or Y”", type: "select", options: [["", "the highest"], ...LETTERS.map((l) => [l, l])], default: "" },
      { key: "tiers", label: "Tier 1", type: "tier", index: 0, initial: "3 + M damage", required: true },
      { key: "tiers", label: "Tier 2", type: "tier", index: 1, initial: "6 + M damage", required: true },
      { key: "tiers", label: "Tier 3", type: "tier", index: 2, initial: "9 + M damage; push 2", required: true },
      ...drawSteelShared,
      {
        key: "targets",
        label: "Targets",
        type: "rows",
        columns: [
          { key: "name", label: "Name", type: "text" },
          { key: "edges", label: "Edges", type: "int", min: 0 },
          { key: "banes", label: "Banes", type: "int", min: 0 },
          { key: "bonus", label: "Bonus", type: "int" },
        ],
        hint: "leave empty for one unnamed target",
      },
    ],
  },
  {
    id: "daggerheart.duality",
    name: "Daggerheart · Duality (action) roll",
    fields: [
      { key: "modifier", label: "Modifier", type: "int", default: 0 },
      { key: "difficulty", label: "Difficulty", type: "int", min: 0, optional: true, placeholder: "none" },
      { key: "advantage", label: "Advantage", type: "int", min: 0, default: 0 },
      { key: "disadvantage", label: "Disadvantage", type: "int", min: 0, default: 0 },
      { key: "experience", label: "Experience", type: "int", min: 0, default: 0 },
      { key: "spend_hope", label: "Spend 1 Hope for the Experience", type: "bool", default: false },
      { key: "reaction", label: "Reaction roll", type: "bool", default: false },
    ],
  },
  {
    id: "daggerheart.attack",
    name: "Daggerheart · Adversary attack",
    fields: [
      { key: "modifier", label: "Attack modifier", type: "int", initial: 0, required: true },
      { key: "advantage", label: "Advantage", type: "bool", default: false },
      { key: "disadvantage", label: "Disadvantage", type: "bool", default: false },
      { key: "experience", label: "Experience", type: "int", min: 0, default: 0 },
      { key: "spend_fear", label: "Spend 1 Fear for the Experience", type: "bool", default: false },
      { key: "crit_threshold", label: "Critical on", type: "int", min: 1, max: 20, default: 20 },
      {
        key: "targets",
        label: "Targets",
        type: "rows",
        columns: [
          { key: "name", label: "Name", type: "text" },
          { key: "evasion", label: "Evasion", type: "int", min: 0 },
        ],
        initialRows: [{ name: "", evasion: 12 }],
      },
    ],
  },
  {
    id: "honors_edge.roll",
    name: "Honor's Edge · Roll and keep",
    fields: [{ key: "pool", label: "Pool", type: "text", initial: "5k3", placeholder: "XkY", required: true }, ...honorsEdgeOptions],
  },
  {
    id: "honors_edge.skill",
    name: "Honor's Edge · Skill roll",
    fields: [
      { key: "attribute", label: "Attribute", type: "int", min: 0, initial: 3, required: true },
      { key: "skill", label: "Skill", type: "int", min: 0, default: 0, initial: 2 },
      ...honorsEdgeOptions,
    ],
  },
  {
    id: "honors_edge.damage",
    name: "Honor's Edge · Damage roll",
    fields: [
      { key: "strength", label: "Strength", type: "int", min: 0, initial: 3, required: true },
      { key: "weapon", label: "Weapon", type: "text", default: "+0k0", initial: "+2k1", placeholder: "+XkY" },
      ...honorsEdgeOptions.filter((f) => ["modifiers", "bonus", "explode"].includes(f.key)),
    ],
  },
  {
    id: "nexus.test",
    name: "Nexus · Skill test",
    fields: [
      { key: "attribute_die", label: "Attribute die", type: "select", options: ["d4-1", "d4", "d6", "d8", "d10", "d12", "d12+1"].map((d) => [d, d]), initial: "d8", required: true },
      { key: "skill_rank", label: "Skill rank", type: "int", min: 0, default: 0 },
      { key: "difficulty", label: "Difficulty", type: "select", options: [["", "medium (8)"], ...["trivial", "easy", "hard", "very_hard", "extreme", "legendary"].map((d) => [d, d.replace("_", " ")])], default: "" },
      { key: "tn", label: "or TN", type: "int", min: 1, optional: true, placeholder: "from difficulty" },
      { key: "boons", label: "Boons", type: "int", min: 0, default: 0 },
      { key: "banes", label: "Banes", type: "int", min: 0, default: 0 },
      { key: "skill_type", label: "Skill type", type: "select", options: ["general", "combat", "expert", "magic"].map((d) => [d, d]), default: "general" },
      { key: "trained", label: "Trained", type: "bool", default: true },
      { key: "bonus", label: "Bonus", type: "int", default: 0 },
    ],
  },
  {
    id: "nexus.check",
    name: "Nexus · Check",
    fields: [
      { key: "kind", label: "Kind", type: "select", options: [["durability", "Durability"], ["supply", "Supply"], ["individual", "Individual"]], initial: "supply", required: true },
      { key: "die", label: "Die", type: "select", options: ["d4", "d6", "d8", "d10", "d12", "1"].map((d) => [d, d]), initial: "d8", required: true },
      { key: "damaged", label: "Already damaged", type: "bool", default: false, when: { kind: "durability" } },
      { key: "table", label: "Table", type: "select", options: [["frightened", "Frightened"]], initial: "frightened", required: true, when: { kind: "individual" } },
    ],
  },
  {
    id: "dice",
    name: "Dice formula",
    fields: [
      { key: "formula", label: "Formula", type: "text", initial: "4d6kh3 + 2", required: true, wide: true, placeholder: "2d20kh + 5" },
      { key: "dialect", label: "Notation", type: "select", options: [["foundry", "Foundry VTT"], ["roll20", "Roll20"]], default: "foundry" },
    ],
  },
];

/** Parse an integer field exactly: a BigInt when it does not fit a JS number. */
export function parseInteger(text) {
  const t = String(text).trim();
  if (!/^[+-]?\d+$/.test(t)) return null;
  const n = Number(t);
  return Number.isSafeInteger(n) ? n : BigInt(t);
}
