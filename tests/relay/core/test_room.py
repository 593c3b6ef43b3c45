"""The room state machine without sockets: audiences, commitments, resources, idempotency, resume, errors."""

from __future__ import annotations

import hashlib
from typing import Any

import msgpack
import pytest

from relay.core import protocol
from relay.core.actions import Refused
from relay.core.claims import Claims
from relay.core.visibility import BODY_KEYS
from relay.settings.config import Limits
from tests.relay.helpers import INFO, Table, fixed, frame, scripted

POWER = {"system": "drawsteel.power", "characteristic": 2}
HIDDEN_KEYS = ("label", "intent", "result")


def roll(
    rid: str, visibility: str = "public", label: str | None = "Secret door", **extra: Any
) -> dict[str, Any]:
    data: dict[str, Any] = {"t": "roll", "id": rid, "intent": dict(POWER), "visibility": visibility, **extra}
    if label is not None:
        data["label"] = label
    return data


@pytest.fixture
def table() -> Table:
    return Table()


def four(table: Table) -> tuple[Any, Any, Any, Any]:
    gm = table.join("gm", name="Gwen")
    p1 = table.join("player", name="Ana")
    p2 = table.join("player", name="Bo")
    spec = table.join("spectator")
    return gm, p1, p2, spec


def test_joins_are_events_and_members(table: Table) -> None:
    gm, p1, p2, spec = four(table)
    assert [r["kind"] for r in table.stored] == ["join"] * 4
    assert [r["seq"] for r in table.stored] == [1, 2, 3, 4]
    state = table.room.committed.wire()
    assert [m["id"] for m in state["members"]] == [gm.id, p1.id, p2.id, spec.id]
    assert state["hope"] == {p1.id: 0, p2.id: 0}, "players have Hope; the GM and spectators do not"
    assert p1.member.name == "Ana"
    # The GM saw its own join and every later one as events (the harness delivers to all joined sessions).
    assert [e["member"]["id"] for e in table.events(gm)] == [gm.id, p1.id, p2.id, spec.id]


def test_public_roll_is_full_for_everyone_and_acked_with_its_seq(table: Table) -> None:
    gm, p1, p2, spec = four(table)
    replies = table.send(p1, roll("r1"))
    assert replies[0] == {"t": "ack", "id": "r1", "seq": 5}
    for s in (gm, p1, p2, spec):
        ev = table.events(s)[-1]
        assert ev["seq"] == 5
        assert ev["kind"] == "roll"
        assert "sealed" not in ev
        assert ev["label"] == "Secret door"
        assert ev["intent"] == POWER
        assert ev["result"]["total"] == 5 + 6 + 2
        assert ev["actor"] == p1.member.wire()
        assert "commitment" not in ev, "a public roll has nothing to commit to"
    stored = table.stored[-1]
    assert stored["request"] == "r1"
    assert "sealed" not in stored


# Who gets the full roll, by visibility: (roller p1, other player p2, gm, spectator).
AUDIENCE = {
    "gm": (True, False, True, False),
    "blind": (False, False, True, False),
    "self": (True, False, False, False),
}


@pytest.mark.parametrize("visibility", sorted(AUDIENCE))
def test_hidden_rolls_reach_exactly_their_audience(table: Table, visibility: str) -> None:
    gm, p1, p2, spec = four(table)
    table.send(p1, roll("r1", visibility))
    for session, full in zip((p1, p2, gm, spec), AUDIENCE[visibility], strict=True):
        ev = table.events(session)[-1]
        assert ev["seq"] == 5
        assert ev["visibility"] == visibility
        assert len(ev["commitment"]) == 64
        assert int(ev["commitment"], 16) >= 0
        if full:
            assert ev["label"] == "Secret door"
            assert ev["result"]["total"] == 13
            assert "sealed" not in ev
        else:
            assert ev["sealed"] is True
            for key in HIDDEN_KEYS:
                assert key not in ev
            encoded = protocol.encode(ev)
            assert b"Secret door" not in encoded
            assert b"dice" not in encoded
            assert b"drawsteel" not in encoded


def test_gm_roll_by_the_gm_is_sealed_for_players_and_spectators(table: Table) -> None:
    gm, p1, _, spec = four(table)
    table.send(gm, roll("g1", "gm"))
    assert "result" in table.events(gm)[-1]
    assert table.events(p1)[-1]["sealed"] is True
    assert table.events(spec)[-1]["sealed"] is True


def test_the_commitment_checks_out_against_the_reveal(table: Table) -> None:
    gm, p1, p2, spec = four(table)
    table.send(p1, roll("r1", "blind"))
    sealed_seen = table.events(p2)[-1]
    gm_seen = table.events(gm)[-1]
    assert table.send(gm, {"t": "reveal", "id": "v1", "seq": 5})[0] == {"t": "ack", "id": "v1", "seq": 6}
    for s in (gm, p1, p2, spec):
        reveal = table.events(s)[-1]
        assert reveal["kind"] == "reveal"
        assert reveal["of"] == 5
        assert reveal["seq"] == 6
        assert hashlib.sha256(reveal["nonce"] + reveal["blob"]).hexdigest() == sealed_seen["commitment"]
        body = msgpack.unpackb(reveal["blob"], raw=False)
        assert list(body) == list(BODY_KEYS)
        assert body == {k: gm_seen[k] for k in BODY_KEYS}, "the blob is the full event the audience saw"
        assert reveal["actor"] == gm.member.wire()
    # After the reveal the history shows the roll in full to everyone.
    from relay.shell.fanout import history

    shown = history(table.stored, spec, table.room.committed, table.forms)[4]
    assert shown["label"] == "Secret door"
    assert shown["revealed"] == 6
    assert "sealed" not in shown


def test_reveal_rules(table: Table) -> None:
    gm, p1, p2, spec = four(table)
    table.send(p1, roll("a", "gm"))  # 5
    table.send(p1, roll("b", "blind"))  # 6
    table.send(p2, roll("c", "self"))  # 7
    table.send(p1, roll("d", "public"))  # 8

    def answer(session: Any, seq: int, rid: str = "x") -> dict[str, Any]:
        return table.send(session, {"t": "reveal", "id": rid, "seq": seq})[0]

    assert answer(p1, 6)["code"] == "forbidden", (
        "the roller of a blind roll does not know it; only a GM reveals"
    )
    assert answer(p1, 7)["code"] == "forbidden", "not your roll"
    assert answer(spec, 5)["code"] == "forbidden"
    assert answer(p1, 8)["code"] == "not_found", "a public roll is not sealed"
    assert answer(p1, 2)["code"] == "not_found", "a join is not a roll"
    assert answer(p1, 99)["code"] == "not_found"
    stored = len(table.stored)
    assert answer(p1, 5, "own") == {"t": "ack", "id": "own", "seq": stored + 1}, (
        "a gm roll's roller may reveal"
    )
    assert answer(p2, 7, "own2")["t"] == "ack", "a self roll's roller may reveal"
    assert answer(gm, 6, "gm")["t"] == "ack"
    count = len(table.stored)
    again = answer(gm, 5, "again")
    assert again == {"t": "ack", "id": "again", "seq": stored + 1}, "a second reveal acks the first one"
    assert len(table.stored) == count


def test_hidden_effects_apply_at_once_but_name_their_cause_only_after_the_reveal() -> None:
    # Hope die 3, Fear die 10: with Fear, so the GM gains a Fear.
    table = Table(scripted(3, 10))
    gm, p1, p2, spec = four(table)
    table.send(
        p1, {"t": "roll", "id": "d", "intent": {"system": "daggerheart.duality"}, "visibility": "blind"}
    )
    roll_ev, fear_ev = table.stored[-2:]
    assert roll_ev["kind"] == "roll"
    assert fear_ev["kind"] == "resource"
    assert fear_ev["cause"] == roll_ev["seq"], "the log knows the cause"
    assert table.room.committed.fear == 1
    for s in (gm, p1, p2, spec):
        seen = table.events(s)[-1]
        assert seen["name"] == "fear"
        assert seen["delta"] == 1
        assert seen["value"] == 1
        assert seen["cause"] is None, "the cause would tell a player how a blind roll went"
        assert "participant" not in seen
    table.send(gm, {"t": "reveal", "id": "v", "seq": roll_ev["seq"]})
    from relay.shell.fanout import history

    assert history(table.stored, spec, table.room.committed, table.forms)[-2]["cause"] == roll_ev["seq"]


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


def test_a_retried_roll_returns_the_first_result() -> None:
    table = Table()
    p1 = table.join("player")
    p2 = table.join("player")
    first = table.send(p1, roll("same"))[0]
    count = len(table.stored)
    again = table.send(p1, roll("same", label="different"))
    assert again == [first], "the retry is acked with the original seq"
    assert len(table.stored) == count, "and nothing new is stored"
    other = table.send(p2, roll("same"))[0]
    assert other["seq"] == count + 1, "roll ids are per participant"


def test_a_retry_while_the_first_is_in_flight_is_acked_when_it_commits() -> None:
    table = Table(auto_commit=False)
    p1 = table.join("player")
    table.commit()
    table.send(p1, roll("r"))
    table.send(p1, roll("r"))
    assert len(table.queue) == 1, "the retry made no second append"
    assert table.replies(p1) == []
    table.commit()
    assert table.replies(p1) == [{"t": "ack", "id": "r", "seq": 2}, {"t": "ack", "id": "r", "seq": 2}]


def test_idempotency_survives_a_restart() -> None:
    table = Table()
    p1 = table.join("player", sub="p-ana")
    table.send(p1, roll("r"))
    again = Table(stored=table.stored)
    ana = again.join("player", sub="p-ana")
    assert again.send(ana, roll("r")) == [{"t": "ack", "id": "r", "seq": 2}]


def test_a_failed_append_voids_what_was_queued_behind_it() -> None:
    table = Table(auto_commit=False)
    gm = table.join("gm")
    table.commit()
    table.send(gm, roll("a"))  # seq 2
    table.send(gm, roll("b"))  # seq 3, queued behind a
    table.fail_next()  # a is not stored
    assert table.replies(gm) == [
        {
            "t": "error",
            "id": "a",
            "code": "internal",
            "message": "The server could not store this; try again.",
        }
    ]
    assert table.room.pending.seq == 1, "pending is rebuilt from what is committed"
    table.commit()  # b expected seq 2 after a; the log is at 1, so b conflicts
    assert table.replies(gm)[-1]["code"] == "conflict"
    assert table.replies(gm)[-1]["id"] == "b"
    table.send(gm, roll("a"))
    table.commit()
    assert table.replies(gm)[-1] == {"t": "ack", "id": "a", "seq": 2}, "a failed roll id can be retried"
    assert [r["seq"] for r in table.stored] == [1, 2]


def test_state_is_a_fold_of_the_stored_events() -> None:
    table = Table(scripted(*([3, 10, 10, 3] * 10)))
    gm, p1, p2, spec = four(table)
    for i in range(6):
        table.send(
            p1 if i % 2 else p2,
            {
                "t": "roll",
                "id": f"d{i}",
                "intent": {"system": "daggerheart.duality"},
                "visibility": ["public", "gm", "blind", "self"][i % 4],
            },
        )
    table.send(gm, {"t": "reveal", "id": "v", "seq": 7})
    table.send(gm, {"t": "resource", "id": "s", "name": "fear", "op": "spend", "n": 1})
    table.leave(spec)
    refolded = table.refold()
    assert refolded == table.room.committed
    assert refolded == table.room.pending
    # p2 rolled with Fear three times, p1 with Hope three times; the GM spent one Fear.
    assert refolded.fear == 2
    assert refolded.hope == {p1.id: 3, p2.id: 0}
    assert spec.id not in refolded.members
    assert spec.id in refolded.participants


def test_admission() -> None:
    table = Table(limits=Limits(max_members=2))
    gm = table.join("gm", sub="g1")
    second = table.join("gm", sub="g1")
    assert second.id == gm.id
    assert len(table.stored) == 1, "a second socket of the same participant is no new join"
    with pytest.raises(Refused) as full:
        table.join("player")
    assert full.value.code == protocol.CLOSE_FULL
    table.leave(second)
    assert [r["kind"] for r in table.stored] == ["join"], "still connected through the first socket"
    table.leave(gm)
    assert [r["kind"] for r in table.stored] == ["join", "leave"]
    with pytest.raises(Refused) as wrong:
        table.room.admit(Claims(INFO.id, "player", "g1", None, None), None, frozenset())
    assert wrong.value.code == protocol.CLOSE_UNAUTHORIZED, "a known participant keeps its role"
    with pytest.raises(Refused):
        table.room.admit(Claims("other-room", "gm", None, None, None), None, frozenset())


def test_names_come_from_the_token_then_the_hello_then_a_default() -> None:
    table = Table()
    named, _ = table.room.admit(
        Claims(INFO.id, "player", None, "Token name", None), "Hello name", frozenset()
    )
    hello, _ = table.room.admit(Claims(INFO.id, "player", None, None, None), "Hello name", frozenset())
    plain, _ = table.room.admit(Claims(INFO.id, "spectator", None, None, None), None, frozenset())
    assert named.member.name == "Token name"
    assert hello.member.name == "Hello name"
    assert plain.member.name.startswith("Spectator ")
    # A token that names its participant (a GM token) is one person on every socket: the role is its name.
    gm, _ = table.room.admit(Claims(INFO.id, "gm", "gm-0123456789ab", None, None), None, frozenset())
    again, _ = table.room.admit(Claims(INFO.id, "gm", "gm-0123456789ab", None, None), "Later", frozenset())
    assert gm.member.name == "GM"
    assert again.member.id == gm.member.id
    assert again.member.name == "GM"
    named_player, _ = table.room.admit(Claims(INFO.id, "player", "p-42", None, None), None, frozenset())
    assert named_player.member.name == "Player"


def test_sweep_leaves_members_the_log_still_holds() -> None:
    table = Table()
    table.join("gm")
    table.join("player")
    restarted = Table(stored=table.stored)
    assert len(restarted.room.committed.members) == 2
    sweep = restarted.room.sweep()
    assert sweep is not None
    assert [r["kind"] for r in sweep.records] == ["leave", "leave"]
    restarted.queue.append(sweep)
    restarted.commit()
    assert restarted.room.committed.members == {}


@pytest.mark.parametrize(
    ("resume", "expected"),
    [
        (None, (10, 110, False)),
        (("epoch1", 110), (110, 110, True)),
        (("epoch1", 100), (100, 110, True)),
        (("epoch1", 0), (0, 110, True)),
        (("epoch1", 111), (10, 110, False)),  # ahead of the log
        (("other", 100), (10, 110, False)),  # another epoch: the log was lost
    ],
)
def test_resume_gap(resume: tuple[str, int] | None, expected: tuple[int, int, bool]) -> None:
    table = Table()
    table.room.committed.seq = 110  # only the range arithmetic is under test
    hello = frame(
        {
            "t": "hello",
            "v": 1,
            "token": "t",
            **({"resume": {"epoch": resume[0], "seq": resume[1]}} if resume else {}),
        }
    )
    assert isinstance(hello, protocol.Hello)
    assert table.room.history_range(hello.resume) == expected


def test_a_resume_gap_longer_than_the_window_is_not_recovered() -> None:
    table = Table(limits=Limits(resume_max=50, history=20))
    table.room.committed.seq = 200
    assert table.room.history_range(protocol.Resume("epoch1", 150)) == (150, 200, True)
    assert table.room.history_range(protocol.Resume("epoch1", 149)) == (180, 200, False)


def test_spectators_cannot_roll_and_bad_intents_say_why(table: Table) -> None:
    _, p1, _, spec = four(table)
    count = len(table.stored)
    assert table.send(spec, roll("s"))[0]["code"] == "forbidden"
    bad = table.send(
        p1,
        {
            "t": "roll",
            "id": "b",
            "intent": {"system": "drawsteel.power", "edges": -1},
            "visibility": "public",
        },
    )[0]
    assert bad["code"] == "bad_intent"
    assert bad["id"] == "b"
    assert "edges" in bad["message"]
    unknown = table.send(p1, {"t": "roll", "id": "u", "intent": {"system": "nope"}, "visibility": "public"})[
        0
    ]
    assert unknown["code"] == "bad_intent"
    assert "nope" in unknown["message"]
    assert len(table.stored) == count


def test_ping_is_answered(table: Table) -> None:
    spec = table.join("spectator")
    assert table.send(spec, {"t": "ping", "id": "p"}) == [{"t": "pong", "id": "p"}]


def test_a_second_hello_is_a_bad_frame(table: Table) -> None:
    spec = table.join("spectator")
    reply = table.send(spec, {"t": "hello", "v": 1, "token": "x"})[0]
    assert reply["code"] == "bad_frame"


def test_roll_ids_are_remembered_for_a_window_with_a_floor_and_a_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    from relay.core import state

    monkeypatch.setattr(state, "ROLL_IDS_FLOOR", 3)
    monkeypatch.setattr(state, "ROLL_IDS_KEPT", 5)
    table = Table(scripted(*([5, 6] * 40)))
    now = [1_700_000_000_000]
    table.room._clock = lambda: now[0]
    p1 = table.join("player")
    seqs = [table.send(p1, roll(f"r{i}"))[0]["seq"] for i in range(5)]
    assert table.send(p1, roll("r0")) == [{"t": "ack", "id": "r0", "seq": seqs[0]}], "young ids are kept"
    seqs.append(table.send(p1, roll("r5"))[0]["seq"])
    assert table.send(p1, roll("r0"))[0]["seq"] == seqs[5] + 1, "past the cap the oldest id is a new roll"
    assert table.send(p1, roll("r2")) == [{"t": "ack", "id": "r2", "seq": seqs[2]}]

    now[0] += state.ROLL_ID_WINDOW_MS + 1
    late = table.send(p1, roll("late"))[0]["seq"]
    # Older than the window: only the floor's last three ids (r5, the second r0, late) are kept.
    assert table.send(p1, roll("r5")) == [{"t": "ack", "id": "r5", "seq": seqs[5]}]
    assert table.send(p1, roll("late")) == [{"t": "ack", "id": "late", "seq": late}]
    assert table.send(p1, roll("r4"))[0]["seq"] == late + 1, "an old id beyond the floor is a new roll"
    assert table.refold() == table.room.committed, "the log's fold keeps exactly the same ids"


def test_recent_records_serve_welcomes_from_memory_within_the_history_window() -> None:
    table = Table(limits=Limits(history=5))
    p1 = table.join("player", name="Ana")
    for i in range(8):
        table.send(p1, roll(f"r{i}"))
    assert len(table.stored) == 9
    room = table.room
    assert room.recent_between(9, 9) == [], "nothing to send after the latest seq"
    assert room.recent_between(4, 9) == table.stored[4:9], "the last five are the stored records"
    assert room.recent_between(6, 8) == table.stored[6:8], "a range that ends before the latest seq"
    assert room.recent_between(3, 9) is None, "older than the window: the server reads the log"
    assert room.recent_between(4, 10) is None, "not stored yet"


def test_recent_records_wait_for_the_commit_and_survive_a_failed_append() -> None:
    table = Table(limits=Limits(history=10), auto_commit=False)
    p1 = table.join("player")
    table.commit()
    table.send(p1, roll("r1"))
    assert table.room.recent_between(0, 1) == table.stored[:1]
    assert table.room.recent_between(1, 2) is None, "an append in flight is not history yet"
    table.fail_next()
    table.send(p1, roll("r2"))
    table.commit()
    assert [r["seq"] for r in table.stored] == [1, 2]
    assert table.room.recent_between(0, 2) == table.stored


def test_a_loaded_room_remembers_only_records_that_end_at_its_state() -> None:
    table = Table(limits=Limits(history=10))
    p1 = table.join("player")
    table.send(p1, roll("r1"))
    restarted = Table(limits=Limits(history=10), stored=table.stored)
    restarted.room.remember(table.stored[:1])  # stale: ends before the stored state
    assert restarted.room.recent_between(0, 2) is None
    restarted.room.remember(table.stored)
    assert restarted.room.recent_between(0, 2) == table.stored


def test_a_retry_after_a_failed_append_is_acked_when_its_new_roll_commits() -> None:
    """Found by the state machine (test_room_stateful.py): an append doomed by an earlier failure and a new
    append ending at the same seq were both in flight; refusing the doomed one forgot the new one, and a
    retry of the new roll then failed with an internal error instead of waiting for its ack."""
    table = Table(auto_commit=False)
    p1 = table.join("player", name="Ana")
    table.commit()
    table.join("gm", sub="gm-1")  # seq 2, in flight
    table.send(p1, roll("r1"))  # seq 3, in flight behind it
    table.fail_next()  # the GM's join is not stored: the roll behind it is void
    table.join("gm", sub="gm-2")  # seq 2 again
    table.send(p1, roll("r1"))  # the client retries: a new roll at seq 3, the void one still in flight
    void = table.queue.pop(0)
    assert void.last == 3
    table.execute(table.room.failed_append(void, conflict=True))  # the log refuses the void roll
    assert table.send(p1, roll("r1")) == [], "a retry while the new roll is in flight waits for its ack"
    table.commit()
    acks = [f for f in table.replies(p1) if f["t"] == "ack"]
    assert acks == [{"t": "ack", "id": "r1", "seq": 3}] * 2
    assert [r["kind"] for r in table.stored] == ["join", "join", "roll"]
