"""A witnessed roll holds what it will spend (docs/fairness.md, "How it runs"): its pending event carries
``holds``, folded into the room's state, so the spends and rolls that come while it waits see that much as
unavailable, on this node, after a restart and on another node alike; its roll then spends it once. A
pending that will get no roll holds nothing, and nor does any in a room without fair dice."""

from __future__ import annotations

from typing import Any

import pytest

from relay.core.actions import Session
from relay.core.records import RecordError, check
from relay.core.room import Room
from relay.core.state import fold
from relay.settings.config import Limits
from tests import spec_fairness
from tests.relay.core.test_witness_recovery import reloaded
from tests.relay.core.test_witnesses import SEEDS
from tests.relay.helpers import INFO, Table, frame

ATTACK = {"system": "daggerheart.attack", "modifier": 1, "experience": 2, "spend_fear": True}
PAID_DUALITY = {"system": "daggerheart.duality", "experience": 1, "spend_hope": True}


def fear(n: int, op: str = "set", rid: str = "f") -> dict[str, Any]:
    return {"t": "resource", "id": rid, "name": "fear", "op": op, "n": n}


def attack(rid: str) -> dict[str, Any]:
    return {"t": "roll", "id": rid, "intent": ATTACK, "visibility": "public"}


def ask(table: Table, session: Session, data: dict[str, Any]) -> list[dict[str, Any]]:
    """The answers (acks, errors) ``session`` got for ``data``, its events left out."""
    return [f for f in table.send(session, data) if f["t"] != "event"]


def code(replies: list[dict[str, Any]]) -> str:
    return str(replies[-1].get("code", replies[-1]["t"]))


def held_fear() -> tuple[Table, Session, Session, dict[str, Any]]:
    """A GM's attack paid with the room's only Fear, waiting for its witness."""
    table = Table(seeds=SEEDS)
    gm = table.join("gm", sub="gm-1")
    ana = table.join("player", witness=True)
    ask(table, gm, fear(1))
    assert ask(table, gm, attack("a1")) == [], "no answer while it waits"
    pending = table.stored[-1]
    assert pending["kind"] == "pending"
    return table, gm, ana, pending


def test_an_attack_paid_with_the_last_fear_holds_it_until_its_roll_spends_it() -> None:
    table, gm, ana, pending = held_fear()
    assert pending["holds"] == {"fear": 1}
    assert table.room.committed.fear == 1, "held, not spent: the state shows the Fear there is"
    stored = len(table.stored)
    spend = ask(table, gm, fear(1, "spend", "s"))
    assert code(spend) == "insufficient"
    assert "1 more is held" in spend[-1]["message"]
    assert code(ask(table, gm, attack("a2"))) == "insufficient", "refused at once: no second pending"
    assert code(ask(table, gm, fear(0))) == "insufficient", "a set below what is held spends it too"
    assert len(table.stored) == stored, "nothing of the refused was stored"
    assert ask(table, gm, fear(3))[-1]["t"] == "ack", "a set above it is not"
    assert ask(table, gm, fear(2, "spend", "s2"))[-1]["t"] == "ack", "what is not held is free"
    ask(table, ana, {"t": "witness", "id": "w", "pending": pending["seq"], "value": b"a" * 16})
    roll, spent = table.stored[-2:]
    assert roll["fair"]["pending"] == pending["seq"]
    assert (spent["delta"], spent["value"], spent["cause"]) == (-1, 0, roll["seq"])
    assert table.room.committed.fear == table.refold().fear == 0
    assert table.room.pending.held("fear", None) == 0, "spent once: nothing held after the roll"
    ask(table, gm, {"t": "seed", "id": "s", "op": "reveal"})
    assert spec_fairness.verdicts(table.stored, INFO.id)[roll["seq"]] == "fair"


def test_a_hidden_roll_paid_with_hope_holds_its_rollers_hope_and_no_one_elses() -> None:
    table = Table(seeds=SEEDS)
    gm = table.join("gm", sub="gm-1")
    ana, bo = table.join("player", witness=True), table.join("player", witness=True)
    for who in (ana, bo):
        hope = {"t": "resource", "id": "h", "name": "hope", "op": "set", "n": 1, "participant": who.id}
        ask(table, gm, hope)
    ask(table, ana, {"t": "roll", "id": "d", "intent": PAID_DUALITY, "visibility": "self"})
    pending = table.stored[-1]
    assert (pending["kind"], pending["holds"]) == ("pending", {"hope": 1})
    own = {"t": "resource", "id": "s", "name": "hope", "op": "spend", "n": 1}
    assert code(ask(table, ana, own)) == "insufficient"
    assert ask(table, bo, own)[-1]["t"] == "ack", "bo's Hope is bo's"
    table.execute(table.room.witness_due(pending["seq"]))
    table.commit()
    roll = next(r for r in table.stored if r["kind"] == "roll")
    effects = [r for r in table.stored if r["kind"] == "resource" and r["cause"] == roll["seq"]]
    assert (effects[0]["participant"], effects[0]["delta"]) == (ana.id, -1), "it spent the Hope it held"
    values = [r["value"] for r in effects if r["name"] == "hope"]
    assert values in ([0], [0, 1]), "spent once: 1 - 1, then the Hope the roll gave, if any"
    assert table.room.committed.hope[ana.id] == table.refold().hope[ana.id] == values[-1]


def test_a_witnessed_roll_that_cannot_be_paid_is_refused_before_its_pending() -> None:
    table = Table(seeds=SEEDS)
    gm = table.join("gm", sub="gm-1")
    table.join("player", witness=True)
    stored = len(table.stored)
    replies = ask(table, gm, attack("a1"))
    assert code(replies) == "insufficient"
    assert replies[-1]["id"] == "a1"
    assert len(table.stored) == stored, "no seed commit and no pending stored"
    assert table.room.fair is not None
    assert not table.room.fair.open


def test_the_hold_is_folded_again_after_a_restart_and_by_another_node() -> None:
    table, _gm, _ana, pending = held_fear()
    again, _ = reloaded(table)
    gm2 = again.join("gm", sub="gm-1")
    assert code(ask(again, gm2, fear(1, "spend", "s"))) == "insufficient", "held after a restart"
    before = [r for r in table.stored if r["seq"] < pending["seq"]]
    node_b = Room(INFO, fold(before), Limits(), clock=lambda: 1_700_000_000_000, seeds=SEEDS)
    node_b.remote([pending])
    refused = node_b.handle(gm2, frame(fear(1, "spend", "s")))
    assert getattr(refused[0], "frame", {}).get("code") == "insufficient", "held on another node"
    again.execute(again.room.witness_due(pending["seq"]))
    again.commit()
    assert again.room.committed.fear == 0
    assert ask(again, gm2, fear(1, "gain", "g"))[-1]["t"] == "ack"
    assert ask(again, gm2, fear(1, "spend", "s2"))[-1]["t"] == "ack", "free once the roll is made"


def test_a_pending_that_will_get_no_roll_holds_nothing_nor_one_in_a_room_without_fair_dice() -> None:
    table, gm, _ana, pending = held_fear()
    plain = Table(stored=table.stored)  # fair dice turned off: nothing will make that roll
    assert ask(plain, plain.join("gm", sub="gm-1"), fear(1, "spend", "s"))[-1]["t"] == "ack"
    assert table.room.fair is not None
    table.room.fair.refused.add(pending["seq"])  # nothing kept for it (relay.shell.seeding)
    assert ask(table, gm, fear(1, "spend", "s"))[-1]["t"] == "ack"


def test_an_imported_pending_may_hold_fear_and_hope_and_nothing_else() -> None:
    pending = held_fear()[-1]
    check(pending)
    for bad in ({"fear": -1}, {"luck": 1}, [1]):
        with pytest.raises(RecordError, match="'holds'"):
            check({**pending, "holds": bad})
