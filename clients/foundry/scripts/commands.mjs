// Chat commands: `/tr 4d6kh3`, `/trgm drawsteel.power characteristic=2 edges=1`, `/trb …`, `/trs …`.
//
// What follows the command is either a system intent (a system name such as `drawsteel.power`, then
// `key=value` pairs) or a dice formula in Foundry notation. Values are read as `tablerelay roll` reads them:
// JSON when they parse as JSON (`2`, `true`, `["2 damage","5 damage"]`), else text. ` # text` at the end is
// the roll's label.

/** The commands and the relay visibility each one asks for. */
export const COMMANDS = Object.freeze({ "/tr": "public", "/trgm": "gm", "/trb": "blind", "/trs": "self" });

const COMMAND = /^\s*(\/tr(?:gm|b|s)?)(?=\s|$)([\s\S]*)$/i;
const SYSTEM = /^[a-z][a-z_]*\.[a-z][a-z_]*$/;
const MAX_LABEL = 200;

/**
 * A command that cannot become a roll. Its sentence for the person who typed it is the translation `key`
 * (lang/en.json) filled with `data`: this file stays pure, and the module words it where it shows it
 * (`game.i18n.format(key, data)`), in that person's language.
 */
export class CommandError extends Error {
  /** @param {string} key @param {Record<string, string>} [data] */
  constructor(key, data = {}) {
    super(key);
    this.name = "CommandError";
    this.key = key;
    this.data = data;
  }
}

/**
 * A roll intent (the relay's docs/rules.md): `system` picks the rules, every other key is an argument.
 * @typedef {{ system: string, [argument: string]: unknown }} Intent
 */

/**
 * The roll a chat line asks for, or null when the line is not one of our commands.
 * @param {string} text
 * @returns {{ command: string, visibility: "public"|"gm"|"blind"|"self", intent: Intent, label?: string } | null}
 */
export function parseCommand(text) {
  const match = COMMAND.exec(text);
  if (!match) return null;
  const command = match[1].toLowerCase();
  const visibility = /** @type {"public"|"gm"|"blind"|"self"} */ (COMMANDS[/** @type {keyof typeof COMMANDS} */ (command)]);
  let body = match[2].trim();
  let label;
  const hash = body.search(/(^|\s)#\s/);
  if (hash >= 0) {
    label = body.slice(hash).replace(/^\s*#\s*/, "").trim();
    body = body.slice(0, hash).trim();
    if (label.length > MAX_LABEL) throw new CommandError("TABLERELAY.Command.LabelTooLong", { max: String(MAX_LABEL) });
  }
  if (!body) {
    throw new CommandError("TABLERELAY.Command.NothingToRoll", { command });
  }
  const intent = parseIntent(body);
  return label ? { command, visibility, intent, label } : { command, visibility, intent };
}

/**
 * A roll intent from the text after a command.
 * @param {string} body
 * @returns {Intent}
 */
export function parseIntent(body) {
  const words = splitWords(body);
  const [first, ...rest] = words;
  if (!SYSTEM.test(first) || !rest.every((word) => /^[A-Za-z_][\w]*=/.test(word))) {
    return { system: "dice", formula: body, dialect: "foundry" };
  }
  /** @type {Intent} */
  const intent = { system: first };
  for (const word of rest) {
    const at = word.indexOf("=");
    const key = word.slice(0, at);
    const raw = word.slice(at + 1);
    if (key === "system") throw new CommandError("TABLERELAY.Command.SystemArgument");
    if (Object.hasOwn(intent, key)) throw new CommandError("TABLERELAY.Command.ArgumentTwice", { argument: key });
    intent[key] = readValue(raw);
  }
  return intent;
}

/** @param {string} raw */
function readValue(raw) {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/**
 * Words separated by spaces, where a quoted string or a bracketed list or map stays one word.
 * @param {string} text
 */
export function splitWords(text) {
  /** @type {string[]} */
  const words = [];
  let word = "";
  let depth = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      word += c;
      if (c === "\\" && i + 1 < text.length) word += text[++i];
      else if (c === '"') quoted = false;
      continue;
    }
    if (c === '"') quoted = true;
    else if (c === "[" || c === "{") depth++;
    else if ((c === "]" || c === "}") && depth > 0) depth--;
    if (/\s/.test(c) && depth === 0) {
      if (word) words.push(word);
      word = "";
      continue;
    }
    word += c;
  }
  if (quoted || depth > 0) throw new CommandError("TABLERELAY.Command.LeftOpen");
  if (word) words.push(word);
  return words;
}
