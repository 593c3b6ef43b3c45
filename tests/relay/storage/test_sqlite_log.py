"""The SQLite event log on real files: dense seqs, expected-seq conflicts, batching, reopening."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from relay.core.info import RoomInfo
from relay.core.state import fold
from relay.storage.base import Conflict, RoomExists, RoomLimitReached
from relay.storage.sqlite.log import SqliteLog


def ev(seq: int, kind: str = "join", who: str = "p1") -> dict[str, Any]:
    member = {"id": who, "name": who.upper(), "role": "player"}
    return {
        "seq": seq,
        "epoch": "e",
        "ts": seq,
        "kind": kind,
        "actor": member,
        "visibility": "public",
        "member": member,
    }


WRITERS = ("loop", "thread", "process")
_writer = {"kind": "thread"}


@pytest.fixture(autouse=True, params=WRITERS)
def writer(request: pytest.FixtureRequest) -> str:
    """Every test runs with the event loop committing, the writer thread, and the writer process
    (relay.storage.sqlite.writer)."""
    _writer["kind"] = request.param
    return str(request.param)


async def make(tmp_path: Path, **kw: Any) -> SqliteLog:
    path = tmp_path / "data" / "tablerelay.sqlite3"
    if _writer["kind"] == "process":
        return await SqliteLog.with_process(path, **kw)
    return SqliteLog(path, on_loop=_writer["kind"] == "loop", **kw)


async def test_rooms_are_created_listed_and_found(tmp_path: Path) -> None:
    log = await make(tmp_path)
    try:
        a = await log.create_room("Alpha", fear_max=12, hope_max=6, max_rooms=2)
        b = await log.create_room("Beta", fear_max=5, hope_max=3, max_rooms=2)
        assert a.id != b.id
        assert a.epoch != b.epoch
        assert len(a.epoch) == 16
        assert await log.get_room(b.id) == b
        assert b.fear_max == 5
        assert await log.get_room("nope") is None
        assert {r.id for r in await log.list_rooms()} == {a.id, b.id}
        with pytest.raises(RoomLimitReached):
            await log.create_room("Gamma", fear_max=12, hope_max=6, max_rooms=2)
    finally:
        await log.close()


async def test_appends_are_dense_and_checked(tmp_path: Path) -> None:
    log = await make(tmp_path)
    try:
        room = (await log.create_room("R", fear_max=12, hope_max=6, max_rooms=10)).id
        assert await log.append(room, [ev(1), ev(2, "leave")], 0) == 2
        assert await log.append(room, [ev(3)], 2) == 3
        with pytest.raises(Conflict) as stale:
            await log.append(room, [ev(3)], 2)
        assert (stale.value.expected, stale.value.actual) == (2, 3)
        with pytest.raises(Conflict):
            await log.append(room, [ev(5)], 4)  # ahead of the log: no gaps either
        got = await log.read(room, 0, 100)
        assert [r["seq"] for r in got] == [1, 2, 3]
        assert got[0] == ev(1), "records round-trip exactly"
        assert [r["seq"] for r in await log.read(room, 1, 1)] == [2]
        state = await log.state(room)
        assert state.seq == 3
        assert set(state.members) == {"p1"}
    finally:
        await log.close()


async def test_racing_writers_for_the_same_seq_exactly_one_wins(tmp_path: Path) -> None:
    log = await make(tmp_path)
    try:
        room = (await log.create_room("R", fear_max=12, hope_max=6, max_rooms=10)).id
        futures = [log.append(room, [ev(1, who=f"p{i}")], 0) for i in range(20)]
        results = await asyncio.gather(*futures, return_exceptions=True)
        assert sum(1 for r in results if r == 1) == 1
        assert sum(1 for r in results if isinstance(r, Conflict)) == 19
        assert len(await log.read(room, 0, 100)) == 1
    finally:
        await log.close()


async def test_a_write_behind_the_writers_back_is_a_conflict_not_a_gap(tmp_path: Path) -> None:
    # The writer keeps each room's last seq instead of reading it per batch; the primary key still
    # catches another connection's rows, and the batch is redone with the seqs read afresh.
    log = await make(tmp_path)
    try:
        rooms = [(await log.create_room(f"R{i}", fear_max=12, hope_max=6, max_rooms=10)).id for i in range(2)]
        for room in rooms:
            assert await log.append(room, [ev(1)], 0) == 1
        other = sqlite3.connect(log.path)
        try:
            other.execute(
                "INSERT INTO events (room, seq, ts, kind, data) VALUES (?, 2, 2, 'leave', x'80')", (rooms[0],)
            )
            other.commit()
        finally:
            other.close()
        stale = log.append(rooms[0], [ev(2, "leave")], 1)
        fine = log.append(rooms[1], [ev(2, "leave")], 1)
        with pytest.raises(Conflict) as conflict:
            await stale
        assert (conflict.value.expected, conflict.value.actual) == (1, 2)
        assert await fine == 2, "the other room's append in the same batch is stored"
        assert await log.append(rooms[0], [ev(3)], 2) == 3
        assert [r["seq"] for r in await log.read(rooms[1], 0, 10)] == [1, 2]
    finally:
        await log.close()


async def test_concurrent_appends_share_commits(tmp_path: Path) -> None:
    log = await make(tmp_path)
    try:
        rooms = [(await log.create_room(f"R{i}", fear_max=12, hope_max=6, max_rooms=10)).id for i in range(4)]
        per_room = 250
        futures: list[asyncio.Future[int]] = []
        # Pipelined like the server does it: each append names the seq before it, without waiting.
        for seq in range(1, per_room + 1):
            for room in rooms:
                futures.append(log.append(room, [ev(seq)], seq - 1))
        order: list[int] = []

        def done(i: int, _f: asyncio.Future[int]) -> None:
            order.append(i)

        for i, f in enumerate(futures):
            f.add_done_callback(functools.partial(done, i))
        results = await asyncio.gather(*futures)
        assert results == [seq for seq in range(1, per_room + 1) for _ in rooms]
        assert order == list(range(len(futures))), "futures complete in the order the appends were made"
        assert log.stats.appends == per_room * len(rooms)
        assert log.stats.transactions < log.stats.appends / 4, "appends were batched into shared commits"
        for room in rooms:
            assert [r["seq"] for r in await log.read(room, 0, 10_000)] == list(range(1, per_room + 1))
    finally:
        await log.close()


async def test_an_append_is_committed_when_acknowledged(tmp_path: Path) -> None:
    log = await make(tmp_path)
    try:
        room = (await log.create_room("R", fear_max=12, hope_max=6, max_rooms=10)).id
        await log.append(room, [ev(1)], 0)
        # Another connection (as another process would) sees it at once.
        other = sqlite3.connect(log.path)
        try:
            assert other.execute("SELECT COUNT(*) FROM events WHERE room = ?", (room,)).fetchone() == (1,)
            assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        finally:
            other.close()
    finally:
        await log.close()


async def test_reopening_rebuilds_the_state(tmp_path: Path) -> None:
    log = await make(tmp_path)
    room = (await log.create_room("R", fear_max=12, hope_max=6, max_rooms=10)).id
    records = [ev(1, who="a"), ev(2, who="b"), ev(3, "leave", who="a")]
    await log.append(room, records, 0)
    await log.close()
    with pytest.raises(RuntimeError):
        log.append(room, [ev(4)], 3)
    again = await make(tmp_path)
    try:
        info = await again.get_room(room)
        assert info is not None
        assert info.name == "R"
        state = await again.state(room)
        assert state == fold(records)
        assert set(state.members) == {"b"}
        assert set(state.participants) == {"a", "b"}
        assert await again.append(room, [ev(4, who="c")], 3) == 4
    finally:
        await again.close()


async def test_close_finishes_queued_appends(tmp_path: Path) -> None:
    log = await make(tmp_path)
    room = (await log.create_room("R", fear_max=12, hope_max=6, max_rooms=10)).id
    futures = [log.append(room, [ev(seq)], seq - 1) for seq in range(1, 101)]
    await log.close()
    assert [f.result() for f in futures] == list(range(1, 101))
    again = await make(tmp_path)
    try:
        assert (await again.state(room)).seq == 100
    finally:
        await again.close()


async def test_full_synchronous_mode_is_accepted(tmp_path: Path) -> None:
    if _writer["kind"] == "loop":
        with pytest.raises(ValueError, match="sqlite_writer = loop needs synchronous = normal"):
            await make(tmp_path, synchronous="full")  # the loop must not wait for the disk
        return
    log = await make(tmp_path, synchronous="full")
    try:
        room = (await log.create_room("R", fear_max=12, hope_max=6, max_rooms=10)).id
        assert await log.append(room, [ev(1)], 0) == 1
    finally:
        await log.close()
    with pytest.raises(ValueError):
        await make(tmp_path, synchronous="sometimes")


async def test_rooms_are_imported_and_deleted_whole(tmp_path: Path) -> None:
    log = await make(tmp_path)
    try:
        made = await log.create_room("Alpha", fear_max=12, hope_max=6, max_rooms=3)
        copy = RoomInfo("c0ffee00c0ffee00", "Copy", "e", 5, 9, 4)
        records = [ev(1), {**ev(2, "leave"), "blob": b"\x00\xff", "ints": {1: "one"}}]
        await log.import_room(copy, records, max_rooms=3)
        assert await log.get_room(copy.id) == copy
        assert await log.read(copy.id, 0, 10) == records, "bytes and integer keys come back as they went"
        with pytest.raises(RoomExists):
            await log.import_room(copy, records, max_rooms=3)
        assert await log.append(copy.id, [ev(3)], 2) == 3
        assert await log.delete_room(copy.id) is True
        assert await log.delete_room(copy.id) is False
        assert await log.get_room(copy.id) is None
        assert [r.id for r in await log.list_rooms()] == [made.id]
    finally:
        await log.close()


async def test_a_rooms_dice_seeds_are_kept_apart_from_its_events_and_the_first_stored_wins(
    tmp_path: Path,
) -> None:
    log = await make(tmp_path)
    try:
        room = await log.create_room("Alpha", fear_max=12, hope_max=6, max_rooms=3)
        first, second = bytes(range(32)), bytes(range(32, 64))
        assert await log.ensure_seed(room.id, 1, first) == first
        assert await log.ensure_seed(room.id, 1, second) == first, "another node's candidate loses"
        assert await log.ensure_seed(room.id, 2, second) == second
        assert await log.seeds(room.id) == {1: first, 2: second}
        assert await log.seeds(room.id, 2) == {2: second}
        assert await log.read(room.id, 0, 10) == [], "no seed is an event"
    finally:
        await log.close()
    log = await make(tmp_path)
    try:
        assert await log.seeds(room.id) == {1: first, 2: second}, "a seed outlives the process"
        assert await log.delete_room(room.id) is True
        assert await log.seeds(room.id) == {}, "a deleted room's seeds go with it"
    finally:
        await log.close()


def reveal(seq: int, of: int) -> dict[str, Any]:
    return {**ev(seq, "reveal"), "of": of, "blob": b"b", "nonce": b"n"}


async def test_reveals_are_indexed_by_the_roll_they_open_also_in_a_file_from_before_the_index(
    tmp_path: Path,
) -> None:
    log = await make(tmp_path)
    room = (await log.create_room("R", fear_max=12, hope_max=6, max_rooms=10)).id
    other = (await log.create_room("S", fear_max=12, hope_max=6, max_rooms=10)).id
    # What the index holds is all it reads: a reveal's ``of`` need not be a real roll here.
    await log.append(room, [ev(1), ev(2, who="b"), reveal(3, 2), ev(4, who="c"), reveal(5, 1)], 0)
    await log.append(other, [ev(1), reveal(2, 1)], 0)
    assert await log.reveals(room, 0, 5) == {1: 5, 2: 3}
    assert await log.reveals(room, 1, 5) == {2: 3}
    assert await log.reveals(room, 2, 5) == {}
    assert await log.reveals(other, 0, 2) == {1: 2}
    await log.close()
    # A file written before the index: no table, user_version 0. Opening it fills the index once.
    path = tmp_path / "data" / "tablerelay.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE reveals")
        conn.execute("PRAGMA user_version = 0")
    again = await make(tmp_path)
    try:
        assert await again.reveals(room, 0, 5) == {1: 5, 2: 3}
        assert await again.reveals(other, 0, 5) == {1: 2}
        assert await again.delete_room(other)
        assert await again.reveals(other, 0, 5) == {}
    finally:
        await again.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (1,)
        assert conn.execute("SELECT COUNT(*) FROM reveals").fetchone() == (2,), (
            "the other room's went with it"
        )


async def test_a_file_with_events_clustered_by_room_is_moved_to_the_layout_by_arrival_once(
    tmp_path: Path,
) -> None:
    log = await make(tmp_path)
    room = (await log.create_room("R", fear_max=12, hope_max=6, max_rooms=10)).id
    other = (await log.create_room("S", fear_max=12, hope_max=6, max_rooms=10)).id
    await log.append(room, [ev(1), ev(2, who="b"), reveal(3, 2)], 0)
    await log.append(other, [ev(1)], 0)
    await log.append(room, [ev(4, who="c")], 3)
    before = await log.read(room, 0, 100)
    await log.close()
    # The same rows in the layout files had before: clustered by (room, seq), WITHOUT ROWID.
    path = tmp_path / "data" / "tablerelay.sqlite3"
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT room, seq, ts, kind, data FROM events ORDER BY id").fetchall()
        conn.execute("DROP TABLE events")
        conn.execute(
            "CREATE TABLE events (room TEXT NOT NULL, seq INTEGER NOT NULL, ts INTEGER NOT NULL, "
            "kind TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (room, seq)) WITHOUT ROWID"
        )
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", rows)
    again = await make(tmp_path)
    try:
        assert await again.read(room, 0, 100) == before, "every record as it was"
        assert (await again.state(other)).seq == 1
        assert await again.reveals(room, 0, 4) == {2: 3}
        assert await again.append(room, [ev(5)], 4) == 5
        with pytest.raises(Conflict):
            await again.append(other, [ev(1)], 0)
        assert await again.append(other, [ev(2)], 1) == 2
    finally:
        await again.close()
    with sqlite3.connect(path) as conn:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'events'").fetchone()
        assert "WITHOUT ROWID" not in sql.upper()
        assert "events_by_arrival" not in sql
        moved = conn.execute("SELECT room, seq, ts, kind, data FROM events ORDER BY id LIMIT 5").fetchall()
        assert moved == sorted(rows), "moved in (room, seq) order, so each room's old events stay together"
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("INSERT INTO events (room, seq, ts, kind, data) VALUES (?, 1, 0, '', x'')", (room,))
