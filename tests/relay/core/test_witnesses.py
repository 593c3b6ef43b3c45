"""Witnessed rolls (spec/fairness.md): a GM's roll or a hidden roll first appends a public ``pending`` event
naming who is asked; each asked client's random bytes go into the roll's key; the roll is made once all have
answered or when the wait is over; stray, repeated and late values change nothing; the spec-only verifier
(tests/spec_fairness.py) recomputes the roll and calls it fair."""

from __future__ import annotations

from typing import Any

from relay.core.actions import Session, WaitWitnesses
from tests import spec_fairness
from tests.relay.helpers import INFO, Table, frame

SEEDS = {n: bytes([n]) * 32 for n in range(1, 4)}
DICE = {"system": "dice", "formula": "3d6"}


def fair_table() -> Table:
    return Table(seeds=SEEDS)


def roll(rid: str, visibility: str = "public") -> dict[str, Any]:
    return {"t": "roll", "id": rid, "intent": DICE, "visibility": visibility, "label": "Ambush"}


def witness(pending: int, value: bytes, rid: str = "w") -> dict[str, Any]:
    return {"t": "witness", "id": rid, "pending": pending, "value": value}


def send(table: Table, session: Session, data: dict[str, Any]) -> list[Any]:
    """Handle a frame and carry out what the room answers; the actions themselves, for a look."""
    actions = table.room.handle(session, frame(data))
    table.execute(actions)
    table.commit()
    return actions


def test_a_gm_roll_waits_for_its_witnesses_and_their_values_go_into_its_dice() -> None:
    table = fair_table()
    gm = table.join("gm", sub="gm-1")
    ana, bo = table.join("player", witness=True), table.join("player", witness=True)
    table.join("player")  # not witness-capable: not asked
    actions = send(table, gm, roll("g1"))
    pending = table.stored[-1]
    assert [r["kind"] for r in table.stored[-2:]] == ["seed_commit", "pending"]
    assert pending["asked"] == sorted([ana.id, bo.id])
    assert pending["roller"] == gm.id
    assert "Ambush" not in str(pending), "the pending hides what it binds"
    assert "3d6" not in str(pending)
    assert WaitWitnesses(pending["seq"], table.room.limits.witness_wait_ms) in actions
    assert not [f for f in table.replies(gm) if f["t"] == "ack"], "no ack before the roll"
    send(table, ana, witness(pending["seq"], b"a" * 16))
    assert table.stored[-1]["kind"] == "pending", "one of two answered: still waiting"
    send(table, bo, witness(pending["seq"], b"b" * 32))
    made = table.stored[-1]
    assert made["kind"] == "roll"
    assert made["fair"]["pending"] == pending["seq"]
    assert made["fair"]["witnesses"] == sorted([[ana.id, b"a" * 16], [bo.id, b"b" * 32]])
    assert made["fair"]["seed"] is None, "a witnessed roll takes no roller seed"
    ack = next(f for f in table.replies(gm) if f["t"] == "ack")
    assert ack["seq"] == made["seq"]
    assert table.room.fair is not None
    assert not table.room.fair.open
    send(table, gm, {"t": "seed", "id": "s", "op": "reveal"})
    verdicts = spec_fairness.verdicts(table.stored, INFO.id)
    assert verdicts[made["seq"]] == "fair"


def test_when_the_wait_is_over_the_roll_is_made_with_the_values_it_has() -> None:
    table = fair_table()
    gm = table.join("gm", sub="gm-1")
    ana, _bo = table.join("player", witness=True), table.join("player", witness=True)
    send(table, gm, roll("g1"))
    seq = table.stored[-1]["seq"]
    send(table, ana, witness(seq, b"a" * 16))
    table.execute(table.room.witness_due(seq))
    table.commit()
    made = table.stored[-1]
    assert made["fair"]["witnesses"] == [[ana.id, b"a" * 16]]
    assert table.room.witness_due(seq) == [], "a roll is made once"
    late = send(table, _bo, witness(seq, b"b" * 16, "late"))
    assert table.got[_bo][-1]["code"] == "not_found", late


def test_stray_and_repeated_values_are_refused_and_change_nothing() -> None:
    table = fair_table()
    gm = table.join("gm", sub="gm-1")
    ana = table.join("player", witness=True)
    watcher = table.join("spectator", witness=True)
    send(table, gm, roll("g1"))
    seq = table.stored[-1]["seq"]
    send(table, watcher, witness(seq, b"s" * 16))
    assert table.got[watcher][-1]["code"] == "forbidden"
    send(table, gm, witness(seq, b"g" * 16))
    assert table.got[gm][-1]["code"] == "forbidden", "the roller of a public GM roll is not its witness"
    send(table, ana, witness(seq + 5, b"a" * 16))
    assert table.got[ana][-1]["code"] == "not_found"
    table.room.handle(ana, frame(witness(seq, b"a" * 16)))  # kept; the other asked is still out
    assert table.stored[-1]["seq"] == seq


def test_a_hidden_players_roll_asks_its_roller_and_the_other_players() -> None:
    table = fair_table()
    table.join("gm", sub="gm-1")
    ana, bo = table.join("player", witness=True), table.join("player", witness=True)
    send(table, ana, roll("a1", "gm"))
    assert table.stored[-1]["kind"] == "pending"
    assert table.stored[-1]["asked"] == sorted([ana.id, bo.id])
    assert table.stored[-1]["visibility"] == "gm"


def test_no_seed_is_revealed_while_a_witnessed_roll_is_open_and_a_retry_is_the_same_roll() -> None:
    table = fair_table()
    gm = table.join("gm", sub="gm-1")
    ana = table.join("player", witness=True)
    send(table, gm, roll("g1"))
    seq = table.stored[-1]["seq"]
    send(table, gm, {"t": "seed", "id": "s", "op": "reveal"})
    assert table.got[gm][-1]["code"] == "conflict"
    before = len(table.stored)
    send(table, gm, roll("g1"))
    assert len(table.stored) == before, "a retry while witnesses answer appends nothing"
    send(table, ana, witness(seq, b"a" * 16))
    acks = [f for f in table.replies(gm) if f["t"] == "ack"]
    assert [a["id"] for a in acks] == ["g1", "g1"], "both tries are answered with the one roll"
    assert acks[0]["seq"] == acks[1]["seq"] == table.stored[-1]["seq"]


def test_a_pending_that_was_not_stored_tells_its_roller() -> None:
    table = fair_table()
    table.auto_commit = False
    gm = table.join("gm", sub="gm-1")
    table.commit()
    table.join("player", witness=True)
    table.commit()
    table.execute(table.room.handle(gm, frame(roll("g1"))))
    table.fail_next()
    assert table.got[gm][-1]["code"] == "internal"
    assert table.room.fair is not None
    assert not table.room.fair.open
