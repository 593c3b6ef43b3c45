"""The room state machine without sockets: audiences, commitments, reveals, admission, resume, errors."""

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
from tests.relay.helpers import INFO, Table, frame, scripted

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
