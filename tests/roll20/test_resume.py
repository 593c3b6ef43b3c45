"""Reconnecting and reloading: the gap is posted once, and nothing is posted twice (both builds)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.relay_process import Relay, WireClient, running_relay
from tests.roll20.conftest import Table, has_tag, settings_for, tag_of, until
from tests.roll20.test_bridge import posted_for

pytestmark = pytest.mark.slow

FALLBACK_MS = 200


def test_a_dropped_connection_resumes_and_posts_the_gap_once(table: Table, tmp_path: Path) -> None:
    data = tmp_path / "relay"
    with contextlib.ExitStack() as stack:
        first = stack.enter_context(running_relay(data))
        port = first.port
        room = first.create_room("Resume")
        gwen = table.join("Gwen", gm=True, settings=settings_for(first, room["gm"], "all", FALLBACK_MS))
        gwen.allowed += ["WebSocket connection to", "ERR_INTERNET_DISCONNECTED", "ERR_CONNECTION_REFUSED"]
        expect(gwen.badge()).to_have_text("connected", timeout=10_000)
        with closing(WireClient(first.ws_url, room["player"], "Ana")) as ana:
            before = ana.roll({"system": "dice", "formula": "1d20"})
        until(
            table, lambda: gwen.wait_shown(has_tag(tag_of(room, before["epoch"], before["seq"])), timeout=0)
        )
        # The bridge's network goes away and the relay restarts under it: the bridge cannot come back
        # until the network does, and meanwhile the room goes on.
        gwen.context.set_offline(True)
        stack.close()
        expect(gwen.badge()).to_have_text("reconnecting", timeout=10_000)
        second = stack.enter_context(running_relay(data, port=port))
        with closing(WireClient(second.ws_url, room["player"], "Ana")) as ana:
            gap = [ana.roll({"system": "dice", "formula": f"{n}d6"}) for n in (2, 3)]
            table.wait(0.5)
            gwen.context.set_offline(False)
            expect(gwen.badge()).to_have_text("connected", timeout=20_000)
            for event in gap:
                tag = tag_of(room, event["epoch"], event["seq"])
                assert len(gwen.wait_shown(has_tag(tag))) == 1, tag
            table.wait(2.5 * FALLBACK_MS / 1000)
        for event in [before, *gap]:
            tag = tag_of(room, event["epoch"], event["seq"])
            assert len(posted_for(gwen.sent, tag)) == 1, (tag, gwen.sent)
            assert len(gwen.wait_shown(has_tag(tag), count=2, timeout=0)) == 1
        assert len(gwen.sent) == 3, gwen.sent


def test_a_reload_posts_what_happened_meanwhile_once_and_nothing_twice(
    table: Table, relay: Relay, room: dict[str, str], wire: Callable[..., WireClient]
) -> None:
    gwen = table.join("Gwen", gm=True, settings=settings_for(relay, room["gm"], "all", FALLBACK_MS))
    expect(gwen.badge()).to_have_text("connected", timeout=10_000)
    ana = wire(room["player"], "Ana")
    first = ana.roll({"system": "dice", "formula": "1d20"})
    first_tag = tag_of(room, first["epoch"], first["seq"])
    assert len(gwen.wait_shown(has_tag(first_tag))) == 1
    # Gwen closes Roll20; two rolls happen while she is away.
    page = gwen.page
    assert page is not None
    page.goto("about:blank")
    away = [ana.roll({"system": "dice", "formula": f"{n}d8"}) for n in (2, 3)]
    gwen.open()
    expect(gwen.badge()).to_have_text("connected", timeout=10_000)
    for event in away:
        assert len(gwen.wait_shown(has_tag(tag_of(room, event["epoch"], event["seq"])))) == 1
    table.wait(2.5 * FALLBACK_MS / 1000)
    # Reloaded into a chat that shows nothing of the past (as if Roll20's archive were cleared): only the
    # bridge's own record of what it posted keeps it from posting anything again.
    gwen.game = f"{gwen.game}-after"
    gwen.open()
    expect(gwen.badge()).to_have_text("connected", timeout=10_000)
    later = ana.roll({"system": "dice", "formula": "4d4"})
    assert len(gwen.wait_shown(has_tag(tag_of(room, later["epoch"], later["seq"])))) == 1
    table.wait(2.5 * FALLBACK_MS / 1000)
    for event in [first, *away, later]:
        tag = tag_of(room, event["epoch"], event["seq"])
        assert len(posted_for(gwen.sent, tag)) == 1, (tag, gwen.sent)
    assert len(gwen.sent) == 4, gwen.sent
    # The record lives in the bridge's storage (extension or userscript manager), never the page's.
    stored = gwen.read_storage()
    record = stored[f"posted:{room['room']}:{first['epoch']}"]
    assert {str(e["seq"]) for e in [first, *away, later]} <= set(record["keys"])
    assert page.evaluate("Object.keys(localStorage).length + Object.keys(sessionStorage).length") == 0
    assert room["gm"] not in page.content()
