"""Pages given several relay addresses (``?servers=``, a cluster's nodes): each reconnect tries the next."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PageProblems
from tests.browser.relay_process import Relay

pytestmark = pytest.mark.slow

#: Nothing listens on the discard port here: a node that is down.
DOWN = "ws://127.0.0.1:9/ws"


@pytest.mark.parametrize("page_name", ["watch", "table"])
def test_a_page_passes_over_a_node_that_is_down(
    page: Page, page_problems: PageProblems, relay: Relay, room: dict[str, str], wire: Any, page_name: str
) -> None:
    page_problems.allowed.append(DOWN)  # Chromium reports the refused connection on the console
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    token = room["spectator"] if page_name == "watch" else room["player"]
    query = f"?servers={DOWN},{relay.ws_url}" + ("&name=Ana" if page_name == "table" else "")
    page.goto(f"{relay.http_url}/{page_name}{query}#{token}")
    expect(page.locator("#status")).to_have_text("Live", timeout=15_000)
    assert sockets[0] == DOWN, sockets
    assert sockets[-1] == relay.ws_url, sockets
    gm = wire(room["gm"], "Mercer")
    event = gm.roll({"system": "daggerheart.duality", "modifier": 1}, label="Across the nodes")
    expect(page.locator(f'#feed > article[data-seq="{event["seq"]}"]')).to_be_visible(timeout=5000)
