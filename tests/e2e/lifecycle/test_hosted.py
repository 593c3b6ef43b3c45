"""A hosted relay's day, CI-sized: a hundred tables of six real JS clients rolling, a restart under them.

The benchmark's own harness (``bench/sections/hosted.py``, ``bench/receivers/hosted.mjs``) at a size a
test run can afford: every member a ``TableRelay`` of ``clients/js`` in Node, bound to a source address of
its own in 127.0.0.0/8; the relay is stopped with SIGTERM while tables roll and started again on the same
port and data folder; every client reconnects with the client's backoff and resumes. Asserted: counts
only (every client back, no event lost or delivered twice against the room's log, every acknowledged roll
stored exactly once, a roll in flight at the close stored once), never a time.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.sections import hosted

ROOT = Path(__file__).resolve().parents[3]
TABLES = 100  # 600 sockets
pytestmark = pytest.mark.slow


async def test_a_restart_under_a_hundred_tables_loses_and_repeats_nothing(tmp_path: Path) -> None:
    assert shutil.which("node"), "the hosted harness runs on Node 20+"
    for folder in ("bench/receivers", "clients/js"):
        assert (ROOT / folder / "node_modules").is_dir(), f"run `npm ci --prefix {folder}` first"
    # Each table acts about once a second: rolls are in flight when the SIGTERM lands.
    run = await hosted.relay_run(tmp_path, tables=TABLES, seconds=6, after_s=3, mean_s=1.0)
    clients = TABLES * hosted.MEMBERS
    assert run["clients"] == clients
    restart, check = run["restart"], run["check"]
    assert restart["clients"] == clients, "every client welcomed again by the new process"
    assert run["pending_at_end"] == 0, "every request answered once the rolling stopped"
    assert check["clients"] == clients
    assert check["lost"] == 0, check["examples"]
    assert check["clients_missing_events"] == 0
    assert check["duplicates"] == 0
    assert check["rolls_acked"] > 0
    assert check["rolls_stored"] == check["rolls_acked"], "each acknowledged roll stored exactly once"
    assert check["rolls_stored_beyond_acked"] == 0
    assert check["rolls_acked_not_stored"] == 0
    assert check["inflight_acked"] == check["inflight_retried"], (
        "rolls in flight at the close retried and acked"
    )
    assert set(check["errors"]) <= {"disconnected", "insufficient"}, check["errors"]
