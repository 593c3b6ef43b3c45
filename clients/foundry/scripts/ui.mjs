// The module's HTML: the sealed card, chat marks, the Fear and Hope panel and the connection form.
// Pure functions returning strings, so the Node tests and the browser test render exactly what Foundry shows.

/** @param {unknown} value */
export function escapeHTML(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * The card everyone outside a hidden roll's audience sees until it is revealed.
 * @param {{ seq: number, visibility: string, actor?: { name?: string }, commitment?: string }} event
 */
export function sealedCardHTML(event) {
  const who = escapeHTML(event.actor?.name ?? "Someone");
  const commitment = typeof event.commitment === "string" ? event.commitment : "";
  return [
    `<div class="tablerelay-sealed" data-seq="${Number(event.seq)}">`,
    `<div class="tablerelay-sealed-title"><i class="fa-solid fa-lock"></i> Sealed roll</div>`,
    `<p>${who} made a ${escapeHTML(VISIBILITY_WORDS[event.visibility] ?? "hidden")} roll. `,
    `It opens here when it is revealed, and the relay proves it was fixed when it was made.</p>`,
    commitment
      ? `<p class="tablerelay-commitment" title="SHA-256 commitment ${escapeHTML(commitment)}">commitment ${escapeHTML(commitment.slice(0, 16))}…</p>`
      : "",
    `</div>`,
  ].join("");
}

/** @type {Record<string, string>} */
const VISIBILITY_WORDS = { gm: "GM-only", blind: "blind", self: "private" };

/**
 * The small mark a chat message carries: where its dice came from.
 * @param {{ via?: boolean, seqs?: number[], seq?: number, reason?: string, revealed?: number, verified?: boolean, verifyError?: string, sealMatches?: boolean|null, signatures?: Array<{ verified?: boolean }> } | undefined} flags
 * @param {{ showVerified: boolean }} options
 */
export function markHTML(flags, { showVerified }) {
  if (!flags || flags.via === false) {
    const why = flags?.reason ? ` (${escapeHTML(flags.reason)})` : "";
    return `<div class="tablerelay-mark tablerelay-not-relay" title="These dice were rolled by Foundry, not by the relay${why}"><i class="fa-solid fa-triangle-exclamation"></i> not via relay</div>`;
  }
  const seqs = flags.seqs ?? (flags.seq !== undefined ? [flags.seq] : []);
  const where = seqs.length ? ` #${seqs.join(", #")}` : "";
  // A failed check is always shown, whatever the setting: it is the one thing a table must not miss.
  const unsigned = flags.verified === false || (flags.signatures ?? []).some((s) => s.verified === false);
  if (unsigned) {
    const why = flags.verifyError ? `: ${escapeHTML(flags.verifyError)}` : "";
    return `<div class="tablerelay-mark tablerelay-failed" title="The relay's signature on this roll does not verify${why}"><i class="fa-solid fa-xmark"></i> signature does not verify — do not trust this roll${where}</div>`;
  }
  if (flags.revealed !== undefined && flags.sealMatches === false) {
    return `<div class="tablerelay-mark tablerelay-failed" title="The reveal does not match the commitment published with the sealed roll"><i class="fa-solid fa-xmark"></i> reveal does not match its seal${where}</div>`;
  }
  if (!showVerified) return "";
  const signed = flags.verified === true || ((flags.signatures ?? []).length > 0 && flags.signatures?.every((s) => s.verified === true));
  const seal = signed ? "signed ✓" : "relay";
  if (flags.revealed !== undefined) {
    const checked = flags.sealMatches === true ? "revealed ✓ matches its seal" : "revealed";
    return `<div class="tablerelay-mark tablerelay-verified" title="Rolled by the relay; the reveal was checked against its commitment"><i class="fa-solid fa-check"></i> ${checked} · ${seal}${where}</div>`;
  }
  return `<div class="tablerelay-mark tablerelay-verified" title="Rolled by the relay's secure dice${signed ? " and signed with its key" : ""}"><i class="fa-solid fa-dice-d20"></i> ${seal}${where}</div>`;
}

/**
 * The Fear and Hope panel.
 * @param {{ fear: number, hope: Record<string, number>, members?: Array<{ id: string, name: string, role: string }> }} state
 * @param {{ isGM: boolean, status: string, limits?: { fear?: number, hope?: number }, names?: Record<string, string> }} view
 */
export function panelHTML(state, view) {
  const fearMax = view.limits?.fear ?? 12;
  const hopeMax = view.limits?.hope ?? 6;
  const names = { ...(view.names ?? {}) };
  for (const m of state.members ?? []) names[m.id] ??= m.name;
  const gm = view.isGM;
  const pips = (/** @type {number} */ n, /** @type {number} */ max, /** @type {string} */ cls) =>
    Array.from({ length: max }, (_, i) => `<span class="tablerelay-pip ${cls}${i < n ? " on" : ""}"></span>`).join("");
  const hopeRows = Object.entries(state.hope ?? {})
    .sort(([a], [b]) => (names[a] ?? a).localeCompare(names[b] ?? b))
    .map(
      ([id, value]) => `<li class="tablerelay-hope" data-participant="${escapeHTML(id)}">
        <span class="tablerelay-name">${escapeHTML(names[id] ?? id)}</span>
        <span class="tablerelay-pips" aria-label="${value} Hope">${pips(value, hopeMax, "hope")}</span>
        <span class="tablerelay-value">${Number(value)}</span>
        ${gm ? `<button type="button" data-action="hope-spend" data-participant="${escapeHTML(id)}" title="Spend 1 Hope">−</button><button type="button" data-action="hope-gain" data-participant="${escapeHTML(id)}" title="Give 1 Hope">+</button>` : ""}
      </li>`,
    )
    .join("");
  return `<section class="tablerelay-panel" data-status="${escapeHTML(view.status)}">
  <header><span class="tablerelay-status" title="relay: ${escapeHTML(view.status)}"></span> tablerelay <small>${escapeHTML(STATUS_WORDS[view.status] ?? view.status)}</small></header>
  <div class="tablerelay-fear">
    <span class="tablerelay-name">Fear</span>
    <span class="tablerelay-pips" aria-label="${Number(state.fear)} Fear">${pips(state.fear, fearMax, "fear")}</span>
    <span class="tablerelay-value">${Number(state.fear)}</span>
    ${gm ? `<button type="button" data-action="fear-spend" title="Spend 1 Fear">−</button><button type="button" data-action="fear-gain" title="Gain 1 Fear">+</button>` : ""}
  </div>
  <ul class="tablerelay-hopes">${hopeRows}</ul>
</section>`;
}

/** @type {Record<string, string>} */
const STATUS_WORDS = {
  open: "connected",
  connecting: "connecting…",
  reconnecting: "reconnecting…",
  closed: "offline",
  idle: "not set up",
};

/**
 * The connection form (Settings → tablerelay → Connection). Tokens are password fields: they are never
 * shown on screen, and they are stored in this browser only.
 * @param {{ relayUrl: string, hasToken: boolean, isGM: boolean, status: string, participant?: string|null }} values
 */
export function connectionFormHTML(values) {
  const role = values.isGM ? "the GM token from `tablerelay room create`" : "your player token or the table's player invite";
  return `<div class="tablerelay-form">
  <p class="hint">The relay rolls every die of this table. The address is the same for the whole world; the token is
  stored in this browser only and is never shown to anyone.</p>
  <div class="form-group">
    <label for="tablerelay-url">Relay address</label>
    <input id="tablerelay-url" type="text" name="relayUrl" value="${escapeHTML(values.relayUrl)}" placeholder="wss://relay.example.org/ws" ${values.isGM ? "" : "disabled"}>
    <p class="hint">Set by the GM for the world.</p>
  </div>
  <div class="form-group">
    <label for="tablerelay-token">Token</label>
    <input id="tablerelay-token" type="password" name="token" value="" autocomplete="off" placeholder="${values.hasToken ? "•••••••• (saved; paste a new one to replace it)" : "paste it here"}">
    <p class="hint">Paste ${escapeHTML(role)}.</p>
  </div>
  <p class="tablerelay-form-status">Status: <strong>${escapeHTML(STATUS_WORDS[values.status] ?? values.status)}</strong>${values.participant ? ` as participant <code>${escapeHTML(values.participant)}</code>` : ""}</p>
  <footer class="form-footer">
    <button type="submit" name="save"><i class="fa-solid fa-plug"></i> Save and connect</button>
    ${values.hasToken ? `<button type="submit" name="forget" value="1"><i class="fa-solid fa-eraser"></i> Forget the token</button>` : ""}
  </footer>
</div>`;
}
