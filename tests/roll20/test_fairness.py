"""Fair dice in the Roll20 bridge, in Chromium with the built userscript against a real relay rolling them
(``TABLERELAY_FAIR_DICE=true``, spec/fairness.md): the overlay lists each linked roll's verdict with an SVG
icon and its explanation (hover and tap), the badge turns at the GM's seed reveal, the page the chat line
links to shows the verdict too, and an alarm (a relay that lies to this one browser about the seed it
reveals) raises the overlay's red banner.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from playwright.sync_api import WebSocketRoute, expect

from tests.browser.relay_process import Relay, WireClient, running_relay
from tests.roll20.conftest import Table, settings_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fair_relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relay]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    env["TABLERELAY_FAIR_DICE"] = "true"
    with running_relay(Path(tmp_path_factory.mktemp("roll20-fair")), env=env) as server:
        yield server


def reveal_seed(relay: Relay, gm_token: str) -> None:
    """The GM's seed frame, as any client sends it: ``{"t": "seed", "id", "op": "reveal"}``."""
    gm = WireClient(relay.ws_url, gm_token, "GM")
    try:
        event = gm.request({"t": "seed", "op": "reveal"})
        assert event["kind"] == "seed_reveal", event
    finally:
        gm.close()


@pytest.mark.parametrize("table", ["extension", "userscript"], indirect=True)
def test_the_overlay_shows_each_linked_rolls_verdict_and_its_link_opens_a_page_that_shows_it(
    table: Table, fair_relay: Relay
) -> None:
    room = fair_relay.create_room("Roll20 fair dice")
    ana = table.join("Ana", settings=settings_for(fair_relay, room["player"]))
    page = ana.page
    assert page is not None
    expect(ana.badge()).to_have_text("connected", timeout=10_000)
    ana.type_in_chat("!tr 1d20+2 -- Stealth")
    row = page.locator("#tablerelay-overlay .fair li").first
    expect(row).to_have_attribute("data-verdict", "awaiting seed", timeout=10_000)
    expect(row.locator(".what")).to_contain_text("Stealth")
    badge = row.locator(".fair-badge")
    # An icon drawn in SVG, and a word: no glyph stands for the icon.
    expect(badge.locator("svg.fair-icon circle")).to_have_count(1)  # the clock: a circle and its hands
    expect(badge.locator("svg.fair-icon path")).to_have_count(1)
    expect(badge).to_have_text("Awaiting seed")
    title = badge.get_attribute("title") or ""
    assert title.startswith("Awaiting seed: the server committed to dice seed 1"), title
    # A tap opens the explanation below the roll (no hover on a phone); it stays open when the verdict turns.
    note = row.locator(".fair-note")
    expect(note).to_be_hidden()
    badge.click()
    expect(note).to_be_visible()
    expect(badge).to_have_attribute("aria-expanded", "true")

    reveal_seed(fair_relay, room["gm"])
    expect(row).to_have_attribute("data-verdict", "fair", timeout=10_000)
    expect(row.locator(".fair-badge")).to_have_text("Fair")
    expect(note).to_be_visible()
    expect(note).to_contain_text("Fair: recomputed in this browser from the server's dice seed 1")
    expect(page.locator("#tablerelay-overlay .alarm")).to_be_hidden()

    # The chat line links to the relay's page of the roll, which judges it in that browser too.
    line = next(text for text in ana.sent if "Stealth" in text)
    link = re.search(r"\]\((https?://[^)\s]+/events/[^)\s]+)\)", line)
    assert link, line
    viewer = ana.context.new_page()
    try:
        viewer.goto(link.group(1))
        viewer.locator("#token").fill(room["spectator"])
        viewer.locator("#token-form button[type=submit]").click()
        page_badge = viewer.locator(".fair-badge")
        expect(page_badge).to_have_attribute("data-verdict", "fair", timeout=10_000)
        expect(page_badge.locator("svg")).to_have_count(1)
    finally:
        viewer.close()


def flip_seed_reveals(ws: WebSocketRoute) -> None:
    """Pass the page's socket through to the relay, changing one byte of every seed the relay reveals."""
    server = ws.connect_to_server()
    ws.on_message(lambda message: server.send(message))

    def to_page(message: str | bytes) -> None:
        if isinstance(message, str):
            ws.send(message)
            return
        frame: dict[str, Any] = msgpack.unpackb(message, raw=False)
        frames = [frame, *frame.get("history", [])] if frame.get("t") == "welcome" else [frame]
        changed = False
        for f in frames:
            if f.get("kind") == "seed_reveal":
                f["seed"] = bytes([f["seed"][0] ^ 1]) + f["seed"][1:]
                changed = True
        ws.send(msgpack.packb(frame, use_bin_type=True) if changed else message)

    server.on_message(to_page)


# The userscript only: its socket is the page's own, which Playwright's route_web_socket is made for; the
# extension's content script runs the same bridge and overlay code (the first test runs both builds).
@pytest.mark.parametrize("table", ["userscript"], indirect=True)
def test_a_seed_reveal_that_does_not_match_its_commitment_raises_the_red_banner(
    table: Table, fair_relay: Relay
) -> None:
    room = fair_relay.create_room("Roll20 fair alarm")
    ana = table.join("Ana", settings=settings_for(fair_relay, room["player"]), open_page=False)
    ana.context.route_web_socket(re.compile(r"/ws$"), flip_seed_reveals)
    page = ana.open()
    # The JS client reports the alarm's failed signature too: that is what this test makes happen.
    ana.allowed.append("signature")
    expect(ana.badge()).to_have_text("connected", timeout=10_000)
    ana.type_in_chat("!tr 2d6")
    row = page.locator("#tablerelay-overlay .fair li").first
    expect(row).to_have_attribute("data-verdict", "awaiting seed", timeout=10_000)
    banner = page.locator("#tablerelay-overlay .alarm")
    expect(banner).to_be_hidden()

    reveal_seed(fair_relay, room["gm"])
    expect(row).to_have_attribute("data-verdict", "failed", timeout=10_000)
    expect(row.locator(".fair-badge")).to_have_text("Fairness failed")
    expect(banner).to_be_visible()
    expect(banner).to_have_attribute("role", "alert")
    expect(banner).to_contain_text("Fairness alarm")
    expect(banner).to_contain_text("seed 1 does not match what it committed to")
    expect(banner.locator("svg.fair-icon")).to_have_count(1)
    # Folding the panel keeps the banner in sight.
    page.locator("#tablerelay-overlay button.fold").click()
    expect(banner).to_be_visible()
