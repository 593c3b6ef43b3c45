"""/events/ROOM/SEQ: the page the Roll20 bridge's verification marks link to.

It shows one event as the viewer's own session (or a pasted token) may see it, with the signature checked
in the browser: a hidden roll stays sealed for a spectator, and nothing works without a token for the room.
"""

from __future__ import annotations

import time
from typing import Any

from playwright.sync_api import Page, expect

from tests.browser.conftest import PageProblems
from tests.browser.relay_process import Relay


def test_a_browser_that_joined_the_table_sees_the_event_checked(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    ana = wire(room["player"], "Ana")
    event = ana.roll({"system": "dice", "formula": "3d6+2"}, label="Climb the wall")
    # Joining /watch once leaves a session for the room in this browser, as any visit to the pages does.
    page.goto(f"{relay.http_url}/watch#{room['spectator']}")
    expect(page.locator("#status")).to_have_text("Live", timeout=10_000)
    page.goto(f"{relay.http_url}/events/{room['room']}/{event['seq']}")
    expect(page.locator("#verdict")).to_contain_text("Signed by this relay", timeout=10_000)
    expect(page.locator("#verdict")).to_have_attribute("data-kind", "good")
    entry = page.locator(f'#feed > article[data-seq="{event["seq"]}"]')
    expect(entry).to_contain_text("Climb the wall")
    expect(entry).to_contain_text(str(event["result"]["total"]))
    expect(page.locator("#token-form")).to_be_hidden()


def test_without_a_session_it_asks_for_a_token_and_keeps_hidden_rolls_sealed(
    page: Page, relay: Relay, room: dict[str, str], wire: Any, page_problems: PageProblems
) -> None:
    gm = wire(room["gm"], "Mercer")
    marker = f"Ambush-{time.time_ns()}"
    hidden = gm.roll({"system": "dice", "formula": "1d20"}, "gm", marker)
    page.goto(f"{relay.http_url}/events/{room['room']}/{hidden['seq']}")
    expect(page.locator("#token-form")).to_be_visible(timeout=10_000)
    expect(page.locator("#feed article")).to_have_count(0)
    page.locator("#token").fill(room["spectator"])
    page.locator("#token-form button").click()
    expect(page.locator("#verdict")).to_contain_text("Signed by this relay", timeout=10_000)
    entry = page.locator(f'#feed > article[data-seq="{hidden["seq"]}"]')
    expect(entry).to_contain_text("Sealed roll")
    assert marker not in page.content(), "a spectator's view of a hidden roll shows nothing of it"
    # A path that names no event is not this page.
    page_problems.allowed.append("status of 404")
    response = page.goto(f"{relay.http_url}/events/{room['room']}/not-a-seq")
    assert response is not None
    assert response.status == 404
