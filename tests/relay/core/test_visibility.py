"""Audiences, sealing and commitments, and what a rendered event may carry."""

from __future__ import annotations

import hashlib

import msgpack
import pytest

from relay.core import visibility
from relay.core.state import RoomState, fold
from relay.core.visibility import FULL, SEALED, audience, render

ROLLER = "p1"
VIEWERS = {
    "roller": (ROLLER, "player"),
    "player": ("p2", "player"),
    "gm": ("g1", "gm"),
    "spectator": ("s1", "spectator"),
}
# The audience table of spec/protocol.md: who gets the full event.
TABLE = {
    "public": {"roller", "player", "gm", "spectator"},
    "gm": {"roller", "gm"},
    "blind": {"gm"},
    "self": {"roller"},
}


@pytest.mark.parametrize("vis", sorted(TABLE))
@pytest.mark.parametrize("viewer", sorted(VIEWERS))
def test_audience_table(vis: str, viewer: str) -> None:
    vid, role = VIEWERS[viewer]
    assert visibility.sees_full(vis, ROLLER, vid, role) is (viewer in TABLE[vis])


def test_a_gm_rolling_blind_sees_it() -> None:
    assert visibility.sees_full("blind", "g1", "g1", "gm")
    assert not visibility.sees_full("self", "p1", "g1", "gm"), (
        "a self roll is the roller's alone, GMs included"
    )


def test_unknown_visibility_is_a_bug() -> None:
    with pytest.raises(ValueError):
        visibility.sees_full("everyone", ROLLER, "x", "gm")


def record(vis: str) -> dict[str, object]:
    rec: dict[str, object] = {
        "seq": 1,
        "epoch": "e",
        "ts": 5,
        "kind": "roll",
        "actor": {"id": ROLLER, "name": "Ana", "role": "player"},
        "visibility": vis,
        "label": "Pick the lock",
        "intent": {"system": "dice", "formula": "1d20"},
        "result": {"system": "dice", "dice": [{"faces": 20, "value": 17, "kept": True}], "total": 17},
        "request": "req-1",
    }
    if vis != "public":
        rec["sealed"] = visibility.seal(visibility.body_of(rec))
    return rec


def test_seal_commits_to_the_body() -> None:
    rec = record("gm")
    sealed = rec["sealed"]
    assert isinstance(sealed, dict)
    assert len(sealed["nonce"]) == visibility.NONCE_BYTES
    assert sealed["commitment"] == hashlib.sha256(sealed["nonce"] + sealed["blob"]).hexdigest()
    assert visibility.verify(sealed["nonce"], sealed["blob"], sealed["commitment"])
    assert not visibility.verify(sealed["nonce"], sealed["blob"] + b"\x00", sealed["commitment"])
    # A commitment read from a file may hold any text (the imports fuzz target's crash-commitment-not-ascii).
    assert not visibility.verify(sealed["nonce"], sealed["blob"], "é" + sealed["commitment"][1:])
    body = msgpack.unpackb(sealed["blob"], raw=False)
    assert body == visibility.body_of(rec)
    assert "request" not in body
    other = visibility.seal(visibility.body_of(rec))
    assert other["nonce"] != sealed["nonce"], "fresh nonces"
    assert other["commitment"] != sealed["commitment"]


def test_sealed_render_carries_nothing_hidden() -> None:
    rec = record("blind")
    state = fold([rec])
    frame = render(rec, SEALED, state)
    sealed = rec["sealed"]
    assert isinstance(sealed, dict)
    assert frame["sealed"] is True
    assert frame["commitment"] == sealed["commitment"]
    assert set(frame) == {"t", "seq", "epoch", "ts", "kind", "actor", "visibility", "sealed", "commitment"}
    full = render(rec, FULL, state)
    assert full["label"] == "Pick the lock"
    assert full["result"]["total"] == 17
    assert "request" not in full
    assert "nonce" not in str(full)
    assert "blob" not in full


def test_audience_follows_the_reveal() -> None:
    rec = record("self")
    state = fold([rec])
    assert audience(rec, state, "p2", "player") == SEALED
    assert audience(rec, state, "g1", "gm") == SEALED
    assert audience(rec, state, ROLLER, "player") == FULL
    reveal = {
        "seq": 2,
        "epoch": "e",
        "ts": 6,
        "kind": "reveal",
        "actor": {"id": ROLLER, "name": "Ana", "role": "player"},
        "visibility": "public",
        "of": 1,
        "blob": b"",
        "nonce": b"",
    }
    state.apply(reveal)
    assert audience(rec, state, "p2", "player") == FULL
    assert render(rec, FULL, state)["revealed"] == 2


def test_resource_cause_hidden_while_its_roll_is_sealed() -> None:
    rec = record("gm")
    res = {
        "seq": 2,
        "epoch": "e",
        "ts": 6,
        "kind": "resource",
        "actor": rec["actor"],
        "visibility": "public",
        "name": "fear",
        "delta": 1,
        "value": 1,
        "cause": 1,
    }
    state = RoomState()
    state.apply(rec)
    state.apply(res)
    assert render(res, FULL, state)["cause"] is None
    assert render(res, FULL, fold([record("public"), res]))["cause"] == 1
