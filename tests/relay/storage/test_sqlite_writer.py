"""The SQLite writer process (``sqlite_writer = "process"``) when things go wrong: its own tests.

Everything it shares with the writer thread (dense seqs, conflicts, batching, close) runs against both in
tests/relay/storage/test_sqlite_log.py.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from relay.storage.sqlite.log import SqliteLog
from relay.storage.sqlite.writer import WriterGone, WriterUnusable
from tests.console import serve_refusal
from tests.e2e.servers import server_env
from tests.relay.storage.test_sqlite_log import ev


async def test_a_writer_process_that_dies_fails_every_append_and_acks_none(tmp_path: Path) -> None:
    log = await SqliteLog.with_process(tmp_path / "data" / "tablerelay.sqlite3")
    try:
        room = (await log.create_room("R", fear_max=12, hope_max=6, max_rooms=10)).id
        assert await log.append(room, [ev(1)], 0) == 1
        child = log._process
        assert child is not None
        in_flight = log.append(room, [ev(2)], 1)  # written to the pipe at the end of this iteration
        os.kill(child.pid, signal.SIGKILL)  # before the child can read it
        with pytest.raises(WriterGone):
            await in_flight
        await child._exited
        await child._ended  # the end of its answers' pipe
        with pytest.raises(RuntimeError, match="writer process has ended"):
            log.append(room, [ev(2)], 1)
        with pytest.raises(RuntimeError):
            await log.create_room("S", fear_max=12, hope_max=6, max_rooms=10)
        assert [r["seq"] for r in await log.read(room, 0, 10)] == [1], "reads still work; nothing else stored"
    finally:
        await log.close()


async def test_a_writer_process_that_cannot_open_the_file_says_so(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(WriterUnusable, match=r"could not open the database: .*Not a directory"):
        await SqliteLog.with_process(blocker / "data" / "tablerelay.sqlite3")


def test_serve_refuses_an_unknown_writer_with_one_sentence(tmp_path: Path) -> None:
    env = server_env("s" * 32, {"TABLERELAY_SQLITE_WRITER": "fork"})
    line = serve_refusal(tmp_path, env)
    assert line == "tablerelay: sqlite_writer must be auto, loop, thread or process; got 'fork'.", line


def test_serve_refuses_commits_on_the_loop_that_would_wait_for_the_disk(tmp_path: Path) -> None:
    env = server_env("s" * 32, {"TABLERELAY_SQLITE_WRITER": "loop", "TABLERELAY_SYNCHRONOUS": "full"})
    line = serve_refusal(tmp_path, env)
    assert line == (
        "tablerelay: sqlite_writer = loop needs synchronous = normal: a commit that waits for the disk "
        "would stop every table (synchronous is 'full'; use thread or process)."
    ), line


def test_serve_refuses_an_unsafe_synchronous_with_one_sentence(tmp_path: Path) -> None:
    line = serve_refusal(tmp_path, server_env("s" * 32, {"TABLERELAY_SYNCHRONOUS": "off"}))
    assert line == "tablerelay: synchronous must be one of normal, full, extra; got 'off'.", line
