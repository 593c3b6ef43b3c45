"""A full database (SQLITE_FULL) fails only the batch it hit, as ``StoreFull``, leaves the connection usable
and out of any transaction, and the next batch is stored once there is room again. A page limit stands in
for the disk here (``PRAGMA max_page_count``); tests/e2e/lifecycle/test_full_disk.py fills a real one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from relay.storage.base import StoreFull
from relay.storage.sqlite.commit import AppendItem, Committer, full_disk
from relay.storage.sqlite.db import connect, create_room_sync

from .test_sqlite_log import ev

PAD = "x" * 3000  # a record of most of a page, so a few fill what is left


def _padded(seq: int) -> dict[str, object]:
    return {**ev(seq), "label": PAD}


@pytest.mark.parametrize("remembers", [True, False])  # one INSERT on its own, or BEGIN IMMEDIATE … COMMIT
def test_a_full_database_fails_the_batch_and_the_next_one_is_stored(tmp_path: Path, remembers: bool) -> None:
    conn = connect(tmp_path / "t.sqlite3")
    room = create_room_sync(conn, "R", fear_max=12, hope_max=6, max_rooms=10).id
    committer = Committer(conn, lambda _batch, _written: None, remembers=remembers)
    [first] = committer.process([AppendItem(room, [_padded(1)], 0)])
    assert (first.value, first.error) == (1, None)
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    outcomes = committer.process([AppendItem(room, [_padded(2), _padded(3), _padded(4)], 1)])
    assert [type(o.error) for o in outcomes] == [StoreFull]
    assert "full" in str(outcomes[0].error)
    assert not conn.in_transaction
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert conn.execute("SELECT max(seq) FROM events WHERE room = ?", (room,)).fetchone() == (1,)
    conn.execute(f"PRAGMA max_page_count = {pages * 100}")  # space again
    [again] = committer.process([AppendItem(room, [_padded(2), _padded(3)], 1)])
    assert (again.value, again.error) == (3, None)
    conn.close()


def test_only_a_full_disk_is_taken_for_a_full_store(tmp_path: Path) -> None:
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13
    assert isinstance(full_disk(full, str(tmp_path)), StoreFull)
    io = sqlite3.OperationalError("disk I/O error")
    io.sqlite_errorcode = 10 | (3 << 8)  # SQLITE_IOERR_WRITE
    assert full_disk(io, str(tmp_path)) is None  # this folder has room: a real I/O error
    locked = sqlite3.OperationalError("database is locked")
    locked.sqlite_errorcode = 5
    assert full_disk(locked, str(tmp_path)) is None
    assert full_disk(ValueError("no"), str(tmp_path)) is None
