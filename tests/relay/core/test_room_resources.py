"""The room's resources without sockets: a roll's effects stored with it, spends a roll cannot cover, gains
and the caps, the GM's operations, whose Hope a player may spend, and spends racing for the last Fear."""

from __future__ import annotations

from typing import Any

from tests.relay.helpers import INFO, Table, fixed, scripted


def test_roll_effects_are_stored_with_the_roll_in_one_append() -> None:
    table = Table(scripted(10, 3), auto_commit=False)
    p1 = table.join("player")
    table.commit()
    table.send(
        p1, {"t": "roll", "id": "d", "intent": {"system": "daggerheart.duality"}, "visibility": "public"}
    )
    assert len(table.queue) == 1
    assert [r["kind"] for r in table.queue[0].records] == ["roll", "resource"]
    table.commit()
    assert table.room.committed.hope[p1.id] == 1
    assert table.replies(p1) == [{"t": "ack", "id": "d", "seq": 2}], "the ack names the roll, not its effect"


def test_a_spend_not_covered_refuses_the_roll_and_stores_nothing() -> None:
    table = Table(scripted(5, 5))
    gm = table.join("gm")
    before = len(table.stored)
    intent = {"system": "daggerheart.attack", "modifier": 1, "experience": 2, "spend_fear": True}
    replies = table.send(gm, {"t": "roll", "id": "a", "intent": intent, "visibility": "gm"})
    assert replies[0]["t"] == "error"
    assert replies[0]["code"] == "insufficient"
    assert replies[0]["id"] == "a"
    assert "Fear" in replies[0]["message"]
    assert len(table.stored) == before
    assert table.room.pending.seq == before
    table.send(gm, {"t": "resource", "id": "f", "name": "fear", "op": "set", "n": 1})
    replies = table.send(gm, {"t": "roll", "id": "a", "intent": intent, "visibility": "gm"})
    assert replies[0]["t"] == "ack"
    assert table.room.committed.fear == 0, "the spend came out of the room's Fear"


def test_hope_spend_and_gain_in_one_roll_respects_the_cap() -> None:
    table = Table(scripted(8, 2))  # with Hope: -1 spent, +1 gained
    gm = table.join("gm")
    p1 = table.join("player")
    table.send(gm, {"t": "resource", "id": "h", "name": "hope", "op": "set", "n": 6, "participant": p1.id})
    intent = {"system": "daggerheart.duality", "experience": 1, "spend_hope": True}
    table.send(p1, {"t": "roll", "id": "d", "intent": intent, "visibility": "public"})
    spend, gain = table.stored[-2:]
    assert (spend["delta"], spend["value"], gain["delta"], gain["value"]) == (-1, 5, 1, 6)
    assert spend["participant"] == gain["participant"] == p1.id


def test_gains_clamp_at_the_rooms_maximum() -> None:
    info = INFO.__class__(**{**INFO.__dict__, "fear_max": 3})
    table = Table(
        fixed(
            {"dice": [], "total": 0, "formula": "", "text": "", "effects": [{"resource": "fear", "delta": 2}]}
        ),
        info=info,
    )
    gm = table.join("gm")
    p1 = table.join("player")
    for i in range(3):
        table.send(p1, {"t": "roll", "id": f"r{i}", "intent": {"system": "x"}, "visibility": "public"})
    values = [(r["delta"], r["value"]) for r in table.stored if r["kind"] == "resource"]
    assert values == [(2, 2), (1, 3), (0, 3)]
    assert table.room.committed.fear == 3
    assert (
        table.send(gm, {"t": "resource", "id": "s", "name": "fear", "op": "set", "n": 4})[0]["code"]
        == "bad_frame"
    )


def test_gm_resource_operations() -> None:
    table = Table()
    gm = table.join("gm")
    p1 = table.join("player")

    def op(who: Any, **fields: Any) -> dict[str, Any]:
        return table.send(who, {"t": "resource", "id": "x", **fields})[0]

    assert op(gm, name="fear", op="gain", n=5)["t"] == "ack"
    assert op(gm, name="fear", op="gain", n=10)["t"] == "ack"
    assert table.room.committed.fear == 12
    assert op(gm, name="fear", op="spend", n=13)["code"] == "insufficient"
    assert op(gm, name="fear", op="spend", n=2)["t"] == "ack"
    assert op(gm, name="fear", op="set", n=0)["t"] == "ack"
    assert [(r["delta"], r["value"]) for r in table.stored if r["kind"] == "resource"] == [
        (5, 5),
        (7, 12),
        (-2, 10),
        (-10, 0),
    ]
    assert op(gm, name="hope", op="gain", n=2)["code"] == "bad_frame", "whose Hope?"
    assert op(gm, name="hope", op="gain", n=2, participant="nobody")["code"] == "not_found"
    assert op(gm, name="hope", op="gain", n=2, participant=p1.id)["t"] == "ack"
    assert table.room.committed.hope[p1.id] == 2
    last = table.stored[-1]
    assert last["participant"] == p1.id
    assert last["cause"] is None
    assert last["actor"]["id"] == gm.id


def test_players_may_only_spend_their_own_hope() -> None:
    table = Table()
    gm = table.join("gm")
    p1 = table.join("player")
    p2 = table.join("player")
    spec = table.join("spectator")
    table.send(gm, {"t": "resource", "id": "g", "name": "hope", "op": "set", "n": 3, "participant": p1.id})
    table.send(gm, {"t": "resource", "id": "g", "name": "hope", "op": "set", "n": 3, "participant": p2.id})

    def op(who: Any, **fields: Any) -> dict[str, Any]:
        return table.send(who, {"t": "resource", "id": "x", **fields})[0]

    assert op(p1, name="hope", op="spend", n=1)["t"] == "ack", "participant defaults to oneself"
    assert op(p1, name="hope", op="spend", n=1, participant=p1.id)["t"] == "ack"
    assert op(p1, name="hope", op="spend", n=1, participant=p2.id)["code"] == "forbidden"
    assert op(p1, name="hope", op="gain", n=1)["code"] == "forbidden"
    assert op(p1, name="hope", op="set", n=1)["code"] == "forbidden"
    assert op(p1, name="fear", op="spend", n=0)["code"] == "forbidden"
    assert op(spec, name="hope", op="spend", n=1)["code"] == "forbidden"
    assert op(p1, name="hope", op="spend", n=5)["code"] == "insufficient"
    assert table.room.committed.hope == {p1.id: 1, p2.id: 3}


def test_two_spends_racing_for_the_last_fear_cannot_both_succeed() -> None:
    table = Table(auto_commit=False)
    gm1 = table.join("gm")
    gm2 = table.join("gm")
    table.commit()
    table.send(gm1, {"t": "resource", "id": "set", "name": "fear", "op": "set", "n": 1})
    # Neither spend waits for the other's commit: the second is checked against the first in flight.
    table.send(gm1, {"t": "resource", "id": "a", "name": "fear", "op": "spend", "n": 1})
    table.send(gm2, {"t": "resource", "id": "b", "name": "fear", "op": "spend", "n": 1})
    table.commit()
    answers = [f for s in (gm1, gm2) for f in table.replies(s) if f["id"] in ("a", "b")]
    assert sorted(f["t"] for f in answers) == ["ack", "error"]
    assert next(f for f in answers if f["t"] == "error")["code"] == "insufficient"
    assert table.room.committed.fear == 0
