"""The room and its log without sockets: retries of a roll answered once, appends that fail and what they
void, the state as a fold of the stored events, and the records kept in memory for welcomes."""

from __future__ import annotations

import pytest

from relay.settings.config import Limits
from tests.relay.core.test_room import four, roll
from tests.relay.helpers import Table, scripted


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
