// Roll commands typed into Roll20's chat: `!tr 4d6kh3`, `!trgm drawsteel.power characteristic=2 edges=1`.
//
// The bridge reads these before Roll20 sends them (see roll20-chat.js) and turns them into roll frames for
// the relay. Arguments follow the command line (`tablerelay roll SYSTEM key=value ...`, rules/cli.py): each
// value is read as JSON where it parses (so `2` is an int, `true` a bool, `[1,2]` a list) and kept as a
// string otherwise (`d12+1`, `M`). Whole numbers beyond 2^53 - 1 become BigInt, as in the JS client.

/** @typedef {"public" | "gm" | "blind" | "self"} Visibility */
/** @typedef {{ system: string, [argument: string]: unknown }} Intent */
/** @typedef {{ intent: Intent, visibility: Visibility, label?: string }} RollCommand */

/** The command words and the visibility each asks for. */
export const COMMANDS = Object.freeze({
  "!tr": "public",
  "!trgm": "gm",
  "!trb": "blind",
  "!trs": "self",
});

// A command word followed by whitespace or the end; `!track` or `!trx` are other API commands, not ours.
const COMMAND = /^\s*(!tr(?:gm|b|s)?)(?=\s|$)\s*([\s\S]*)$/i;
// A system name as the registry spells them: `dice`, `drawsteel.power`, `honors_edge.roll`.
const SYSTEM = /^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*$/;
const PAIR = /^([A-Za-z_][A-Za-z0-9_]*)=([\s\S]*)$/;
// ` -- ` separates a label from the roll: `!tr 1d20+5 -- Stealth`.
const LABEL_SEPARATOR = /\s+--\s+/;

/** An error a person made in a command; its message is a sentence for them. */
export class CommandError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "CommandError";
  }
}

/** True when `text` (the chat input) is one of the bridge's commands and must not reach Roll20. */
export function isCommand(text) {
  return typeof text === "string" && COMMAND.test(text);
}

/**
 * Read one argument value the way the command line does: JSON where it parses, else the text itself.
 * @param {string} raw
 * @returns {unknown}
 */
export function parseValue(raw) {
  if (/^[+-]?\d+$/.test(raw)) {
    const n = Number(raw);
    return Number.isSafeInteger(n) ? n : BigInt(raw);
  }
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/**
 * Split `key=value` words into an intent's arguments (rules/cli.py's parse_pairs, same errors).
 * @param {string[]} words
 * @returns {Record<string, unknown>}
 */
export function parsePairs(words) {
  /** @type {Record<string, unknown>} */
  const args = {};
  for (const word of words) {
    const match = PAIR.exec(word);
    if (!match) throw new CommandError(`Arguments are written key=value; got “${word}”.`);
    const [, key, raw] = match;
    if (key === "system") throw new CommandError("The system is the first word after the command, not a key=value argument.");
    if (Object.hasOwn(args, key)) throw new CommandError(`The argument “${key}” is given twice.`);
    args[key] = parseValue(raw);
  }
  return args;
}

// Words split on spaces, except inside a JSON value: `targets=[{"name": "Rook", "evasion": 12}]` is one word.
function words(text) {
  const out = [];
  let current = "";
  let depth = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      current += ch;
      if (ch === "\\" && i + 1 < text.length) current += text[++i];
      else if (ch === '"') quoted = false;
    } else if (ch === '"') {
      quoted = true;
      current += ch;
    } else if (ch === "[" || ch === "{") {
      depth++;
      current += ch;
    } else if ((ch === "]" || ch === "}") && depth > 0) {
      depth--;
      current += ch;
    } else if (/\s/.test(ch) && depth === 0) {
      if (current) out.push(current);
      current = "";
    } else {
      current += ch;
    }
  }
  if (current) out.push(current);
  return out;
}

/**
 * Parse a chat line into a roll. Returns null when the line is not a bridge command at all.
 *
 * - `!tr FORMULA` rolls dice in Roll20 notation: `{system: "dice", formula, dialect: "roll20"}`.
 * - `!tr SYSTEM key=value ...` rolls a game system: `{system: SYSTEM, key: value, ...}`. A first word that
 *   names a system and is followed only by key=value words is a system; anything else is a formula
 *   (`!tr dice formula=2d6 dialect=foundry` reaches the dice system with its own arguments).
 * - ` -- label` at the end sets the roll's label.
 * @param {string} text
 * @returns {RollCommand | null}
 */
export function parseCommand(text) {
  const match = COMMAND.exec(text ?? "");
  if (!match) return null;
  const visibility = /** @type {Visibility} */ (COMMANDS[/** @type {keyof typeof COMMANDS} */ (match[1].toLowerCase())]);
  let body = match[2].trim();
  let label;
  const separator = LABEL_SEPARATOR.exec(body);
  if (separator) {
    label = body.slice(separator.index + separator[0].length).trim() || undefined;
    body = body.slice(0, separator.index).trim();
  }
  if (label !== undefined && label.length > 200) throw new CommandError("A label is at most 200 characters.");
  if (!body) {
    throw new CommandError(`${match[1]} needs a dice formula (${match[1]} 4d6kh3) or a system (${match[1]} drawsteel.power characteristic=2).`);
  }
  const parts = words(body);
  const [first, ...rest] = parts;
  const looksLikeSystem = SYSTEM.test(first) && (first.includes(".") || (first === "dice" && rest.length > 0));
  /** @type {Intent} */
  let intent;
  if (looksLikeSystem && rest.every((w) => PAIR.test(w))) {
    intent = { system: first, ...parsePairs(rest) };
  } else if (looksLikeSystem && first.includes(".")) {
    // A system name followed by something that is not key=value: say what is wrong rather than rolling it
    // as a formula the dice engine would refuse with a less helpful message.
    parsePairs(rest);
    throw new CommandError(`Arguments are written key=value.`);
  } else {
    intent = { system: "dice", formula: body, dialect: "roll20" };
  }
  return label === undefined ? { intent, visibility } : { intent, visibility, label };
}
