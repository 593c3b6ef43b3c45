// The module's relay connection: opened from the settings (and opened again when they change), its status
// and the notices an outage gives, the cursor that lets a reload rejoin and resume, and what this client
// shows of the room: the panel of status, Fear and Hope, and the Daggerheart system's Fear mirrored from the
// relay by the lead GM.

import { TableRelay, TableRelayError } from "./client.mjs";
import { watchFairness } from "./fairness.mjs";
import { noteFaces } from "./marks.mjs";
import { postEvent } from "./posting.mjs";
import { MODULE_ID, relayAddress } from "./settings.mjs";
import { panelHTML } from "./ui.mjs";

/** @typedef {import("./module.mjs").TableRelayModule} TableRelayModule */

/** A short, non-secret key of a token: a stored session or resume cursor belongs to one token. */
function tokenKey(/** @type {string} */ token) {
  return token.slice(-12);
}

/** Open the connection the settings name (closing any other), or none when the address or token is missing. */
export function connect(/** @type {TableRelayModule} */ module) {
  if (module.client) {
    module.client.close();
    module.client = null;
  }
  const url = relayAddress(module.setting("relayUrl"));
  const token = module.setting("token");
  if (!url || !token) {
    setStatus(module, "idle");
    module.applyDefaultMethod();
    return;
  }
  const cursor = module.setting("cursor") ?? {};
  const mine = cursor.key === tokenKey(token);
  const options = {
    formats: /** @type {import("./client.mjs").Format[]} */ (["foundry"]),
    name: module.game.user.name,
    session: mine && cursor.session ? cursor.session : undefined,
    WebSocket: module.env.WebSocket ?? globalThis.WebSocket,
    // Fair dice (spec/fairness.md): this client witnesses GM rolls and hidden rolls, its random bytes going into
    // their dice. The relay asks players only (a GM is never an outside witness), so a GM's client may say it too.
    witness: true,
  };
  const client = new TableRelay(url, token, options);
  if (mine && typeof cursor.epoch === "string") {
    // Resume where this browser left off: the events missed while it was away arrive as news.
    Object.assign(client, { epoch: cursor.epoch, seq: Number(cursor.seq) || 0 });
  }
  module.client = client;
  // Before the chat's listener below: a roll's verdict is known when its card is drawn.
  watchFairness(module, client);
  client.on("status", (/** @type {string} */ status) => {
    if (module.client !== client) return;
    setStatus(module, status);
  });
  client.on("welcome", (/** @type {any} */ frame) => {
    if (module.client !== client) return;
    module.limits = frame.limits ?? {};
    // A relay rolling fair dice names the room's open dice seed in its welcome: the GM's panel offers its reveal.
    module.fairDice = (frame.seed !== undefined && frame.seed !== null) || module.fairDice;
    module.head = Number.isInteger(frame.seq) ? frame.seq : 0;
    void welcomed(module, client);
  });
  client.on("event", (event, info) => {
    if (module.client !== client) return;
    saveCursor(module, client);
    module.env.Hooks.callAll("tablerelay.event", event, info);
    noteFaces(module, client, event);
    module.posting = module.posting
      .then(() => postEvent(module, client, event, info))
      .catch((/** @type {Error} */ err) => module.notify("error", "TABLERELAY.Notify.PostFailed", { seq: String(event.seq), error: err.message }));
  });
  client.on("state", () => {
    if (module.client !== client) return;
    module.renderPanel();
    mirrorFear(module, Number(client.state.fear));
  });
  client.connect().catch((/** @type {Error} */ err) => {
    if (module.client !== client) return;
    module.notify("error", "TABLERELAY.Notify.TokenRefused", { error: err.message });
  });
  module.applyDefaultMethod();
}

/** The module's status as the relay client reports it, with a notice when the connection is lost or back. */
function setStatus(/** @type {TableRelayModule} */ module, /** @type {string} */ status) {
  const was = module.status;
  module.status = status;
  if (status === "open" && module.outage) {
    module.outage = false;
    module.notify("info", "TABLERELAY.Notify.Reconnected");
  } else if (status === "reconnecting" && was === "open") {
    module.notify("warn", "TABLERELAY.Notify.Lost");
  }
  module.renderPanel();
}

/** A welcome: the cursor saved, this user's participant flagged, the panel and Fear brought up to date. */
async function welcomed(/** @type {TableRelayModule} */ module, /** @type {TableRelay} */ client) {
  if (module.client !== client || !client.you) return;
  saveCursor(module, client);
  const user = module.game.user;
  if (user.getFlag(MODULE_ID, "participant") !== client.you.id) {
    // Other clients find this user's relay rolls (and who posts them) by this flag.
    await user.setFlag(MODULE_ID, "participant", client.you.id);
  }
  module.renderPanel();
  mirrorFear(module, Number(client.state.fear));
}

/** Where this browser is in the room (its token's session and last event), so a reload resumes from there. */
function saveCursor(/** @type {TableRelayModule} */ module, /** @type {TableRelay} */ client) {
  const token = module.setting("token");
  if (!token || !client.epoch) return;
  const cursor = { key: tokenKey(token), session: client.session, epoch: client.epoch, seq: client.seq };
  void module.game.settings.set(MODULE_ID, "cursor", cursor);
}

/** The open relay client, or a TableRelayError saying this client is not connected. */
export function connectedClient(/** @type {TableRelayModule} */ module) {
  if (!module.client || !module.connected) {
    throw new TableRelayError("disconnected", module.text("TABLERELAY.Error.NotConnected"));
  }
  return module.client;
}

// ---- the panel, Fear and Hope ----------------------------------------------------------------------

/** The first active GM mirrors the relay into Foundry, so one client writes and the others read. */
function leadGM(/** @type {TableRelayModule} */ module) {
  const gms = module.users().filter((u) => u.active && u.isGM).map((u) => u.id).sort();
  return gms[0] === module.game.user.id;
}

/**
 * The Daggerheart system's Fear setting, when that system is active.
 * @returns {ClientSettings.KeyFor<"daggerheart">|null}
 */
function fearSetting(/** @type {TableRelayModule} */ module) {
  if (module.game.system?.id !== "daggerheart") return null;
  // The system names its setting in CONFIG.DH; module-env.d.ts declares it under the name the system uses.
  return /** @type {ClientSettings.KeyFor<"daggerheart">} */ (
    String(module.env.CONFIG.DH?.SETTINGS?.gameSettings?.Resources?.Fear ?? "ResourcesFear")
  );
}

/** The lead GM writes the relay's Fear into the Daggerheart system's setting, where it differs. */
function mirrorFear(/** @type {TableRelayModule} */ module, /** @type {number} */ fear) {
  const key = fearSetting(module);
  if (!key || !leadGM(module) || !module.connected) return;
  let current;
  try {
    current = module.game.settings.get("daggerheart", key);
  } catch {
    return; // the system's version has no such setting: nothing to mirror into
  }
  module.fearShown = fear;
  if (current !== fear) void module.game.settings.set("daggerheart", key, fear);
}

/** The system's Fear is read-only from Foundry's side: a change made there is put back to the relay's. */
export function guardFear(/** @type {TableRelayModule} */ module, /** @type {Setting.Implementation} */ setting) {
  const key = fearSetting(module);
  if (!key || setting?.key !== `daggerheart.${key}` || !module.client || !module.connected) return;
  const fear = Number(module.client.state.fear);
  const value = Number(setting.value);
  if (value === fear || !leadGM(module)) return;
  const putBack = () => void module.game.settings.set("daggerheart", key, Number(module.client?.state.fear ?? fear));
  if (module.setting("daggerheartRolls") !== false && Number.isInteger(value) && value >= 0) {
    // The system's own Fear tracker (a GM's change, or a player's that the system's socket hands the GM):
    // the change since the value last shown goes through the relay, atomically; refused, the relay's comes back.
    const delta = value - (module.fearShown ?? fear);
    module.fearShown = value;
    if (delta !== 0) {
      module.api.resource("fear", delta > 0 ? "gain" : "spend", Math.abs(delta)).catch((/** @type {Error} */ err) => {
        module.notify("error", "TABLERELAY.Notify.FearRefused", { message: err.message });
        putBack();
      });
      return;
    }
  }
  module.notify("warn", "TABLERELAY.Notify.FearKept");
  putBack();
}

/** The panel of status, Fear and each player's Hope (with the controls this user may use), drawn again. */
export function renderPanel(/** @type {TableRelayModule} */ module) {
  const document = module.env.document;
  if (!document?.body) return;
  let host = document.getElementById("tablerelay-panel");
  if (!host) {
    host = document.createElement("div");
    host.id = "tablerelay-panel";
    host.addEventListener("click", (/** @type {MouseEvent} */ e) => panelClick(module, e));
    document.body.appendChild(host);
  }
  const state = module.client?.state ?? { fear: 0, hope: {}, members: [] };
  // Fear and Hope are counts: the client's Int (number|bigint) as the panel's numbers.
  /** @type {Record<string, number>} */
  const hope = {};
  for (const [id, value] of Object.entries(state.hope)) hope[id] = Number(value);
  /** @type {Record<string, string>} */
  const names = {};
  for (const u of module.game.users.contents) {
    const participant = u.getFlag(MODULE_ID, "participant");
    if (participant) names[participant] = u.name;
  }
  host.innerHTML = panelHTML(
    { fear: Number(state.fear), hope, members: state.members },
    { isGM: Boolean(module.game.user.isGM), status: module.status, limits: module.limits, names, fairDice: module.fairDice },
    module.game.i18n,
  );
}

function panelClick(/** @type {TableRelayModule} */ module, /** @type {MouseEvent} */ e) {
  const button = /** @type {HTMLElement|null} */ (/** @type {HTMLElement|null} */ (e.target)?.closest?.("button[data-action]") ?? null);
  if (!button) return;
  if (button.dataset.action === "seed-reveal") {
    // Fair dice: every roll that used the open seed can be recomputed once it is public (fairness.mjs redraws).
    module.api
      .revealSeed()
      .then((/** @type {any} */ event) => module.notify("info", "TABLERELAY.Notify.SeedRevealed", { n: String(event?.n ?? "?") }))
      .catch((/** @type {Error} */ err) => module.notify("error", "TABLERELAY.Notify.Error", { message: err.message }));
    return;
  }
  const [name, op] = String(button.dataset.action).split("-");
  const participant = button.dataset.participant;
  const options = name === "hope" && participant ? { participant } : {};
  module.api
    .resource(/** @type {"fear"|"hope"} */ (name), /** @type {"gain"|"spend"} */ (op), 1, options)
    .catch((/** @type {Error} */ err) => module.notify("error", "TABLERELAY.Notify.Error", { message: err.message }));
}
