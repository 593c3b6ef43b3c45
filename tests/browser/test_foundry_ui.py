"""The Foundry module's UI in Chromium: the Fear and Hope panel, a sealed card, marks, the connection form.

No Foundry runs here, so the page is a plain one with the module's stylesheet and its UI module
(``clients/foundry/scripts/ui.mjs``, the functions the module renders with) fed by real relay events.
It checks what a GM and a player see and leaves a screenshot in test-artifacts/ (docs/images/foundry-ui.png
is one of these).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Page

from tests.browser.conftest import ARTIFACTS
from tests.browser.relay_process import ROOT, WireClient

FOUNDRY = ROOT / "clients" / "foundry"
SHOT = ARTIFACTS / "foundry-ui.png"

PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>{css}
body {{ background: #2b2a33; color: #ddd; font-family: sans-serif; margin: 0; }}
.stage {{ display: grid; grid-template-columns: 300px 340px 520px; gap: 20px; padding: 20px;
  align-items: start; }}
.chat {{ background: #e8e4da; color: #191813; border-radius: 4px; padding: 8px; font-size: 13px; }}
.chat .msg {{ border: 1px solid #a49c8a; border-radius: 3px; padding: 6px; margin-bottom: 8px;
  background: #f0ede4; }}
.dialog {{ background: #e8e4da; color: #191813; padding: 10px 14px; border-radius: 4px; }}
h3 {{ margin: 0 0 6px; font-size: 13px; color: #ccc; }}
</style></head><body><div class="stage">
<div><h3>GM's panel</h3><div id="gm-panel"></div><h3 style="margin-top:14px">A player's panel</h3>
<div id="player-panel"></div></div>
<div><h3>Chat, as a player sees it</h3><div class="chat" id="chat"></div></div>
<div><h3>Settings → tablerelay → Connection</h3><div class="dialog" id="form"></div></div>
</div></body></html>"""


def english() -> dict[str, str]:
    """lang/en.json's strings by their dotted keys, as Foundry's game.i18n finds them."""

    def flat(tree: dict[str, Any], prefix: str = "") -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in tree.items():
            if isinstance(value, dict):
                out.update(flat(value, f"{prefix}{key}."))
            else:
                out[f"{prefix}{key}"] = value
        return out

    return flat(json.loads((FOUNDRY / "lang" / "en.json").read_text()))


#: A Localizer over en.json for a page with no Foundry: ui.mjs takes its words from one.
LOCALIZER = """
const EN = {strings};
window.tablerelayI18n = {{
  localize: (key) => EN[key] ?? key,
  format: (key, data = {{}}) => (EN[key] ?? key).replace(/{{[^}}]+}}/g, (m) => data[m.slice(1, -1)]),
}};
"""


def wait_event(client: WireClient, seq: int) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for event in client.events:
            if event["seq"] == seq:
                return event
        client.recv(1.0)
    raise AssertionError(f"event {seq} never arrived")


def test_panel_sealed_card_marks_and_form(page: Page, room: dict[str, str], wire: Any) -> None:
    gm = wire(room["gm"], "Mercer")
    ana = wire(room["player"], "Ana")
    bo = wire(room["player"], "Bo")
    gm.resource("fear", "gain", 4)
    gm.resource("hope", "gain", 3, participant=ana.welcome["you"]["id"])
    gm.resource("hope", "gain", 5, participant=bo.welcome["you"]["id"])
    marker = f"Ambush-{time.time_ns()}"
    hidden = gm.roll({"system": "daggerheart.attack", "modifier": 4}, "gm", marker)
    sealed = wait_event(ana, hidden["seq"])
    assert sealed["sealed"] is True
    # The state after these events, as a module's client would hold it: from a fresh welcome.
    fresh = wire(room["spectator"], "Watcher")
    welcome = fresh.welcome

    page.set_content(PAGE.format(css=(FOUNDRY / "styles" / "tablerelay.css").read_text()))
    page.add_script_tag(
        content=(FOUNDRY / "scripts" / "ui.mjs").read_text()
        + LOCALIZER.format(strings=json.dumps(english()))
        + "\nwindow.tablerelayUI = { panelHTML, sealedCardHTML, markHTML, connectionFormHTML };",
        type="module",
    )
    page.wait_for_function("window.tablerelayUI !== undefined")
    page.evaluate(
        """([state, sealed, limits]) => {
          const ui = window.tablerelayUI;
          const i18n = window.tablerelayI18n;
          document.getElementById("gm-panel").innerHTML =
            ui.panelHTML(state, { isGM: true, status: "open", limits }, i18n);
          document.getElementById("player-panel").innerHTML =
            ui.panelHTML(state, { isGM: false, status: "reconnecting", limits }, i18n);
          const shown = { showVerified: true };
          const msg = (who, text, verdict, flags) =>
            `<div class="msg"><b>${who}</b>: ${text}${ui.markHTML(verdict, flags, shown, i18n)}</div>`;
          document.getElementById("chat").innerHTML = [
            `<div class="msg">${ui.sealedCardHTML(sealed, i18n)}</div>`,
            msg("Ana", "2d20kh + 3 = 21", { state: "verified", seqs: [12] }, { via: true, seq: 12 }),
            msg("Bo", "1d20 = 7", { state: "not-relay", reason: "the relay is not connected" },
              { via: false }),
            msg("Mercer", "revealed 17", { state: "verified", seqs: [9] },
              { via: true, seq: 9, revealed: 14 }),
            msg("Bo", "1d20 = 20", { state: "failed", seqs: [15], reason: { key: "TABLERELAY.Check.Die",
              data: { faces: "20", value: "20" } } }, { via: true, seq: 15 }),
          ].join("");
          document.getElementById("form").innerHTML = ui.connectionFormHTML({
            relayUrl: "wss://dice.example.org/ws", hasToken: true, isGM: true, status: "open",
            participant: "gm-3f2a91",
          }, i18n);
        }""",
        [welcome["state"], sealed, welcome["limits"]],
    )

    gm_panel = page.locator("#gm-panel .tablerelay-panel")
    assert gm_panel.locator(".tablerelay-fear .tablerelay-value").inner_text() == "4"
    assert gm_panel.locator(".tablerelay-pip.fear.on").count() == 4
    assert gm_panel.locator(".tablerelay-pip.fear").count() == welcome["limits"]["fear"]
    assert gm_panel.locator("button[data-action='fear-gain']").count() == 1
    assert gm_panel.locator("button[data-action='hope-gain']").count() == 2
    assert sorted(gm_panel.locator(".tablerelay-hope .tablerelay-value").all_inner_texts()) == ["3", "5"]
    player_panel = page.locator("#player-panel .tablerelay-panel")
    assert player_panel.locator("button").count() == 0, "players get no Fear or Hope buttons"
    assert player_panel.get_attribute("data-status") == "reconnecting"
    assert "reconnecting" in player_panel.locator("header").inner_text()

    card = page.locator("#chat .tablerelay-sealed")
    assert "Sealed roll" in card.inner_text()
    assert "Mercer" in card.inner_text()
    assert sealed["commitment"][:16] in card.inner_text()
    chat_text = page.locator("#chat").inner_text()
    assert marker not in chat_text, "the sealed card shows no label"
    assert "not via relay" in chat_text
    assert "matches its seal" in chat_text
    assert "signed ✓ #12" in chat_text
    assert "do not trust this roll: it shows a d20 of 20 that the relay did not roll #15" in chat_text
    assert "TABLERELAY." not in chat_text

    token = page.locator("#form input[name='token']")
    assert token.get_attribute("type") == "password"
    assert token.input_value() == "", "the saved token is never put on the page"
    assert page.locator("#form input[name='relayUrl']").input_value() == "wss://dice.example.org/ws"

    SHOT.parent.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1240, "height": 560})
    page.screenshot(path=str(SHOT), animations="disabled")
    assert Path(SHOT).stat().st_size > 10_000
