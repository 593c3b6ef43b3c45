"""The stream overlay (/watch?overlay=1) in headless Chromium, with its URL options: the last few rolls
large on a transparent background, Fear and Hope each optional. Each test leaves a transparent screenshot
in test-artifacts/browser/ (docs/images/watch-overlay-stream.png is made the same way by screenshots.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import ARTIFACTS
from tests.browser.relay_process import Relay
from tests.browser.test_table import wait_for_event

pytestmark = pytest.mark.slow


def open_overlay(page: Page, relay: Relay, token: str, query: str) -> None:
    page.set_viewport_size({"width": 560, "height": 1000})
    page.goto(f"{relay.http_url}/watch?{query}#{token}")
    page.wait_for_selector("#status[data-status=open]", state="attached", timeout=10_000)


def test_overlay_shows_the_last_rolls_large_without_fear(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    gm = wire(room["gm"], "Mercer")
    ana = wire(room["player"], "Ana")
    gm.resource("fear", "gain", 4)
    gm.resource("hope", "gain", 3, participant=ana.welcome["you"]["id"])
    open_overlay(page, relay, room["spectator"], "overlay=1&last=3&fear=0")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgba(0, 0, 0, 0)"
    expect(page.locator(".topbar")).to_be_hidden()
    seqs = [
        ana.roll({"system": "daggerheart.duality", "modifier": 2}, label=f"Leap {i}")["seq"] for i in range(4)
    ]
    gm.resource("fear", "spend", 1)
    last = gm.roll({"system": "drawsteel.power", "characteristic": 2}, label="Ogre smash")
    expect(page.locator(f'#feed > [data-seq="{last["seq"]}"]')).to_be_visible(timeout=3000)
    feed = page.locator("#feed > *")
    expect(feed).to_have_count(3)
    expect(page.locator("#feed .line")).to_have_count(0)  # resource lines stay in the trackers
    expect(page.locator(f'#feed > [data-seq="{seqs[0]}"]')).to_have_count(0)
    # The newest roll is the largest.
    sizes = page.evaluate(
        "[...document.querySelectorAll('#feed > article')].map(e => parseFloat(getComputedStyle(e).fontSize))"
    )
    assert sizes[0] > sizes[1] >= 18, sizes
    expect(page.locator(".tracker.fear")).to_be_hidden()
    expect(page.locator(".tracker.hope")).to_be_visible()
    expect(page.locator(".tracker.hope")).to_contain_text("Ana")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "overlay-last3-nofear.png"), omit_background=True)


def test_overlay_without_trackers_is_rolls_only(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    gm = wire(room["gm"], "Mercer")
    open_overlay(page, relay, room["spectator"], "overlay=1&last=2&fear=0&hope=0")
    hidden = gm.roll({"system": "dice", "formula": "1d20"}, "gm", "Secret")
    shown = gm.roll({"system": "dice", "formula": "2d6"}, label="Open")
    expect(page.locator(f'#feed > [data-seq="{shown["seq"]}"]')).to_be_visible(timeout=3000)
    expect(page.locator(".side")).to_be_hidden()
    expect(page.locator("#feed > *")).to_have_count(2)
    # A sealed roll stays sealed in the overlay: no label, no dice.
    sealed = page.locator(f'#feed > [data-seq="{hidden["seq"]}"]')
    expect(sealed).not_to_contain_text("Secret")
    gm.reveal(hidden["seq"])
    wait_for_event(gm, lambda e: e["kind"] == "reveal")
    expect(page.locator("#feed")).to_contain_text("Secret", timeout=3000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "overlay-rolls-only.png"), omit_background=True)
