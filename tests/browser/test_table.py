"""The GM/player page (/table) in headless Chromium: the roll form, reveals, Fear and Hope controls."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.relay_process import Relay, WireClient

pytestmark = pytest.mark.slow


def open_table(page: Page, relay: Relay, token: str, name: str | None = None) -> None:
    query = f"?name={name}" if name else ""
    page.goto(f"{relay.http_url}/table{query}#{token}")
    if name:
        expect(page.locator("#status")).to_have_text("Live", timeout=10_000)


def cards(page: Page):  # type: ignore[no-untyped-def]
    return page.locator("#feed > article")


def wait_for_event(client: WireClient, check: Any, timeout: float = 5.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        for event in client.events:
            if check(event):
                return event
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no matching event; saw {client.events}")
        client.recv(left)


def test_first_visit_asks_for_a_name_then_rolls_through_the_form(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    gm = wire(room["gm"], "Mercer")
    page.goto(f"{relay.http_url}/table#{room['player']}")
    expect(page.locator("#join-form")).to_be_visible()
    expect(page.locator("#roll-form")).to_be_hidden()
    page.locator("#name").fill("Ana")
    page.locator("#join-button").click()
    expect(page.locator("#status")).to_have_text("Live", timeout=10_000)
    expect(page.locator("#you")).to_contain_text("Ana")

    page.select_option("#system", "nexus.test")
    page.select_option("#f-attribute_die", "d10")
    page.locator("#f-skill_rank").fill("2")
    page.select_option("#f-difficulty", "hard")
    page.locator("#label").fill("Climb the tower")
    page.locator("#roll-button").click()

    event = wait_for_event(gm, lambda e: e.get("label") == "Climb the tower")
    assert event["intent"] == {
        "system": "nexus.test",
        "attribute_die": "d10",
        "skill_rank": 2,
        "difficulty": "hard",
    }
    assert event["actor"]["name"] == "Ana"
    entry = page.locator(f'#feed > article[data-seq="{event["seq"]}"]')
    expect(entry).to_contain_text("Climb the tower", timeout=2000)
    expect(entry).to_contain_text(str(event["result"]["total"]))
    expect(page.locator("#label")).to_have_value("")

    # A reload rejoins as the same participant, without asking again.
    ana_id = event["actor"]["id"]
    page.reload()
    expect(page.locator("#status")).to_have_text("Live", timeout=10_000)
    expect(page.locator("#join-form")).to_be_hidden()
    assert page.evaluate("window.tablerelay.you.id") == ana_id


def test_every_systems_form_makes_an_intent_the_server_accepts(
    page: Page, relay: Relay, room: dict[str, str]
) -> None:
    open_table(page, relay, room["gm"], "Mercer")
    systems = page.eval_on_selector_all("#system option", "options => options.map(o => o.value)")
    assert len(systems) == 10
    for n, system in enumerate(systems, 1):
        page.select_option("#system", system)
        page.locator("#label").fill(f"form {system}")
        page.locator("#roll-button").click()
        expect(cards(page)).to_have_count(n, timeout=3000)
        expect(page.locator("#form-error")).to_have_text("")
        expect(cards(page).first).to_contain_text(f"form {system}")
        expect(cards(page).first.locator(".headline")).to_be_visible()
        time.sleep(0.06)  # stay under the per-connection rate limit


def test_a_refused_intent_shows_the_servers_sentence(page: Page, relay: Relay, room: dict[str, str]) -> None:
    open_table(page, relay, room["player"], "Ana")
    page.select_option("#system", "dice")
    page.locator("#f-formula").fill("2d")
    page.locator("#roll-button").click()
    expect(page.locator("#form-error")).not_to_be_empty(timeout=3000)
    assert "formula" in (page.locator("#form-error").text_content() or "").lower()
    page.select_option("#system", "nexus.test")
    page.select_option("#f-skill_type", "magic")
    page.locator("#f-trained").uncheck()
    page.locator("#roll-button").click()
    expect(page.locator("#form-error")).to_contain_text("magic", timeout=3000)
    expect(cards(page)).to_have_count(0)


def test_the_gm_reveals_a_players_gm_roll(page: Page, relay: Relay, room: dict[str, str], wire: Any) -> None:
    open_table(page, relay, room["gm"], "Mercer")
    ana = wire(room["player"], "Ana")
    spectator = wire(room["spectator"], "Viewer")
    hidden = ana.roll({"system": "daggerheart.duality", "modifier": 1}, "gm", "Lie to the duke")
    entry = page.locator(f'#feed > article[data-seq="{hidden["seq"]}"]')
    expect(entry).to_contain_text("Lie to the duke", timeout=2000)
    expect(entry.locator(".chip.hidden-roll")).to_have_text("GM roll")
    entry.get_by_role("button", name=f"Reveal roll {hidden['seq']} to everyone").click()
    reveal = wait_for_event(spectator, lambda e: e["kind"] == "reveal")
    assert reveal["of"] == hidden["seq"]
    opened = page.locator(f'#feed > article[data-seq="{reveal["seq"]}"]')
    expect(opened.locator(".chip.verified")).to_be_visible(timeout=2000)
    expect(page.get_by_role("button", name=f"Reveal roll {hidden['seq']} to everyone")).to_have_count(0)


def test_a_player_reveals_only_its_own_hidden_rolls(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    bo = wire(room["player"], "Bo")
    open_table(page, relay, room["player"], "Ana")
    others = bo.roll({"system": "dice", "formula": "1d20"}, "gm", "Bo's secret")
    theirs = page.locator(f'#feed > article[data-seq="{others["seq"]}"]')
    expect(theirs).to_contain_text("Sealed roll", timeout=2000)
    # Its fair-dice badge is a button (its explanation on a tap); a reveal button is not there.
    expect(theirs.get_by_role("button", name=re.compile("Reveal roll"))).to_have_count(0)

    page.select_option("#system", "dice")
    page.locator("#label").fill("My secret")
    page.locator('input[name="visibility"][value="self"]').check()
    page.locator("#roll-button").click()
    mine = cards(page).filter(has_text="My secret")
    expect(mine.locator(".chip.hidden-roll")).to_have_text("Self roll", timeout=3000)
    seq = int(mine.get_attribute("data-seq") or 0)
    sealed_for_bo = wait_for_event(bo, lambda e: e["seq"] == seq)
    assert sealed_for_bo["sealed"] is True
    mine.get_by_role("button", name=f"Reveal roll {seq} to everyone").click()
    reveal = wait_for_event(bo, lambda e: e["kind"] == "reveal" and e["of"] == seq)
    assert reveal["actor"]["name"] == "Ana"
    expect(page.locator("#feed > article.reveal")).to_have_count(1, timeout=2000)


def test_the_gm_moves_fear_and_hope_with_the_buttons(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    ana = wire(room["player"], "Ana")
    spectator = wire(room["spectator"], "Viewer")
    open_table(page, relay, room["gm"], "Mercer")
    page.get_by_role("button", name="Gain 1 Fear").click()
    page.get_by_role("button", name="Gain 1 Fear").click()
    fear = wait_for_event(
        spectator, lambda e: e["kind"] == "resource" and e["name"] == "fear" and e["value"] == 2
    )
    assert fear["delta"] == 1
    expect(page.locator('[data-tracker="fear"] [role="meter"]')).to_have_attribute("aria-valuenow", "2")
    page.get_by_role("button", name="Spend 1 Fear").click()
    wait_for_event(spectator, lambda e: e["kind"] == "resource" and e["name"] == "fear" and e["value"] == 1)
    ana_id = ana.welcome["you"]["id"]
    page.locator(f'[data-tracker="hope:{ana_id}"]').get_by_role("button", name="Give 1 Hope").click()
    hope = wait_for_event(spectator, lambda e: e["kind"] == "resource" and e["name"] == "hope")
    assert hope["participant"] == ana_id
    assert hope["value"] == 1
    expect(page.locator(f'[data-tracker="hope:{ana_id}"] [role="meter"]')).to_have_attribute(
        "aria-valuenow", "1"
    )


def test_a_player_spends_its_own_hope_and_has_no_fear_controls(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    gm = wire(room["gm"], "Mercer")
    open_table(page, relay, room["player"], "Ana")
    me = page.evaluate("window.tablerelay.you.id")
    gm.resource("hope", "gain", 2, participant=me)
    mine = page.locator(f'[data-tracker="hope:{me}"]')
    expect(mine.locator('[role="meter"]')).to_have_attribute("aria-valuenow", "2", timeout=2000)
    expect(page.get_by_role("button", name="Gain 1 Fear")).to_have_count(0)
    mine.get_by_role("button", name="Spend 1 of your Hope").click()
    spent = wait_for_event(gm, lambda e: e["kind"] == "resource" and e["name"] == "hope" and e["delta"] == -1)
    assert spent["value"] == 1
