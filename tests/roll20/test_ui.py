"""The bridge's own UI: the extension's popup, the userscript's settings dialog, the status badge, and the
Fear and Hope overlay whose buttons go through the relay.

Screenshots land in test-artifacts/roll20/; ``python -m tests.roll20.screenshots`` writes the ones the docs
show into docs/images/ instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.relay_process import ROOT, Relay, WireClient
from tests.roll20.conftest import ARTIFACTS, Table, has_tag, tag_of

pytestmark = pytest.mark.slow


def shots_dir() -> Path:
    target = Path(os.environ.get("TABLERELAY_ROLL20_SHOTS", str(ARTIFACTS)))
    target = target if target.is_absolute() else ROOT / target
    target.mkdir(parents=True, exist_ok=True)
    return target


def next_resource(client: WireClient, name: str) -> dict[str, Any]:
    while True:
        event = client.expect("event")
        if event.get("kind") == "resource" and event.get("name") == name:
            return event


@pytest.mark.parametrize("table", ["extension"], indirect=True)
def test_the_popup_connects_and_the_gm_moves_fear_and_hope_through_the_relay(
    table: Table, relay: Relay, room: dict[str, str], wire: Callable[..., WireClient]
) -> None:
    gwen = table.join("Gwen", gm=True, open_page=False)
    # The popup: an extension page, with the form and the status.
    popup: Page = gwen.context.new_page()
    popup.set_viewport_size({"width": 340, "height": 470})
    popup.goto(f"chrome-extension://{gwen.extension_id}/popup.html")
    expect(popup.locator("#tr-status")).to_have_text("off")
    popup.locator("#tr-relay").fill("https://not-a-websocket.example")
    popup.locator("#tr-token").fill(room["gm"])
    popup.locator("#tr-save").click()
    expect(popup.locator("#tr-problem")).to_contain_text("wss://")
    popup.locator("#tr-relay").fill(relay.ws_url)
    popup.locator("#tr-post-all").check()
    popup.locator("#tr-save").click()
    expect(popup.locator("#tr-problem")).to_have_text("")
    gwen.open()
    expect(gwen.badge()).to_have_text("connected", timeout=10_000)
    expect(popup.locator("#tr-status")).to_have_text("connected")
    # The toolbar button's badge of the Roll20 tab says so too (the background script paints it).
    assert gwen.extension_eval is not None
    badges = gwen.extension_eval(
        """async () => {
          const tabs = await chrome.tabs.query({});
          return Promise.all(tabs.map((t) => chrome.action.getBadgeText({ tabId: t.id })));
        }""",
        None,
    )
    assert badges.count("on") == 1, badges
    popup.locator("#tr-token").fill("")  # the screenshot shows an empty field rather than a real token
    popup.locator("form.tr-settings").screenshot(path=str(shots_dir() / "roll20-popup.png"))

    page = gwen.page
    assert page is not None
    watcher = wire(room["gm"], "Gwen's table")
    ana = wire(room["player"], "Ana")
    fear = page.locator('#tablerelay-overlay .row[data-resource="fear"]')
    expect(fear.locator(".value")).to_have_text("0 / 12")
    fear.locator('button[data-op="gain"]').click()
    assert next_resource(watcher, "fear")["value"] == 1
    fear.locator('button[data-op="gain"]').click()
    assert next_resource(watcher, "fear")["value"] == 2
    fear.locator('button[data-op="spend"]').click()
    assert next_resource(watcher, "fear")["value"] == 1
    expect(fear.locator(".value")).to_have_text("1 / 12")
    hope = page.locator(f'#tablerelay-overlay .row[data-participant="{ana.welcome["you"]["id"]}"]')
    expect(hope).to_contain_text("Hope · Ana")
    hope.locator('button[data-op="gain"]').click()
    gained = next_resource(watcher, "hope")
    assert (gained["participant"], gained["value"]) == (ana.welcome["you"]["id"], 1)
    expect(hope.locator(".value")).to_have_text("1 / 6")
    # Fear from someone else's client shows too, and spending below zero says why.
    watcher.resource("fear", "set", 0)
    expect(fear.locator(".value")).to_have_text("0 / 12")
    fear.locator('button[data-op="spend"]').click()
    expect(page.locator("#tablerelay-overlay .message.error")).to_contain_text("Fear")

    # A roll in the chat beside the overlay, for the picture; the token is nowhere in the page.
    event = ana.roll(
        {"system": "daggerheart.duality", "modifier": 2, "difficulty": 14}, label="Leap the chasm"
    )
    assert len(gwen.wait_shown(has_tag(tag_of(room, event["epoch"], event["seq"])))) == 1
    watcher.resource("fear", "set", 4)  # set: the duality roll may have added one
    expect(fear.locator(".value")).to_have_text("4 / 12")
    assert room["gm"] not in page.content()
    assert page.evaluate("Object.keys(localStorage).length + Object.keys(sessionStorage).length") == 0
    page.screenshot(path=str(shots_dir() / "roll20-overlay.png"))


@pytest.mark.parametrize("table", ["userscript"], indirect=True)
def test_the_userscript_dialog_connects_and_a_player_spends_hope(
    table: Table, relay: Relay, room: dict[str, str], wire: Callable[..., WireClient]
) -> None:
    ana = table.join("Ana")
    expect(ana.badge()).to_have_text("off", timeout=10_000)
    page = ana.page
    assert page is not None
    # Without settings a command is still kept out of Roll20, and says what to do.
    ana.type_in_chat("!tr 1d20")
    expect(page.locator("#tablerelay-overlay .message.error").last).to_contain_text("not connected")
    assert ana.sent == []
    page.locator("#tablerelay-overlay button.settings").click()
    page.locator("#tablerelay-overlay #tr-relay").fill(relay.ws_url)
    page.locator("#tablerelay-overlay #tr-token").fill(room["player"])
    page.locator("#tablerelay-overlay #tr-save").click()
    expect(ana.badge()).to_have_text("connected", timeout=10_000)
    expect(page.locator("#tablerelay-overlay dialog")).to_have_count(0)
    stored = ana.read_storage()
    assert stored["settings"]["token"] == room["player"]
    gm = wire(room["gm"], "Gwen")
    gm.resource("hope", "gain", 2, participant=next(iter(gm.welcome["state"]["hope"])))
    spend = page.locator('#tablerelay-overlay .row.hope button[data-op="spend"]')
    expect(page.locator("#tablerelay-overlay .row.hope .value")).to_have_text("2 / 6")
    spend.click()
    assert next_resource(gm, "hope")["value"] == 1
    expect(page.locator("#tablerelay-overlay .row.hope .value")).to_have_text("1 / 6")
    # A player has no Fear buttons.
    expect(page.locator('#tablerelay-overlay .row[data-resource="fear"] button')).to_have_count(0)


@pytest.mark.parametrize("table", ["userscript"], indirect=True)
def test_a_refused_token_shows_an_error_badge_and_sends_nothing(
    table: Table, relay: Relay, room: dict[str, str]
) -> None:
    forged = room["player"][:-4] + ("AAAA" if not room["player"].endswith("AAAA") else "BBBB")
    ana = table.join("Ana", settings={"relayUrl": relay.ws_url, "token": forged, "post": "mine"})
    ana.allowed.append("WebSocket connection to")
    expect(ana.badge()).to_have_text("error", timeout=10_000)
    page = ana.page
    assert page is not None
    expect(page.locator("#tablerelay-overlay .message.error").first).to_be_visible()
    ana.type_in_chat("!tr 1d6")
    table.wait(0.3)
    assert ana.sent == []
