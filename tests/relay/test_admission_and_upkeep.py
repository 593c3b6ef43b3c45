"""The pure parts of relay.admission (origins, client addresses) and relay.upkeep (old hidden rolls' blobs
leave memory; the rest of the room stays as it was)."""

from __future__ import annotations

import pytest
from websockets.datastructures import Headers

from relay import upkeep
from relay.admission import Gate, parse_networks, parse_origins
from relay.config import Config, ConfigError, Limits
from tests.relay.helpers import Table


def test_origins_are_normalized_and_bad_ones_refused() -> None:
    assert parse_origins(None) is None
    assert parse_origins("  ") is None
    assert parse_origins("https://Foundry.Example.org/, http://a.example:8080,https://b.example:443") == {
        "https://foundry.example.org",
        "http://a.example:8080",
        "https://b.example",
    }
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


def test_old_hidden_rolls_lose_their_blobs_and_nothing_else() -> None:
    table = Table(limits=Limits(history=3))
    p1 = table.join("player")
    table.send(p1, {"t": "roll", "id": "h0", "intent": {"system": "drawsteel.power"}, "visibility": "gm"})
    table.send(p1, {"t": "roll", "id": "h1", "intent": {"system": "drawsteel.power"}, "visibility": "gm"})
    for i in range(5):
        table.send(
            p1, {"t": "roll", "id": f"r{i}", "intent": {"system": "drawsteel.power"}, "visibility": "public"}
        )
    table.send(p1, {"t": "roll", "id": "h2", "intent": {"system": "drawsteel.power"}, "visibility": "self"})
    room = table.room
    older, old, new = sorted(room.committed.sealed)
    shared: upkeep.Settled = {}
    cutoff = upkeep.forget_blobs(room, 0, shared)
    assert cutoff == room.committed.seq - 3
    for state in (room.committed, room.pending):
        assert state.sealed[old].blob == b""
        assert state.sealed[old].nonce == b""
        assert (state.sealed[old].roller, state.sealed[old].visibility) == (p1.id, "gm")
        assert state.sealed[new].blob != b"", "a roll inside the recent window keeps its blob"
    # One entry stands for every old unrevealed roll of a roller and visibility, in both states.
    assert room.committed.sealed[older] is room.committed.sealed[old] is room.pending.sealed[old]
    assert list(shared) == [(p1.id, "gm")]
    assert upkeep.blob_dropped(room, old)
    assert not upkeep.blob_dropped(room, new)
    assert upkeep.forget_blobs(room, cutoff, shared) == cutoff, "nothing more until the window moves"
    assert table.refold().seq == room.committed.seq
