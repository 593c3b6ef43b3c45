// Who posts a relay event into Foundry's chat, and which Foundry users may see it.
//
// Every connected Foundry client of a room receives every event, so exactly one of them must post it: the
// roller's own client when it is active and sees the roll, else the first active GM (by user id, so every
// client reaches the same answer from the same `game.users`). A user's relay participant id is the flag
// `tablerelay.participant` its own client writes on its User when it joins the relay.

/**
 * @typedef {object} UserView
 * @property {string} id          the Foundry user id
 * @property {boolean} isGM
 * @property {boolean} active     logged in right now
 * @property {string|null} participant  the relay participant id this user's client joined as
 */

/**
 * Foundry roll modes and the relay visibilities they match: v12/v13's roll modes, and v14's message modes
 * (`CONFIG.ChatMessage.modes`, the `core.messageMode` setting), which are named as the relay's are.
 */
export const ROLL_MODES = Object.freeze({
  publicroll: "public",
  roll: "public",
  gmroll: "gm",
  blindroll: "blind",
  selfroll: "self",
  public: "public",
  gm: "gm",
  blind: "blind",
  self: "self",
});

/**
 * The roll mode this user chose for rolls in the chat: `core.messageMode` on Foundry v14, which has no
 * `CONFIG.Dice.rollModes`; `core.rollMode` before it (and on a v14 that still answers it).
 * @param {{ release?: { generation?: number }, settings: { get: (namespace: any, key: any) => unknown } }} game
 * @returns {string|undefined}
 */
export function chosenMode(game) {
  if (Number(game.release?.generation) >= 14) {
    try {
      const mode = game.settings.get("core", "messageMode");
      if (typeof mode === "string" && mode) return mode;
    } catch {
      // not registered under that name: read the older setting
    }
  }
  const mode = game.settings.get("core", "rollMode");
  return typeof mode === "string" ? mode : undefined;
}

/**
 * The relay visibility for a Foundry roll mode (public for anything unknown).
 * @param {string|undefined|null} mode
 * @returns {"public"|"gm"|"blind"|"self"}
 */
export function visibilityOf(mode) {
  return /** @type {"public"|"gm"|"blind"|"self"} */ (ROLL_MODES[/** @type {keyof typeof ROLL_MODES} */ (mode ?? "")] ?? "public");
}

/**
 * Does a viewer see a roll of this visibility in full (the relay's audience table)?
 * @param {string} visibility
 * @param {boolean} isGM
 * @param {boolean} isRoller
 */
export function seesFull(visibility, isGM, isRoller) {
  if (visibility === "public") return true;
  if (visibility === "gm") return isGM || isRoller;
  if (visibility === "blind") return isGM;
  if (visibility === "self") return isRoller;
  return false;
}

/** @param {UserView} a @param {UserView} b */
const byId = (a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * The Foundry user id that posts `event`, or null when nobody active can.
 * @param {{ kind: string, visibility?: string, actor?: { id: string } }} event
 * @param {UserView[]} users
 */
export function posterFor(event, users) {
  const active = users.filter((u) => u.active).sort(byId);
  const firstGM = active.find((u) => u.isGM)?.id ?? null;
  const actor = event.actor?.id;
  const own = active.find((u) => u.participant !== null && u.participant === actor);
  if (event.kind === "reveal") {
    // Turning a sealed card into its roll edits a message someone else may have posted: a GM can.
    return firstGM ?? own?.id ?? null;
  }
  if (own && seesFull(event.visibility ?? "public", own.isGM, true)) return own.id;
  return firstGM;
}

/**
 * The Foundry users a roll's full form is for, by the relay's audience rules.
 * @param {{ visibility: string, actor: { id: string } }} event
 * @param {UserView[]} users
 * @returns {string[]}
 */
export function audienceOf(event, users) {
  return users
    .filter((u) => seesFull(event.visibility, u.isGM, u.participant !== null && u.participant === event.actor.id))
    .map((u) => u.id);
}

/**
 * Is this relay event one the module posts as a ChatMessage? Rolls and reveals are; `faces` rolls are not,
 * because the Foundry roll they fulfilled posts its own message.
 * @param {{ kind: string, intent?: { system?: string }, roll?: { intent?: { system?: string } } | null }} event
 */
export function isPosted(event) {
  if (event.kind === "roll") return event.intent?.system !== "faces";
  if (event.kind === "reveal") return event.roll?.intent?.system !== "faces";
  return false;
}
