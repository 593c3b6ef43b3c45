"""Campaign management on /table in headless Chromium: the player's "this is me" link and the GM's panel.

A player opens the invite, copies their personal link into a second browser context (another device, as
far as the server can tell) and is the same participant there. The GM renames, merges, removes, replaces
the invite links, downloads the export (which ``tablerelay verify`` accepts) and archives the room.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.relay_process import Relay
from tests.browser.test_table import wait_for_event
from tests.console import tablerelay_bin

pytestmark = pytest.mark.slow


def joined(page: Page, relay: Relay, token: str, name: str | None = None) -> None:
    page.goto(f"{relay.http_url}/table#{token}")
    if name is not None:
        page.locator("#name").fill(name)
        page.locator("#join-button").click()
    expect(page.locator("#status")).to_have_text("Live", timeout=10_000)


def test_this_is_me_link_makes_a_second_device_the_same_player(
    page: Page, browser: Browser, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    gm = wire(room["gm"], "Mercer")
    joined(page, relay, room["player"], "Aria")
    expect(page.locator("#me-panel")).to_be_visible()
    link = page.locator("#me-link").input_value()
    assert "#" in link
    assert room["player"] not in link, "the personal link is the player's own token, not the invite"
    me = page.evaluate("window.tablerelay.you")
    gm.resource("hope", "gain", 2, participant=me["id"])

    other = browser.new_context(viewport={"width": 1000, "height": 800})  # a second device: no shared storage
    try:
        phone = other.new_page()
        phone.goto(link)
        expect(phone.locator("#status")).to_have_text("Live", timeout=10_000)
        assert phone.evaluate("window.tablerelay.you") == me, "the same participant, same name"
        expect(phone.locator("#you")).to_contain_text("Aria")
        assert phone.evaluate("window.tablerelay.state.hope")[me["id"]] == 2, "the same Hope"
        expect(phone.locator("#join-form")).to_be_hidden()
        # Reloading the invite page keeps the stored identity too.
        page.reload()
        expect(page.locator("#status")).to_have_text("Live", timeout=10_000)
        assert page.evaluate("window.tablerelay.you.id") == me["id"]
    finally:
        other.close()


def test_gm_panel_renames_merges_removes_rotates_exports_and_archives(
    page: Page, relay: Relay, room: dict[str, str], wire: Any, tmp_path: Path
) -> None:
    aria = wire(room["player"], "Aria")
    stale = wire(room["player"], "Aria (phone)")
    bo = wire(room["player"], "Bo")
    watcher = wire(room["spectator"])
    page.on("dialog", lambda dialog: dialog.accept())
    joined(page, relay, room["gm"])
    panel = page.locator("#campaign")
    expect(panel).to_be_visible()
    rows = panel.locator(".roster-row")
    expect(rows).to_have_count(4)  # the GM and three players; spectators are not listed

    # Rename Bo.
    bo_row = panel.locator(f'[data-participant="{bo.welcome["you"]["id"]}"]')
    bo_row.locator(".rename-field").fill("Bohdan")
    bo_row.locator('[data-action="rename"]').click()
    renamed = wait_for_event(watcher, lambda e: e["kind"] == "rename")
    assert renamed["member"]["name"] == "Bohdan"
    assert renamed["was"] == "Bo"
    expect(page.locator("#feed")).to_contain_text("renamed")

    # Merge the stale Aria into Aria.
    aria_id, stale_id = aria.welcome["you"]["id"], stale.welcome["you"]["id"]
    stale_row = panel.locator(f'[data-participant="{stale_id}"]')
    stale_row.locator("select").select_option(aria_id)
    stale_row.locator('[data-action="merge"]').click()
    merged = wait_for_event(watcher, lambda e: e["kind"] == "merge")
    assert merged["merged"]["id"] == stale_id
    assert merged["into"]["id"] == aria_id
    expect(panel.locator(f'[data-participant="{stale_id}"]')).to_have_count(0)

    # Remove Bohdan.
    panel.locator(f'[data-participant="{bo.welcome["you"]["id"]}"] [data-action="kick"]').click()
    kicked = wait_for_event(watcher, lambda e: e["kind"] == "kick")
    assert kicked["member"]["id"] == bo.welcome["you"]["id"]
    expect(panel.locator(f'[data-participant="{bo.welcome["you"]["id"]}"]')).to_have_class(
        "roster-row removed"
    )

    # Replace the invite links: the page shows new ones, and the old invite is refused.
    page.locator("#rotate-invites").click()
    expect(page.locator("#invite-player")).to_be_visible()
    new_player = page.locator("#invite-player").input_value()
    assert new_player.split("#", 1)[1] != room["player"]
    wait_for_event(watcher, lambda e: e["kind"] == "invites")
    with pytest.raises(Exception, match="4003"):
        wire(room["player"], "Latecomer")

    # Download the export; it verifies offline.
    with page.expect_download() as download_info:
        page.locator("#export-room").click()
    export = tmp_path / "room.jsonl"
    download_info.value.save_as(export)
    lines = export.read_text().splitlines()
    assert len(lines) > 5
    assert json.loads(lines[0])["seq"] == json.loads(lines[-1])["seq"], "the header names the last seq"
    checked = subprocess.run(
        [tablerelay_bin(), "verify", str(export)], capture_output=True, text=True, timeout=60, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "verify" in checked.stdout
    assert '"kind":"merge"' in export.read_text()

    # Archive: read-only from now on.
    page.locator("#archive-room").click()
    wait_for_event(watcher, lambda e: e["kind"] == "archive")
    expect(page.locator("#archived-note")).to_contain_text("archived")
    expect(page.locator("#roll-button")).to_be_disabled()
    expect(page.locator("#rotate-invites")).to_be_disabled()
    expect(page.locator("#export-room")).to_be_enabled()
    expect(page.locator("#trackers button")).to_have_count(0)  # no Fear or Hope controls on a read-only room
    expect(panel.locator(".roster-row.here")).to_have_count(0)
    aria.send(
        {
            "t": "roll",
            "id": "after-archive",
            "intent": {"system": "dice", "formula": "1d6"},
            "visibility": "public",
        }
    )
    while (answer := aria.recv())["t"] != "error":
        assert answer["t"] == "event", answer
    assert answer["code"] == "archived"
    assert answer["id"] == "after-archive"
