"""Campaign management in the sans-I/O room: folds, refusals, effects, and that no new event leaks a
hidden value (relay.core.membership, relay.core.state)."""

from __future__ import annotations

import msgpack
import pytest

from relay.core import protocol
from relay.core.actions import Refused
from relay.core.claims import Claims
from relay.core.membership import CloseParticipant, Retitle, SendInvites
from relay.core.state import CAMPAIGN_FIELDS, fold
from tests.relay.helpers import INFO, KEYRING, Table


def test_merge_folds_hope_with_the_cap_aliases_and_moves_hidden_rolls() -> None:
    table = Table()
    gm = table.join("gm", sub="gm-1", name="GM")
    aria = table.join("player", name="Aria")
    stale = table.join("player", name="Aria again")
    table.send(
        gm, {"t": "resource", "id": "h1", "name": "hope", "op": "gain", "n": 5, "participant": aria.id}
    )
    table.send(
        gm, {"t": "resource", "id": "h2", "name": "hope", "op": "gain", "n": 4, "participant": stale.id}
    )
    rolled = table.send(
        stale,
        {
            "t": "roll",
            "id": "s1",
            "intent": {"system": "dice", "formula": "1d20"},
            "visibility": "self",
            "label": "Mine",
        },
    )
    hidden = rolled[0]["seq"]
    actions = table.room.handle(
        gm, _frame({"t": "merge", "id": "m1", "participant": stale.id, "into": aria.id})
    )
    table.execute(actions)
    pending = table.queue[0]
    table.commit()
    (effect,) = pending.effects
    assert isinstance(effect, CloseParticipant)
    assert (effect.participant, effect.code) == (stale.id, protocol.CLOSE_MERGED)
    assert "Aria" in effect.reason
    state = table.room.committed
    assert state.hope == {aria.id: 6}, "5 + 4 stops at the cap"
    assert state.identity(stale.id) == aria.id
    assert stale.id not in state.participants
    assert state.sealed[hidden].roller == aria.id
    assert table.refold().hope == state.hope, "the stored log folds to the same state"
    # Aria (on another socket) may now reveal the roll her merged self made, and sees it in full.
    reply = table.send(aria, {"t": "reveal", "id": "r1", "seq": hidden})
    assert reply[0]["t"] == "ack"
    # The merged participant's token joins as Aria.
    session, _ = table.room.admit(Claims(INFO.id, "player", stale.id, None, None), None, frozenset())
    assert session.id == aria.id


def test_kick_revokes_every_token_of_the_participant_and_rotation_voids_old_invites() -> None:
    table = Table()
    gm = table.join("gm", sub="gm-1")
    bo = table.join("player", name="Bo")
    table.send(gm, {"t": "kick", "id": "k1", "participant": bo.id, "reason": "Gone"})
    assert bo.id not in table.room.committed.members
    assert bo.id not in table.room.committed.hope
    with pytest.raises(Refused) as info:
        table.room.admit(Claims(INFO.id, "player", bo.id, None, None), None, frozenset())
    assert info.value.code == protocol.CLOSE_REVOKED
    again = table.send(gm, {"t": "kick", "id": "k2", "participant": bo.id})
    assert again[-1]["code"] == "removed"
    own = table.send(gm, {"t": "kick", "id": "k3", "participant": gm.id})
    assert own[-1]["code"] == "forbidden"

    actions = table.room.handle(gm, _frame({"t": "invites", "id": "i1", "rotate": True}))
    table.execute(actions)
    pending = table.queue[0]
    table.commit()
    assert pending.effects == (SendInvites(gm, "i1", 1, pending.records[0]["seq"]),)
    for generation in (0, 2):
        with pytest.raises(Refused):
            table.room.admit(
                Claims(INFO.id, "spectator", None, None, None, invites=generation), None, frozenset()
            )
    fresh, _ = table.room.admit(Claims(INFO.id, "spectator", None, None, None, invites=1), None, frozenset())
    assert fresh.role == "spectator"


def test_rename_retitles_live_sessions_and_archive_makes_the_room_read_only() -> None:
    table = Table()
    gm = table.join("gm", sub="gm-1")
    p = table.join("player", name="Player 1")
    actions = table.room.handle(gm, _frame({"t": "rename", "id": "n1", "participant": p.id, "name": "Aria"}))
    table.execute(actions)
    pending = table.queue[0]
    table.commit()
    assert pending.effects == (Retitle(table.room.committed.participants[p.id]),)
    assert table.room.committed.participants[p.id].name == "Aria"

    table.send(gm, {"t": "archive", "id": "a1"})
    state = table.room.committed
    assert state.archived
    assert state.members == {}
    seq = state.seq
    for frame in (
        {"t": "roll", "id": "x", "intent": {"system": "dice", "formula": "1d6"}, "visibility": "public"},
        {"t": "resource", "id": "y", "name": "fear", "op": "gain", "n": 1},
        {"t": "rename", "id": "z", "participant": p.id, "name": "B"},
    ):
        reply = table.send(gm, frame)
        assert reply[-1]["code"] == "archived"
    late = table.join("player", name="Late")
    table.leave(late)
    table.leave(p)
    assert table.room.committed.seq == seq, "nothing is stored after the archive, joins and leaves included"
    assert table.room.sweep() is None


def test_players_and_spectators_may_not_manage() -> None:
    table = Table()
    p = table.join("player", name="P")
    s = table.join("spectator")
    for session in (p, s):
        for data in (
            {"t": "rename", "id": "a", "participant": p.id, "name": "X"},
            {"t": "kick", "id": "b", "participant": s.id},
            {"t": "invites", "id": "c"},
            {"t": "archive", "id": "d"},
        ):
            assert table.send(session, data)[-1]["code"] == "forbidden"


def test_campaign_events_carry_no_hidden_value_and_sign_like_the_rest() -> None:
    table = Table()
    gm = table.join("gm", sub="gm-1")
    p = table.join("player", name="P")
    q = table.join("player", name="Q")
    secret = table.send(
        gm,
        {
            "t": "roll",
            "id": "s",
            "intent": {"system": "dice", "formula": "1d100"},
            "visibility": "blind",
            "label": "Ambush",
        },
    )
    assert secret[0]["t"] == "ack"
    for data in (
        {"t": "rename", "id": "1", "participant": p.id, "name": "Pia"},
        {"t": "merge", "id": "2", "participant": q.id, "into": p.id},
        {"t": "kick", "id": "3", "participant": p.id},
        {"t": "invites", "id": "4", "rotate": True},
        {"t": "archive", "id": "5"},
    ):
        table.send(gm, data)
    state = fold(table.stored)
    hidden = state.sealed[secret[0]["seq"]]
    kinds = {r["kind"] for r in table.stored}
    assert set(CAMPAIGN_FIELDS) <= kinds
    for record in table.stored:
        if record["kind"] not in CAMPAIGN_FIELDS:
            continue
        packed = msgpack.packb(record, use_bin_type=True)
        for value in (hidden.nonce, b"Ambush", hidden.blob):
            assert value not in packed
        frame = table.forms.frame(record, "full", state)
        assert set(frame) == {
            "t",
            "seq",
            "epoch",
            "ts",
            "kind",
            "actor",
            "visibility",
            *CAMPAIGN_FIELDS[record["kind"]],
            "kid",
            "sig",
        }
        from relay.trust.signing import verify

        assert verify(frame, INFO.id, KEYRING.jwks())


def _frame(data: dict[str, object]) -> protocol.Frame:
    from tests.relay.helpers import frame

    return frame(data)


def _hope(participant: str, op: str, n: int, rid: str) -> dict[str, object]:
    return {"t": "resource", "id": rid, "name": "hope", "op": op, "n": n, "participant": participant}


def test_nothing_names_a_removed_participant_after_the_kick() -> None:
    table = Table()
    gm = table.join("gm", sub="gm-1", name="GM")
    bo = table.join("player", name="Bo")
    cy = table.join("player", name="Cy")
    table.send(gm, _hope(bo.id, "gain", 2, "h0"))
    table.send(gm, {"t": "kick", "id": "k1", "participant": bo.id})
    stored = len(table.stored)
    refused: dict[str, dict[str, object]] = {
        "h1": _hope(bo.id, "gain", 1, "h1"),
        "h2": _hope(bo.id, "set", 3, "h2"),
        "h3": _hope(bo.id, "spend", 0, "h3"),
        "n1": {"t": "rename", "id": "n1", "participant": bo.id, "name": "Robert"},
        "m1": {"t": "merge", "id": "m1", "participant": bo.id, "into": cy.id},
        "m2": {"t": "merge", "id": "m2", "participant": cy.id, "into": bo.id},
        "k2": {"t": "kick", "id": "k2", "participant": bo.id},
    }
    for rid, data in refused.items():
        (reply,) = table.send(gm, data)
        assert (reply["t"], reply["id"], reply["code"]) == ("error", rid, "removed"), reply
        assert reply["message"] == "Bo was removed from this room by the GM.", reply
    assert len(table.stored) == stored, "nothing was stored for a removed participant"
    assert bo.id not in table.room.committed.hope


def test_a_removed_or_merged_session_cannot_act_before_its_socket_closes() -> None:
    # The kick is appended but not yet stored: the sockets of the one removed are still open.
    table = Table(auto_commit=False)
    gm = table.join("gm", sub="gm-1", name="GM")
    bo = table.join("player", name="Bo")
    aria = table.join("player", name="Aria")
    stale = table.join("player", name="Aria again")
    table.commit()
    table.send(gm, {"t": "kick", "id": "k1", "participant": bo.id})
    table.send(gm, {"t": "merge", "id": "m1", "participant": stale.id, "into": aria.id})
    roll = {"t": "roll", "id": "x1", "intent": {"system": "daggerheart.duality"}, "visibility": "public"}
    spend = {"t": "resource", "id": "x2", "name": "hope", "op": "spend", "n": 0}
    for session, message in (
        (bo, "The GM removed you from this room."),
        (stale, "The GM merged you into Aria: reconnect to go on as them."),
    ):
        for data in (roll, spend):
            (reply,) = table.send(session, data)
            assert (reply["code"], reply["message"]) == ("removed", message), reply
        assert table.send(session, {"t": "ping", "id": "p"}) == [{"t": "pong", "id": "p"}]
    table.commit()
    actors = [r["actor"]["id"] for r in table.stored]
    assert actors[-2:] == [gm.id, gm.id], "the kick and the merge are the last events stored"
    assert table.room.committed.hope == {aria.id: 0}, "no Hope entry comes back for either"


def test_the_surviving_participant_answers_retries_of_the_merged_ones_rolls() -> None:
    table = Table()
    gm = table.join("gm", sub="gm-1", name="GM")
    aria = table.join("player", name="Aria")
    stale = table.join("player", name="Aria again")
    roll = {
        "t": "roll",
        "id": "phone-1",
        "intent": {"system": "dice", "formula": "1d6"},
        "visibility": "public",
    }
    first = table.send(stale, roll)[0]
    assert first["t"] == "ack"
    table.send(gm, {"t": "merge", "id": "m1", "participant": stale.id, "into": aria.id})
    back, join = table.room.admit(Claims(INFO.id, "player", stale.id, None, None), None, frozenset())
    assert back.id == aria.id
    assert join is None
    table.sessions.append(back)
    stored = len(table.stored)
    (again,) = table.send(back, roll)
    assert again == {"t": "ack", "id": "phone-1", "seq": first["seq"]}, "the retry is the same roll"
    assert len(table.stored) == stored, "nothing new was rolled"
    # In the fold: a restarted server (or another node) reading the same log answers the same.
    assert table.refold().roll_seq(aria.id, "phone-1") == first["seq"]
    assert table.refold().rolls == table.room.committed.rolls
    assert stale.id not in table.room.committed.rolls


def test_merged_roll_ids_keep_the_newest_and_the_survivors_own_on_a_clash() -> None:
    from relay.core.state import ROLL_IDS_KEPT, RoomState

    def at(seq: int) -> tuple[int, int]:
        """A roll id's entry as the fold keeps it: the roll's seq and its event's ts (ms)."""
        return seq, 1_700_000_000_000 + 10 * seq

    state = RoomState(
        seq=3000,
        rolls={
            "gone": {f"g{i}": at(i) for i in range(1, 1001)} | {"same": at(1001)},
            "into": {f"i{i}": at(1500 + i) for i in range(1, 1001)} | {"same": at(2600)},
        },
    )
    member = {"id": "gone", "name": "G", "role": "player"}
    state.apply(
        {"seq": 3001, "kind": "merge", "merged": member, "into": {**member, "id": "into"}, "hope": None}
    )
    ids = state.rolls["into"]
    assert len(ids) == ROLL_IDS_KEPT
    assert ids["same"] == at(2600), "an id both used stays the survivor's"
    assert "g1" not in ids, "the oldest are the ones let go"
    assert ids["g1000"] == at(1000)
    assert list(ids.values()) == sorted(ids.values()), "oldest first, as the fold drops them"
    assert "gone" not in state.rolls


def test_a_rotation_the_log_fails_to_store_is_answered_with_an_error() -> None:
    table = Table(auto_commit=False)
    gm = table.join("gm", sub="gm-1", name="GM")
    table.commit()
    table.execute(table.room.handle(gm, _frame({"t": "invites", "id": "i1", "rotate": True})))
    table.fail_next()
    (reply,) = table.replies(gm)
    assert (reply["t"], reply["id"], reply["code"]) == ("error", "i1", "internal"), reply
    assert table.room.pending.invites == 0, "the old invites stay valid"
    table.execute(table.room.handle(gm, _frame({"t": "invites", "id": "i2", "rotate": True})))
    table.commit()
    assert table.replies(gm)[1:] == [], "a stored rotation is answered by the invites frame, not an ack"
    assert table.room.committed.invites == 1
