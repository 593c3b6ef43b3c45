"""Witnessed rolls completed by someone other than the room that opened them (spec/fairness.md: "A pending
roll interrupted by a restart is completed on recovery with the values that were stored"; "Every pending is
followed by exactly one roll naming it"): a room loaded again from its log and the store's kept secrets, and
a room on another cluster node that follows the log, make the roll with the stored values, once."""

from __future__ import annotations

from typing import Any

from relay.core import fair
from relay.core.actions import Append, KeepWitness, Measure, Session, WaitWitnesses
from relay.core.room import Room
from relay.core.state import fold
from relay.settings.config import Limits
from tests import spec_fairness
from tests.relay.core.test_witnesses import SEEDS, roll, send, witness
from tests.relay.helpers import INFO, Table, frame


def opened() -> tuple[Table, Any, Any, dict[str, Any]]:
    """A table whose GM's roll waits for two witnesses, one of whom has answered."""
    table = Table(seeds=SEEDS)
    gm = table.join("gm", sub="gm-1")
    ana, _bo = table.join("player", witness=True), table.join("player", witness=True)
    send(table, gm, roll("g1", "gm"))
    pending = table.stored[-1]
    send(table, ana, witness(pending["seq"], b"a" * 16))
    return table, gm, ana, pending


def reloaded(table: Table, *, margin: int = 0) -> tuple[Table, list[Any]]:
    """The same room loaded again from its stored events and the store's kept secrets (a restart)."""
    again = Table(seeds=SEEDS, stored=table.stored)
    again.vault = table.vault
    assert again.room.fair is not None
    return again, fair.recover(again.room, again.room.fair, list(table.vault.values()), margin=margin)


def test_a_pending_keeps_its_secret_beside_its_records_and_each_value_before_its_ack() -> None:
    table = Table(seeds=SEEDS, auto_commit=False)
    gm = table.join("gm", sub="gm-1")
    ana = table.join("player", witness=True)
    table.commit()
    actions = table.room.handle(gm, frame(roll("g1", "gm")))
    appended = next(a.pending for a in actions if isinstance(a, Append))
    kept = appended.kept[0]
    assert kept["pending"] == appended.records[-1]["seq"]
    assert kept["commit"] == appended.records[-1]["commit"]
    assert kept["id"] == "g1"
    assert len(kept["nonce"]) == 32
    assert repr(kept["nonce"]) not in repr(appended.records), "the nonce is in no record"
    table.execute(actions)
    table.commit()
    asked = table.room.handle(ana, frame(witness(kept["pending"], b"a" * 16)))
    assert [type(a) for a in asked] == [KeepWitness], "no ack until the store has it"


def test_a_restarted_room_makes_the_roll_with_the_stored_values_and_answers_the_rollers_retry() -> None:
    table, _gm, ana, pending = opened()
    assert table.vault[pending["seq"]]["values"] == {ana.id: b"a" * 16}
    again, actions = reloaded(table)
    assert actions == [WaitWitnesses(pending["seq"], Limits().witness_wait_ms)]
    gm2 = again.join("gm", sub="gm-1")
    assert again.send(gm2, roll("g1", "gm")) == [], "a retry waits for the roll it names"
    again.execute(again.room.witness_due(pending["seq"]))
    again.commit()
    made = again.stored[-1]
    assert made["kind"] == "roll"
    assert made["fair"]["pending"] == pending["seq"]
    assert made["fair"]["witnesses"] == [[ana.id, b"a" * 16]]
    assert again.replies(gm2)[-1] == {"t": "ack", "id": "g1", "seq": made["seq"]}
    assert again.send(gm2, roll("g1", "gm"))[-1] == {"t": "ack", "id": "g1", "seq": made["seq"]}
    assert again.room.witness_due(pending["seq"]) == [], "made once"
    assert [e["kind"] for e in again.stored].count("roll") == 1
    again.send(gm2, {"t": "seed", "id": "s", "op": "reveal"})
    assert spec_fairness.verdicts(again.stored, INFO.id)[made["seq"]] == "fair"


def test_another_node_takes_a_value_for_a_roll_it_does_not_hold_and_completes_it_once_its_maker_died() -> (
    None
):
    table, gm, ana, pending = opened()
    # Node B: the same room, following the log; the pending arrives as another node's event.
    before = [r for r in table.stored if r["seq"] < pending["seq"]]
    b = Room(INFO, fold(before), Limits(), clock=lambda: 1_700_000_000_000, seeds=SEEDS)
    assert b.fair is not None
    took_over = b.remote([pending])
    assert WaitWitnesses(pending["seq"], Limits().witness_wait_ms + fair.TAKEOVER_MS) in took_over
    bo = next(s for s in table.sessions if s.id in pending["asked"] and s.id != ana.id)
    asked = b.handle(Session(bo.member, witness=True), frame(witness(pending["seq"], b"b" * 16)))
    assert len(asked) == 1
    assert isinstance(asked[0], KeepWitness)
    assert table.keep(asked[0]) == "stored"
    answered = fair.witness_kept(b, b.fair, asked[0], "stored")
    assert [getattr(a, "frame", None) for a in answered] == [{"t": "ack", "id": "w", "seq": pending["seq"]}]
    retry = b.handle(Session(gm.member), frame(roll("g1", "gm")))
    assert getattr(retry[0], "frame", {}).get("code") == "conflict", "a retry on B rolls nothing new"
    # Node A is gone: B closes the store's copy and makes the roll from it.
    stored = dict(table.vault[pending["seq"]], closed=True)
    made = b.witness_due(pending["seq"], stored)
    roll_record = next(a.pending.records[0] for a in made if isinstance(a, Append))
    assert roll_record["fair"]["pending"] == pending["seq"]
    assert [w[0] for w in roll_record["fair"]["witnesses"]] == pending["asked"], "both stored values"
    assert Measure("witness_missing", 0) in made
    assert b.witness_due(pending["seq"], stored) == [], "one roll, however often it is asked"


def test_a_completion_that_loses_its_seq_is_made_again_and_a_roll_another_node_made_answers_the_roller() -> (
    None
):
    table, _gm, _ana, pending = opened()
    room = table.room
    assert room.fair is not None
    table.auto_commit = False
    made = room.witness_due(pending["seq"])
    completion = next(a.pending for a in made if isinstance(a, Append))
    assert completion.completes == pending["seq"]
    # Another node's event took the seq: the append fails with a conflict and the roller hears nothing yet.
    answers = room.failed_append(completion, conflict=True)
    assert answers == [WaitWitnesses(pending["seq"], fair.RETRY_MS)]
    assert room.fair.open[pending["seq"]].made is None
    # That node then made the roll itself (from the same stored values): the roller is acked with it.
    other = dict(completion.records[0], ts=1)
    acked = room.remote([other])
    assert {"t": "ack", "id": "g1", "seq": other["seq"]} in [getattr(a, "frame", None) for a in acked]
    assert pending["seq"] not in room.fair.open
    assert room.witness_due(pending["seq"]) == []


def test_a_value_after_the_roll_is_late_and_counted() -> None:
    table, _gm, _ana, pending = opened()
    table.execute(table.room.witness_due(pending["seq"]))
    table.commit()
    bo = next(s for s in table.sessions if s.id in pending["asked"] and s.id != _ana.id)
    late = table.room.handle(bo, frame(witness(pending["seq"], b"b" * 16)))
    assert Measure("witness_late") in late
    assert late[0].frame["code"] == "not_found"  # type: ignore[union-attr]


def test_a_roll_another_node_stored_first_answers_the_roller_of_the_completion_that_then_fails() -> None:
    table, _gm, _ana, pending = opened()
    room = table.room
    table.auto_commit = False
    completion = next(a.pending for a in room.witness_due(pending["seq"]) if isinstance(a, Append))
    other = dict(completion.records[0], ts=1)
    room.remote([other])  # the other node's roll arrives before this node hears its own append failed
    answers = room.failed_append(completion, conflict=True)
    assert [getattr(a, "frame", None) for a in answers] == [{"t": "ack", "id": "g1", "seq": other["seq"]}]
    assert room.witness_due(pending["seq"]) == []
