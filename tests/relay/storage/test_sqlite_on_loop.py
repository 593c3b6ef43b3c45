"""The event loop committing to SQLite itself (``sqlite_writer = "loop"``, the default): what it hands to
the writer thread, and that it never waits for another connection's lock or for a checkpoint."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from relay.storage.base import Conflict
from relay.storage.sqlite.db import append_sync, connect
from relay.storage.sqlite.log import CHECKPOINT_ROWS, SqliteLog

from .test_sqlite_log import ev, reveal


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "tablerelay.sqlite3"


async def _ticks_while(futures: list[asyncio.Future[Any]], seconds: float) -> int:
    """Loop iterations run while ``futures`` wait for ``seconds``: the loop was free if many ran."""
    ticks = 0
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.001)
        ticks += 1
        assert not any(f.done() for f in futures), "an append completed while another held the lock"
    return ticks


async def test_a_held_lock_sends_appends_to_the_thread_in_order_and_the_loop_runs_on(path: Path) -> None:
    log = SqliteLog(path, on_loop=True)
    try:
        room = (await log.create_room("R", fear_max=12, hope_max=6, max_rooms=10)).id
        assert await log.append(room, [ev(1)], 0) == 1  # committed by the loop
        other = connect(path)
        other.execute("BEGIN IMMEDIATE")  # another process's write transaction, say a CLI import
        try:
            first = log.append(room, [ev(2)], 1)
            await asyncio.sleep(0)
            second = log.append(room, [ev(3), reveal(4, 2)], 2)  # a later iteration: waits its turn
            ticks = await _ticks_while([first, second], 0.3)
            assert ticks > 20, f"the event loop ran only {ticks} times in 0.3 s while the lock was held"
        finally:
            other.execute("COMMIT")
            other.close()
        assert await first == 2
        assert await second == 4
        # Back on the loop afterwards: the thread is not behind any more.
        assert await log.append(room, [ev(5)], 4) == 5
        assert [r["seq"] for r in await log.read(room, 0, 10)] == [1, 2, 3, 4, 5]
        assert await log.reveals(room, 0, 5) == {2: 4}
    finally:
        await log.close()


async def test_a_write_behind_the_servers_back_is_a_conflict_not_a_gap(path: Path) -> None:
    log = SqliteLog(path, on_loop=True)
    try:
        room = (await log.create_room("R", fear_max=12, hope_max=6, max_rooms=10)).id
        assert await log.append(room, [ev(1)], 0) == 1
        with contextlib.closing(connect(path)) as cli:  # e.g. tablerelay room archive
            append_sync(cli, room, [ev(2, "leave")], 1)
        with pytest.raises(Conflict) as stale:
            await log.append(room, [ev(2)], 1)
        assert (stale.value.expected, stale.value.actual) == (1, 2)
        assert await log.append(room, [ev(3)], 2) == 3
        got = await log.read(room, 0, 10)
        assert [(r["seq"], r["kind"]) for r in got] == [(1, "join"), (2, "leave"), (3, "join")]
    finally:
        await log.close()


async def test_the_thread_checkpoints_so_the_wal_stays_bounded(path: Path) -> None:
    log = SqliteLog(path, on_loop=True)
    try:
        rooms = [(await log.create_room(f"R{i}", fear_max=9, hope_max=6, max_rooms=50)).id for i in range(40)]
        seqs = dict.fromkeys(rooms, 0)
        rows = 0
        while rows < 8 * CHECKPOINT_ROWS:
            # One commit per loop iteration, each touching a few rooms' pages, as small tables do.
            pending = []
            for room in rooms[rows % 40 : rows % 40 + 4]:
                seqs[room] += 1
                pending.append(log.append(room, [ev(seqs[room])], seqs[room] - 1))
            await asyncio.gather(*pending)
            rows += len(pending)
        wal = path.with_name(path.name + "-wal").stat().st_size
        # One checkpoint cycle (1,000 rows, 250 commits of 4+ pages) writes some 8 MiB; without the
        # checkpoints every commit's pages stay (61 MiB when this test was written).
        assert wal < 16 * 2**20, f"the WAL grew to {wal / 2**20:.1f} MiB"
        for room in rooms:
            assert (await log.state(room)).seq == seqs[room]
    finally:
        await log.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM events").fetchone() == (rows,)


@pytest.mark.parametrize("on_loop", [True, False])
async def test_a_batch_of_more_rows_than_one_insert_is_stored_whole_or_not_at_all(
    path: Path, on_loop: bool
) -> None:
    log = SqliteLog(path, on_loop=on_loop)
    try:
        room = (await log.create_room("R", fear_max=12, hope_max=6, max_rooms=10)).id
        other = (await log.create_room("S", fear_max=12, hope_max=6, max_rooms=10)).id
        assert await log.append(room, [ev(1)], 0) == 1  # both rooms' seqs known to the committer
        assert await log.append(other, [ev(1)], 0) == 1
        with contextlib.closing(connect(path)) as cli:  # takes seq 2 of ``other`` behind its back
            append_sync(cli, other, [ev(2, "leave")], 1)
        # One batch: 600 rows for ``room`` (two INSERT statements' worth), then a stale append to
        # ``other`` whose seq is taken. Split outside a transaction, the first 500 rows would be stored
        # with the batch reported failed; whole, the stale append alone fails.
        big = log.append(room, [ev(seq) for seq in range(2, 602)], 1)
        stale = log.append(other, [ev(2)], 1)
        assert await big == 601
        with pytest.raises(Conflict):
            await stale
        assert [r["seq"] for r in await log.read(room, 0, 1000)] == list(range(1, 602))
    finally:
        await log.close()


async def test_closing_commits_what_the_loop_holds(path: Path) -> None:
    log = SqliteLog(path, on_loop=True)
    room = (await log.create_room("R", fear_max=12, hope_max=6, max_rooms=10)).id
    futures = [log.append(room, [ev(seq)], seq - 1) for seq in range(1, 51)]
    await log.close()
    assert [f.result() for f in futures] == list(range(1, 51))
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT MAX(seq) FROM events").fetchone() == (50,)
