"""The spectator page (/watch) in headless Chromium, fed by rolls from Python protocol clients."""

from __future__ import annotations

import time
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PageProblems
from tests.browser.relay_process import Relay, running_relay

pytestmark = pytest.mark.slow


def open_watch(page: Page, relay: Relay, token: str, query: str = "") -> None:
    page.goto(f"{relay.http_url}/watch{query}#{token}")
    expect(page.locator("#status")).to_have_text("Live", timeout=10_000)


def card(page: Page, seq: int):  # type: ignore[no-untyped-def]
    return page.locator(f'#feed > article[data-seq="{seq}"]')


def test_a_roll_arrives_live_on_the_open_socket_and_the_token_stays_out_of_request_lines(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    # What "live" means here, without a clock (how fast it is, is bench/'s): the card is pushed over the
    # socket the page already has open, with no new request, no new socket and no reload in between.
    requested: list[str] = []
    sockets: list[str] = []
    loads: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.on("load", lambda p: loads.append(p.url))
    open_watch(page, relay, room["spectator"])
    assert len(sockets) == 1
    before = (len(requested), len(sockets), len(loads))
    ana = wire(room["player"], "Ana")
    event = ana.roll({"system": "daggerheart.duality", "modifier": 2}, label="Sneak past the guards")
    entry = card(page, event["seq"])
    expect(entry).to_be_visible(timeout=10_000)
    assert (len(requested), len(sockets), len(loads)) == before, "a request, a socket or a reload"
    expect(entry).to_contain_text("Ana")
    expect(entry).to_contain_text("Sneak past the guards")
    expect(entry).to_contain_text(str(event["result"]["total"]))
    # Drawn as dice: the Hope and Fear d12s, labelled for screen readers.
    hope, fear = event["result"]["hope_die"], event["result"]["fear_die"]
    expect(entry.locator(".die.hope")).to_have_attribute("aria-label", f"hope d12 showing {hope}")
    expect(entry.locator(".die.fear")).to_have_attribute("aria-label", f"fear d12 showing {fear}")
    # The live region says it in one sentence.
    expect(page.locator("#announcer")).to_contain_text("Ana rolled Sneak past the guards")
    assert requested, "the page made no requests at all?"
    assert all(room["spectator"] not in url for url in requested + sockets), requested + sockets


def test_a_sealed_roll_shows_sealed_then_opens_verified_on_reveal(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    open_watch(page, relay, room["spectator"])
    gm = wire(room["gm"], "Mercer")
    hidden = gm.roll(
        {"system": "nexus.test", "attribute_die": "d10", "skill_rank": 1}, "gm", "The secret door"
    )
    sealed = card(page, hidden["seq"])
    expect(sealed).to_be_visible(timeout=2000)
    expect(sealed).to_have_class("card roll sealed")
    expect(sealed).to_contain_text("Sealed roll")
    expect(sealed.locator(".commitment")).to_have_text(hidden["commitment"])
    expect(sealed).not_to_contain_text("The secret door")
    assert "The secret door" not in page.content()

    reveal = gm.reveal(hidden["seq"])
    opened = card(page, reveal["seq"])
    expect(opened).to_be_visible(timeout=2000)
    expect(opened.locator(".chip.verified")).to_have_text("✓ Verified")
    expect(opened).to_contain_text("The secret door")
    level = {"blunder": "Blunder", "failure": "Failure", "weak": "Weak success", "strong": "Strong success"}
    words = level.get(hidden["result"]["success_level"], "Critical success")
    expect(opened.locator(".headline")).to_have_text(words)
    # The sealed card opened in place as well.
    expect(card(page, hidden["seq"])).to_contain_text("The secret door")
    expect(card(page, hidden["seq"]).locator(".chip.verified")).to_be_visible()


def _expected_headline(result: dict[str, Any]) -> str:
    system = result["system"]
    if system == "daggerheart.duality":
        return {"critical": "Critical success", "hope": "With Hope", "fear": "With Fear"}[result["with"]]
    if system == "drawsteel.power":
        return f"Tier {result['tier']}"
    if system == "daggerheart.attack":
        if result["critical"]:
            return "Critical hit"
        return "Hit" if result["targets"][0]["hit"] else "Miss"
    if system.startswith("honors_edge"):
        return "Success" if result["success"] else "Failure"
    if system == "nexus.test":
        return {
            "blunder": "Blunder",
            "failure": "Failure",
            "weak": "Weak success",
            "strong": "Strong success",
            "critical": "Critical success",
        }[result["success_level"]]
    return str(result["total"])


INTENTS: list[dict[str, Any]] = [
    {"system": "drawsteel.power", "characteristic": 2, "edges": 1},
    {"system": "daggerheart.duality", "modifier": 1, "difficulty": 12},
    {"system": "daggerheart.attack", "modifier": 4, "targets": [{"name": "Ana", "evasion": 13}]},
    {"system": "honors_edge.roll", "pool": "7k3", "tn": 20},
    {"system": "nexus.test", "attribute_die": "d6", "skill_rank": 2},
    {"system": "dice", "formula": "4d6kh3 + 2"},
    {"system": "dice", "formula": "2d20kh1 + 5", "dialect": "roll20"},
    {"system": "dice", "formula": "4dF + 1"},
]


def test_outcomes_are_shown_in_the_games_own_terms(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    open_watch(page, relay, room["spectator"])
    gm = wire(room["gm"], "Mercer")
    for intent in INTENTS:
        event = gm.roll(intent)
        result = event["result"]
        entry = card(page, event["seq"])
        expect(entry.locator(".headline")).to_have_text(_expected_headline(result), timeout=2000)
        # Every die is drawn; the dropped ones are marked as dropped.
        dice = result["dice"]
        faces = sum(len(d.get("chain") or [d["value"]]) for d in dice)
        expect(entry.locator(".die")).to_have_count(faces)
        dropped = sum(len(d.get("chain") or [d["value"]]) for d in dice if not d["kept"])
        expect(entry.locator(".die.dropped")).to_have_count(dropped)
        if any(len(d.get("chain") or []) > 1 for d in dice):
            expect(entry.locator(".chain.multi").first).to_be_visible()
        if intent.get("formula", "").startswith("4dF"):
            shown = entry.locator(".die").all_text_contents()
            assert shown == [{-1: "−", 0: "0", 1: "+"}[d["value"]] for d in dice]
        time.sleep(0.06)  # under the per-connection rate limit


def test_an_exploding_chain_is_drawn_as_one_die(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    open_watch(page, relay, room["spectator"])
    gm = wire(room["gm"], "Mercer")
    # A 10 explodes; rolling until one shows up keeps the test about the drawing, not about luck.
    for _ in range(40):
        event = gm.roll({"system": "honors_edge.roll", "pool": "10k2"})
        chains = [d for d in event["result"]["dice"] if len(d["chain"]) > 1]
        if chains:
            break
        time.sleep(0.06)
    else:
        pytest.fail("forty 10k2 rolls without a single exploding ten")
    entry = card(page, event["seq"])
    expect(entry.locator(".chain.multi")).to_have_count(len(chains), timeout=2000)
    first = chains[0]
    chain = entry.locator(".chain.multi").first
    expect(chain.locator(".die.exploded")).to_have_count(len(first["chain"]) - 1)
    expect(chain.locator(".chain-sum")).to_have_text(f"= {first['value']}")


def test_fear_and_each_players_hope_are_tracked_live(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    open_watch(page, relay, room["spectator"])
    gm = wire(room["gm"], "Mercer")
    ana = wire(room["player"], "Ana")
    gm.resource("fear", "gain", 5)
    fear = page.locator('[data-tracker="fear"] [role="meter"]')
    expect(fear).to_have_attribute("aria-valuenow", "5", timeout=2000)
    expect(page.locator('[data-tracker="fear"] .pip.on')).to_have_count(5)
    ana_id = ana.welcome["you"]["id"]
    gm.resource("hope", "gain", 3, participant=ana_id)
    hope = page.locator(f'[data-tracker="hope:{ana_id}"]')
    expect(hope.locator('[role="meter"]')).to_have_attribute("aria-valuenow", "3", timeout=2000)
    expect(hope).to_contain_text("Ana")
    expect(page.locator("#feed")).to_contain_text("Ana gains 3 Hope")
    # Members come and go in the feed and the list.
    expect(page.locator("#members")).to_contain_text("Ana")
    ana.close()
    expect(page.locator("#feed .line.leave").first).to_contain_text("Ana left", timeout=3000)
    expect(page.locator("#members")).not_to_contain_text("Ana")


def test_overlay_mode_is_transparent_and_fits_a_stream(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    page.set_viewport_size({"width": 640, "height": 1080})
    open_watch(page, relay, room["spectator"], "?overlay=1&limit=3")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgba(0, 0, 0, 0)"
    expect(page.locator(".topbar")).to_be_hidden()
    gm = wire(room["gm"], "Mercer")
    last = None
    for i in range(5):
        last = gm.roll({"system": "dice", "formula": "1d20"}, label=f"roll {i}")
    assert last is not None
    expect(card(page, last["seq"])).to_be_visible(timeout=2000)
    expect(page.locator("#feed > *")).to_have_count(3)


def test_reads_well_on_a_phone(page: Page, relay: Relay, room: dict[str, str], wire: Any) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    open_watch(page, relay, room["spectator"])
    gm = wire(room["gm"], "Mercer")
    event = gm.roll(
        {
            "system": "daggerheart.attack",
            "modifier": 3,
            "targets": [{"name": "Anastasia the Unbreakable", "evasion": 12}, {"name": "Bo", "evasion": 15}],
        },
        label="A very long label that has to wrap nicely on a narrow phone screen without overflowing",
    )
    expect(card(page, event["seq"])).to_be_visible(timeout=2000)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def _luminance(rgb: tuple[float, ...]) -> float:
    def channel(c: float) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _rgb(css: str) -> tuple[float, ...]:
    return tuple(float(x) for x in css[css.index("(") + 1 : css.index(")")].split(","))


def test_keyboard_navigation_roles_and_contrast(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    open_watch(page, relay, room["spectator"])
    gm = wire(room["gm"], "Mercer")
    first = gm.roll({"system": "drawsteel.power", "characteristic": 1}, label="first")
    second = gm.roll({"system": "drawsteel.power", "characteristic": 1}, label="second")
    expect(card(page, second["seq"])).to_be_visible(timeout=2000)
    expect(page.locator("#feed")).to_have_attribute("role", "feed")
    expect(page.locator("#announcer")).to_have_attribute("aria-live", "polite")
    # Tab reaches the newest roll; PageDown moves to the one before it.
    page.locator("#feed").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.seq") == str(second["seq"])
    page.keyboard.press("PageDown")
    assert page.evaluate("document.activeElement.dataset.seq") == str(first["seq"])
    # Text on its card background: WCAG AA (4.5:1) for the body text and the muted text.
    background = _rgb(
        page.evaluate("getComputedStyle(document.querySelector('#feed > article')).backgroundColor")
    )
    for selector in (".who-name", ".who-line", ".summary", ".total", ".label", ".formula", ".card-meta time"):
        color = _rgb(
            page.evaluate(f"getComputedStyle(document.querySelector('#feed > article {selector}')).color")
        )
        lighter, darker = sorted((_luminance(color), _luminance(background)), reverse=True)
        ratio = (lighter + 0.05) / (darker + 0.05)
        assert ratio >= 4.5, f"{selector}: contrast {ratio:.2f}"


def test_reconnects_by_itself_after_a_server_restart(
    page: Page, tmp_path: Any, page_problems: PageProblems
) -> None:
    from tests.browser.relay_process import WireClient

    # Chromium logs each refused reconnect attempt as a console error; those are expected here.
    page_problems.allowed.append("WebSocket connection to")
    data = tmp_path / "data"
    with running_relay(data) as first:
        room = first.create_room("Restart")
        port = first.port
        open_watch(page, first, room["spectator"])
        gm = WireClient(first.ws_url, room["gm"], "Mercer")
        before = gm.roll({"system": "dice", "formula": "1d6"}, label="before")
        expect(card(page, before["seq"])).to_be_visible(timeout=2000)
        gm.close()
    expect(page.locator("#status")).to_have_text("Reconnecting…", timeout=5000)
    with running_relay(data, port=port) as second:
        expect(page.locator("#status")).to_have_text("Live", timeout=15_000)
        gm = WireClient(second.ws_url, room["gm"], "Mercer")
        after = gm.roll({"system": "dice", "formula": "1d6"}, label="after")
        expect(card(page, after["seq"])).to_be_visible(timeout=2000)
        expect(page.locator(f'#feed > article[data-seq="{before["seq"]}"]')).to_have_count(1)
        gm.close()


ANIMATIONS = """seq => {
  const card = document.querySelector(`#feed > article[data-seq='${seq}']`);
  return [getComputedStyle(card).animationName, getComputedStyle(card.querySelector('.die')).animationName];
}"""


def test_new_rolls_animate_in_unless_reduced_motion_is_asked_for(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    open_watch(page, relay, room["spectator"])
    gm = wire(room["gm"], "Mercer")
    moving = gm.roll({"system": "dice", "formula": "2d6"})
    expect(card(page, moving["seq"])).to_be_visible(timeout=2000)
    names = page.evaluate(ANIMATIONS, moving["seq"])
    assert names == ["enter", "tumble"]
    page.emulate_media(reduced_motion="reduce")
    still = gm.roll({"system": "dice", "formula": "2d6"})
    expect(card(page, still["seq"])).to_be_visible(timeout=2000)
    names = page.evaluate(ANIMATIONS, still["seq"])
    assert names == ["none", "none"]


def test_a_vtts_faces_are_shown_with_the_formula_they_are_for(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    open_watch(page, relay, room["spectator"])
    gm = wire(room["gm"], "Mercer")
    event = gm.roll(
        {
            "system": "faces",
            "dice": [{"number": 2, "faces": 20}, {"number": 1, "faces": 6}],
            "formula": "2d20kh + 1d6",
        }
    )
    entry = card(page, event["seq"])
    expect(entry).to_contain_text("Foundry VTT · Dice faces", timeout=2000)
    expect(entry).to_contain_text("for 2d20kh + 1d6")
    expect(entry.locator(".die")).to_have_count(3)
    assert "null" not in entry.inner_text(), "a faces roll has no total to show"
