"""The events table's two layouts in SQLite alone: clustered by (room, seq) (``WITHOUT ROWID``, the layout
before) against rows by arrival with a unique (room, seq) index (``relay.storage.sqlite.db.EVENTS``), taking
turns.

    python -m bench.studies.sqlite_layout [--rooms 1000] [--events 20] [--rounds 2]

Each turn fills a fresh file (WAL, synchronous = normal, as the server runs it) with ``--events`` events of
600 bytes in each of ``--rooms`` rooms, then times 1,000 transactions of 30 appends to rooms drawn at random
(the many-tables shape: one row per room per commit), with a checkpoint every 1,000 rows as the server
makes, and then reads of a room's first 100 events for 200 rooms. Printed: CPU per appended row, the WAL
written, CPU per read.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from relay.storage.sqlite.db import EVENTS

CLUSTERED = (
    "CREATE TABLE events (room TEXT NOT NULL, seq INTEGER NOT NULL, ts INTEGER NOT NULL, kind TEXT NOT NULL, "
    "data BLOB NOT NULL, PRIMARY KEY (room, seq)) WITHOUT ROWID"
)
LAYOUTS = {"clustered": CLUSTERED, "by arrival": EVENTS.format(name="events")}
PER_COMMIT = 30
COMMITS = 1000


def turn(schema: str, rooms: int, events: int, folder: Path) -> tuple[float, float, float]:
    """(CPU µs per appended row, MB of WAL, CPU µs per read of 100 events)."""
    conn = sqlite3.connect(folder / f"{time.monotonic_ns()}.sqlite3", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute(schema)
    names = [os.urandom(8).hex() for _ in range(rooms)]
    seqs = dict.fromkeys(names, 0)
    data = os.urandom(600)
    draw = random.Random(1)

    def append(batch: list[str]) -> None:
        rows = []
        for room in batch:
            seqs[room] += 1
            rows.append((room, seqs[room], 0, "roll", data))
        values = ", ".join(["(?, ?, ?, ?, ?)"] * len(rows))
        conn.execute(
            f"INSERT INTO events (room, seq, ts, kind, data) VALUES {values}",
            [value for row in rows for value in row],
        )

    for _ in range(events):
        for start in range(0, rooms, 500):
            append(names[start : start + 500])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = Path(conn.execute("PRAGMA database_list").fetchone()[2] + "-wal")
    cpu = time.process_time()
    written = 0
    for index in range(COMMITS):
        append(draw.sample(names, PER_COMMIT))
        if (index + 1) % 33 == 0:  # every 990 rows: about the server's 1,000
            written += wal.stat().st_size
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    appending = (time.process_time() - cpu) / (COMMITS * PER_COMMIT) * 1e6
    written += wal.stat().st_size
    cpu = time.process_time()
    for room in draw.sample(names, 200):
        conn.execute(
            "SELECT data FROM events WHERE room = ? AND seq > 0 ORDER BY seq LIMIT 100", (room,)
        ).fetchall()
    reading = (time.process_time() - cpu) / 200 * 1e6
    conn.close()
    return appending, written / 1e6, reading


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rooms", type=int, default=1000)
    parser.add_argument("--events", type=int, default=20, help="events per room before the timed appends")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in LAYOUTS}
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(args.rounds):
            order = list(LAYOUTS) if index % 2 == 0 else list(LAYOUTS)[::-1]
            for name in order:
                results[name].append(turn(LAYOUTS[name], args.rooms, args.events, Path(scratch)))
    medians = {}
    for name, turns in results.items():
        medians[name] = [statistics.median(t[i] for t in turns) for i in range(3)]
        append, wal, read = medians[name]
        print(
            f"{name:>10}: {append:.1f} µs of CPU per appended row, {wal:.1f} MB of WAL, "
            f"{read:.0f} µs per read of a room's events"
        )
    new, old = medians["by arrival"], medians["clustered"]
    print(
        f"by arrival ÷ clustered: appends {new[0] / old[0]:.2f}×, WAL {new[1] / old[1]:.2f}×, "
        f"reads {new[2] / old[2]:.2f}×"
    )


if __name__ == "__main__":
    main()
