"""The pure parts of relay.shell.admission (origins, client addresses) and relay.shell.upkeep and
relay.shell.old_rolls (old hidden rolls leave memory and come back from the log)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest
from websockets.datastructures import Headers

from relay.settings.config import Config, ConfigError, Limits
from relay.shell import old_rolls, upkeep
from relay.shell.admission import Gate, parse_networks, parse_origins
from relay.shell.fanout import history
from relay.storage.base import EventLog
from relay.storage.sqlite.log import SqliteLog
from tests.relay.helpers import INFO, Table


def test_origins_are_normalized_and_bad_ones_refused() -> None:
    assert parse_origins(None) is None
    assert parse_origins("  ") is None
    assert parse_origins(
        "https://Foundry.Example.org/, http://a.example:8080,https://b.example:443"
    ) == frozenset({"https://foundry.example.org", "http://a.example:8080", "https://b.example"})
    for bad in ("foundry.example.org", "https://x.example/game", "ftp://x.example", "https://x.example?q=1"):
        with pytest.raises(ConfigError, match="origins must be"):
            parse_origins(bad)
    with pytest.raises(ConfigError, match="trusted_proxies"):
        parse_networks("10.0.0.0/8,not-an-address")


def gate(**config: object) -> Gate:
    return Gate(Config(**config))  # type: ignore[arg-type]


def test_the_origin_check_allows_listed_own_and_originless_handshakes_only() -> None:
    g = gate(origins="https://foundry.example.org", public_url="https://dice.example.org")
    allowed = [
        {"Origin": "https://foundry.example.org", "Host": "relay:8765"},
        {"Origin": "https://dice.example.org", "Host": "127.0.0.1:8765"},  # the public address
        {"Origin": "http://127.0.0.1:8765", "Host": "127.0.0.1:8765"},  # the relay's own page
        {"Host": "127.0.0.1:8765"},  # not a browser
    ]
    refused = [
        {"Origin": "https://evil.example", "Host": "127.0.0.1:8765"},
        {"Origin": "null", "Host": "127.0.0.1:8765"},
        {"Origin": "https://foundry.example.org.evil.example", "Host": "x"},
    ]
    assert all(g.origin_allowed(Headers(h)) for h in allowed)
    assert not any(g.origin_allowed(Headers(h)) for h in refused)
    assert gate().origin_allowed(Headers({"Origin": "https://evil.example"})), "unset: every origin"


def test_x_forwarded_for_counts_only_from_trusted_proxies() -> None:
    peer = ("10.0.0.2", 50000)
    spoofed = Headers([("X-Forwarded-For", "6.6.6.6, 203.0.113.5"), ("X-Forwarded-For", "10.0.0.3")])
    assert gate().address(peer, spoofed) == "10.0.0.2", "no trusted proxies: the peer"
    trusting = gate(trusted_proxies="10.0.0.0/8")
    assert trusting.address(peer, spoofed) == "203.0.113.5", "the last hop no trusted proxy wrote"
    assert trusting.address(("192.0.2.1", 1), spoofed) == "192.0.2.1", "an untrusted peer's header is ignored"
    assert trusting.address(peer, Headers()) == "10.0.0.2"


def test_sockets_per_address_are_counted_in_and_out() -> None:
    g = gate(limits=Limits(max_per_ip=2))
    assert g.enter("a")
    assert g.enter("a")
    assert not g.enter("a"), "over the cap and not counted"
    assert g.enter("b")
    refused = g.refusal(("a", 1), Headers())
    assert refused is not None
    assert refused[0] == 429
    g.leave("a")
    assert g.refusal(("a", 1), Headers()) is None
    g.leave("a")
    g.leave("b")
    assert g.open == {}


async def test_old_hidden_rolls_leave_memory_and_come_back_from_the_log(tmp_path: Path) -> None:
    table = Table(limits=Limits(history=3))
    gm, p1, p2 = table.join("gm"), table.join("player"), table.join("player")
    power = {"system": "drawsteel.power"}
    table.send(p1, {"t": "roll", "id": "h0", "intent": power, "visibility": "gm"})
    table.send(p1, {"t": "roll", "id": "h1", "intent": power, "visibility": "blind"})
    h0, h1 = sorted(table.room.committed.sealed)
    table.send(p1, {"t": "reveal", "id": "v0", "seq": h0})
    revealed_at = table.room.committed.sealed[h0].revealed
    for i in range(5):
        table.send(p1, {"t": "roll", "id": f"r{i}", "intent": power, "visibility": "public"})
    table.send(p1, {"t": "roll", "id": "h2", "intent": power, "visibility": "self"})
    room = table.room
    h2 = max(room.committed.sealed)
    log = SqliteLog(tmp_path / "log.sqlite3")
    try:
        await log.import_room(INFO, table.stored, max_rooms=10)
        assert await log.reveals(INFO.id, 0, room.committed.seq) == {h0: revealed_at}
        assert await EventLog.reveals(log, INFO.id, 0, room.committed.seq) == {h0: revealed_at}, "the scan"
        assert await log.reveals(INFO.id, h0, room.committed.seq) == {}

        assert upkeep.forget(room, unsent=None) == 2
        for state in (room.committed, room.pending):
            assert set(state.sealed) == {h2}, "only the recent window's hidden roll stays"
            assert state.floor == room.committed.seq - 3
        assert upkeep.forget(room, unsent=None) == 0, "nothing more until the window moves"
        assert table.refold().sealed.keys() == {h0, h1, h2}, "a fold of the log still knows them all"

        # A history from the start renders them as before: h1 sealed to a player, h0 open with its reveal.
        shown = await old_rolls.view(log, INFO.id, table.stored, room.committed)
        frames = {f["seq"]: f for f in history(table.stored, p2, shown, table.forms)}
        assert frames[h1]["sealed"] is True
        assert "label" not in frames[h1]
        assert frames[h0]["revealed"] == revealed_at
        assert (await old_rolls.view(log, INFO.id, table.stored[-2:], room.committed)) is room.committed

        # A reveal reads the roll back first, then is authorized as for a recent roll.
        assert old_rolls.in_log(room, p2, h1)
        assert not old_rolls.in_log(room, p2, h2)
        await old_rolls.restore(log, room, h1)
        assert room.pending.sealed[h1].roller == p1.id
        assert room.pending.sealed[h1].blob == table.stored[h1 - 1]["sealed"]["blob"]
        assert table.send(p1, {"t": "reveal", "id": "v1", "seq": h1})[0]["code"] == "forbidden"  # blind
        assert table.send(gm, {"t": "reveal", "id": "v2", "seq": h1})[0]["t"] == "ack"
        await old_rolls.restore(log, room, h0)
        assert table.send(p1, {"t": "reveal", "id": "v3", "seq": h0}) == [
            {"t": "ack", "id": "v3", "seq": revealed_at}
        ], "a second reveal of a roll out of memory is acked with the first"
        public = next(r["seq"] for r in table.stored if r.get("request") == "r0")
        await old_rolls.restore(log, room, public)
        assert table.send(gm, {"t": "reveal", "id": "v4", "seq": public})[0]["code"] == "not_found"
    finally:
        await log.close()


def test_the_minutely_full_collection_frees_cycles_and_trims_after_it() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self

    trimmed: list[bool] = []
    gc.disable()  # so that only the upkeep's collection can free the cycles made here
    try:
        for _ in range(100):
            cycle: list[Any] = []
            cycle.append(cycle)
        del cycle
        watched = weakref.ref(Node())  # in a cycle of its own: only a collection frees it

        # The young count would not do: any other thread of the process (pytest-xdist's) may allocate.
        def trim() -> int:
            trimmed.append(watched() is None)
            return 0

        freed = upkeep.Upkeep.free_memory(trim, True) or 0
        assert freed >= 100
        assert trimmed == [True], "malloc_trim runs after the collection, when the freed memory is free"
        assert upkeep.Upkeep.free_memory(None, False) is None, "TABLERELAY_FULL_GC=0: no collection"
    finally:
        gc.enable()
