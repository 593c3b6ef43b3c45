"""Fair dice on the pages (spec/fairness.md), in headless Chromium against a relay rolling them
(``TABLERELAY_FAIR_DICE=true``): each roll's verdict badge and its explanation, the seed events' quiet lines,
the GM's "Reveal dice seed now" button, the red banner a seed reveal that does not match its commitment
raises (the relay's frames changed on their way to the page), and a player's /table page witnessing a GM's
roll on a relay that cheats (tests/fairness/cheating_relay.py: the real server with one cheat patched in),
where the banner goes up, and on its honest build, where it does not."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from playwright.sync_api import Page, WebSocketRoute, expect

from tests.browser.relay_process import Relay, WireClient, running_relay
from tests.fairness import cheating_relay

pytestmark = pytest.mark.slow

D20 = {"system": "dice", "formula": "1d20+3"}


@pytest.fixture(scope="module")
def fair_relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relay]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    env["TABLERELAY_FAIR_DICE"] = "true"
    data: Path = tmp_path_factory.mktemp("fair-relay")
    with running_relay(data, env=env) as server:
        yield server


@pytest.fixture
def fair_room(fair_relay: Relay, request: pytest.FixtureRequest) -> dict[str, str]:
    return fair_relay.create_room(f"Fair {request.node.name}"[:60])


@pytest.fixture
def fair_wire(fair_relay: Relay) -> Iterator[Any]:
    opened: list[WireClient] = []

    def open_client(token: str, name: str | None = None) -> WireClient:
        client = WireClient(fair_relay.ws_url, token, name)
        opened.append(client)
        return client

    yield open_client
    for client in opened:
        client.close()


def roll(client: WireClient, label: str, seed: bool = True) -> dict[str, Any]:
    frame: dict[str, Any] = {"t": "roll", "intent": D20, "visibility": "public", "label": label}
    if seed:
        frame["seed"] = os.urandom(16)
    return client.request(frame)


def card(page: Page, seq: int):  # type: ignore[no-untyped-def]
    return page.locator(f'#feed > article[data-seq="{seq}"]')


def test_the_gm_reveals_the_seed_and_every_badge_turns(
    page: Page, fair_relay: Relay, fair_room: dict[str, str], fair_wire: Any
) -> None:
    player = fair_wire(fair_room["player"], "Ana")
    theirs = roll(player, "Ana's climb")
    page.goto(f"{fair_relay.http_url}/table?name=Mercer#{fair_room['gm']}")
    expect(page.locator("#status")).to_have_text("Live", timeout=10_000)
    expect(page.locator("#feed")).to_contain_text("Dice seed 1 committed")

    # The page's own roll carries the browser's roller seed; the GM's seed counts for nothing: unwitnessed.
    page.locator("#label").fill("GM's own")
    page.locator("#roll-button").click()
    mine = page.locator("#feed > article", has_text="GM's own")
    expect(mine.locator(".fair-badge")).to_have_attribute("data-verdict", "awaiting seed")
    badge = card(page, theirs["seq"]).locator(".fair-badge")
    expect(badge).to_have_attribute("data-verdict", "awaiting seed")
    expect(badge).to_have_attribute("title", re.compile(r"^Awaiting seed: .*seed 1"))
    expect(badge.locator("svg")).to_have_count(1)  # drawn, not a font glyph

    button = page.get_by_role("button", name="Reveal dice seed now")
    expect(button).to_be_visible()
    button.click()
    expect(page.locator("#seed-status")).to_contain_text("Dice seed 1 revealed")
    expect(badge).to_have_attribute("data-verdict", "fair", timeout=10_000)
    expect(badge).to_have_text("Fair")
    expect(mine.locator(".fair-badge")).to_have_attribute("data-verdict", "unwitnessed")
    expect(page.locator("#feed .line.seed_reveal")).to_have_text(re.compile("Dice seed 1 revealed"))
    expect(page.locator("#feed .line.seed_commit")).to_have_count(2)  # seed 2 committed with the reveal

    # A tap shows the explanation where there is no hover; a second hides it.
    badge.click()
    note = card(page, theirs["seq"]).locator(".fair-note")
    expect(note).to_contain_text("recomputed in this browser from the server's dice seed 1")
    badge.click()
    expect(note).to_have_count(0)
    expect(page.locator("#fair-alarm")).to_have_count(0)

    # The player saw the same turn, and the player's page offers no seed button.
    player_page = page.context.new_page()
    player_page.goto(f"{fair_relay.http_url}/table?name=Ana#{fair_room['player']}")
    expect(player_page.locator("#status")).to_have_text("Live", timeout=10_000)
    expect(card(player_page, theirs["seq"]).locator(".fair-badge")).to_have_attribute("data-verdict", "fair")
    expect(player_page.locator("#seed-panel")).to_be_hidden()
    player_page.close()


def test_watch_shows_badges_and_a_red_banner_for_a_seed_that_does_not_match(
    page: Page, fair_relay: Relay, fair_room: dict[str, str], fair_wire: Any, page_problems: Any
) -> None:
    def tamper(ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()

        def from_server(message: str | bytes) -> None:
            if isinstance(message, bytes):
                frame = msgpack.unpackb(message, raw=False)
                frames = [frame, *frame.get("history", [])] if frame.get("t") == "welcome" else [frame]
                for one in frames:
                    if one.get("kind") == "seed_reveal":
                        one["seed"] = bytes([one["seed"][0] ^ 1]) + one["seed"][1:]
                message = msgpack.packb(frame, use_bin_type=True)
            ws.send(message)

        server.on_message(from_server)

    page.route_web_socket(re.compile(r"/ws$"), tamper)
    gm = fair_wire(fair_room["gm"], "Mercer")
    player = fair_wire(fair_room["player"], "Ana")
    page.goto(f"{fair_relay.http_url}/watch#{fair_room['spectator']}")
    expect(page.locator("#status")).to_have_text("Live", timeout=10_000)
    event = roll(player, "Watched roll")
    badge = card(page, event["seq"]).locator(".fair-badge")
    expect(badge).to_have_attribute("data-verdict", "awaiting seed")
    expect(page.locator("#feed")).to_contain_text("Dice seed 1 committed")

    gm.request({"t": "seed", "op": "reveal"})
    expect(badge).to_have_attribute("data-verdict", "failed", timeout=10_000)
    expect(badge).to_have_attribute("title", re.compile("does not match its commitment"))
    banner = page.locator("#fair-alarm")
    expect(banner).to_be_visible()
    expect(banner).to_have_attribute("role", "alert")
    expect(banner).to_contain_text("dice seed 1 does not match what it committed to")
    expect(banner).to_contain_text(f"Roll {event['seq']} failed its fairness check")
    # The changed reveal no longer carries the server's signature either.
    expect(page.locator('#feed [data-signature="failed"]')).to_have_count(1)


@pytest.fixture(scope="module")
def plain_relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relay]:
    """A relay with fair dice off (they are on by default); it outlives the test's page."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    env["TABLERELAY_FAIR_DICE"] = "false"
    with running_relay(tmp_path_factory.mktemp("plain-relay"), env=env) as server:
        yield server


def test_rolls_without_fair_dice_get_no_badge(page: Page, plain_relay: Relay) -> None:
    room = plain_relay.create_room("Plain dice")
    gm = WireClient(plain_relay.ws_url, room["gm"], "Mercer")
    try:
        event = gm.roll(D20, label="Plain roll")
        assert "fair" not in event
        page.goto(f"{plain_relay.http_url}/watch#{room['spectator']}")
        expect(card(page, event["seq"])).to_contain_text("Plain roll")
        expect(page.locator("#feed .fair-badge")).to_have_count(0)
        expect(page.locator("#feed .line.seed")).to_have_count(0)
    finally:
        gm.close()


#: The witness wait the cheating relays run with: long, so the page's honest value is never late on a busy
#: machine (the page's alarm for a missing roll comes this long plus its 5 s margin after the pending).
WITNESS_WAIT_MS = 2000

#: What the page's banner says for each cheat (None: the honest build, no banner).
CAUGHT = {
    "honest": None,
    "drop": r"the witness value this client sent for pending \d+ was left out",
    "replace": r"the witness value this client sent for pending \d+ was replaced",
    "reroll": r"do not match pending \d+'s commitment",
    "unasked": "made without asking any witness, although this client was connected",
    "withhold": r"was announced \(a pending event\) but never made",
}


@pytest.fixture
def cheating(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Relay]:
    """The relay built with the test's cheat (its parameter)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    env.update(TABLERELAY_FAIR_DICE="true", TABLERELAY_WITNESS_WAIT_MS=str(WITNESS_WAIT_MS))
    command = cheating_relay.command(request.param, tmp_path)
    with running_relay(tmp_path / "data", env=env, command=command) as server:
        yield server


@pytest.mark.parametrize("cheating", list(CAUGHT), indirect=True)
def test_a_player_page_witnesses_a_gm_roll_and_raises_the_banner_when_the_relay_cheats(
    cheating: Relay, page: Page, request: pytest.FixtureRequest
) -> None:
    # The relay comes first so that it outlives the page (a page left without its relay logs errors).
    cheat: str = request.node.callspec.params["cheating"]
    caught = CAUGHT[cheat]
    room = cheating.create_room(f"Cheat {cheat}")
    gm = WireClient(cheating.ws_url, room["gm"], "Mercer")
    try:
        page.goto(f"{cheating.http_url}/table?name=Ana#{room['player']}")
        expect(page.locator("#status")).to_have_text("Live", timeout=10_000)
        frame = {"t": "roll", "intent": D20, "visibility": "public", "label": f"GM {cheat}"}
        banner = page.locator("#fair-alarm")
        if caught is None:
            event = gm.request(frame)
            # The page answered the pending: its 16 bytes are the roll's one witness value.
            assert [len(value) for _, value in event["fair"]["witnesses"]] == [16]
            badge = card(page, event["seq"]).locator(".fair-badge")
            expect(badge).to_have_attribute("data-verdict", "awaiting seed")
            announced = page.locator(f"#roll-{event['fair']['pending']}")
            expect(announced).to_have_text(re.compile("Mercer's roll announced: 1 witness asked"))
            expect(banner).to_have_count(0)
            return
        gm.send({**frame, "id": "gm-1"})  # not awaited: the withheld roll is never acknowledged
        expect(banner).to_be_visible(timeout=WITNESS_WAIT_MS + 20_000)
        expect(banner).to_have_attribute("role", "alert")
        expect(banner).to_contain_text(re.compile(caught))
        if cheat == "withhold":
            # The alarm links to the quiet line of the pending whose roll never came.
            line = page.locator("#feed .line.pending")
            expect(line).to_have_text(re.compile("Mercer's roll announced: 1 witness asked"))
            assert banner.locator("a").first.get_attribute("href") == f"#{line.get_attribute('id')}"
    finally:
        gm.close()
