"""The SQLite file itself: its schema, opening it (``connect``, which moves an old file's layout over once),
the checks of its settings, and every synchronous read and write on a connection (the ``*_sync``
functions, used by the log's reader threads, its committers and the command line).
"""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from relay.core.info import RoomInfo
from relay.core.state import RoomState
from relay.settings.logs import get_logger
from relay.storage.base import Conflict, Record, RoomExists, RoomLimitReached, witness_into
from relay.storage.codec import decode_record, encode_record

logger = get_logger("relay.sqlite")

# Events in the order they arrived (a rowid), found by (room, seq) through the unique index. Rows of a few
# hundred bytes clustered by (room, seq) (``WITHOUT ROWID``, the layout before) made every append to a
# small room an insert into the middle of the tree: its leaf split and rebalanced with its siblings, about
# three times the CPU and twice the WAL of an append at the table's end (docs/deployment.md, "The data
# folder"). ``connect`` moves a file of the old layout over once.
EVENTS = """CREATE TABLE IF NOT EXISTS {name} (
    id INTEGER PRIMARY KEY,
    room TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (room, seq)
);"""

SCHEMA = """
CREATE TABLE IF NOT EXISTS rooms (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    epoch TEXT NOT NULL,
    created INTEGER NOT NULL,
    fear_max INTEGER NOT NULL,
    hope_max INTEGER NOT NULL
);
{events}
CREATE TABLE IF NOT EXISTS reveals (
    room TEXT NOT NULL,
    roll INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (room, roll)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS seeds (
    room TEXT NOT NULL,
    n INTEGER NOT NULL,
    seed BLOB NOT NULL,
    PRIMARY KEY (room, n)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pendings (
    room TEXT NOT NULL,
    pending INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (room, pending)
) WITHOUT ROWID;
""".format(events=EVENTS.format(name="events"))
#: ``PRAGMA user_version`` once ``reveals`` indexes every stored reveal (files written before it had
#: none: ``connect`` fills it from their events once).
REVEALS_INDEXED = 1
SYNCHRONOUS = ("normal", "full", "extra")  # "off" could corrupt the file on power loss
READ_CHUNK = 5000
#: Rows per INSERT statement (5 parameters each, well under SQLite's 32,766 host parameters).
INSERT_ROWS = 500


def check_synchronous(synchronous: str) -> None:
    """Refuse a ``synchronous`` setting SQLite should not run with (``ValueError``, one sentence)."""
    if synchronous not in SYNCHRONOUS:
        raise ValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS)}; got {synchronous!r}")


def check_on_loop(synchronous: str) -> None:
    """Refuse commits on the event loop with a ``synchronous`` level that syncs every commit
    (``ValueError``, one sentence): the loop would stop every table for each disk sync."""
    if synchronous != "normal":
        raise ValueError(
            "sqlite_writer = loop needs synchronous = normal: a commit that waits for the disk would stop "
            f"every table (synchronous is {synchronous!r}; use thread or process)"
        )


class DatabaseUnusable(sqlite3.DatabaseError):
    """The database file could not be opened as this server's (not SQLite, damaged, not readable); the
    message is a sentence naming the file."""

    def __init__(self, path: Path, error: sqlite3.Error | OSError) -> None:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        super().__init__(f"The database {path} cannot be used: {reason}.")


def connect(path: Path, synchronous: str = "normal") -> sqlite3.Connection:
    """A connection with the schema in place, WAL on, and explicit transactions (autocommit mode)."""
    check_synchronous(synchronous)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
    except (sqlite3.Error, OSError) as exc:
        raise DatabaseUnusable(path, exc) from exc
    try:
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        conn.executescript(SCHEMA)
        if _clustered(conn):
            _events_by_arrival(conn)
        if conn.execute("PRAGMA user_version").fetchone()[0] < REVEALS_INDEXED:
            _index_old_reveals(conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise DatabaseUnusable(path, exc) from exc
    return conn


def _clustered(conn: sqlite3.Connection) -> bool:
    """Whether the file's events table has the old layout, clustered by (room, seq)."""
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
    return "WITHOUT ROWID" in str(sql).upper()


@contextlib.contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, its lock taken at once (``BEGIN IMMEDIATE``): committed when the block ends,
    rolled back when it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _events_by_arrival(conn: sqlite3.Connection) -> None:
    """Move a file's events to the layout by arrival (once per file), every row as it was, in one
    transaction: a process that opens the file meanwhile waits, then finds it done."""
    with immediate(conn):
        if _clustered(conn):  # not done meanwhile
            rows = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
            logger.info("events_layout_moving", rows=rows)
            conn.execute(EVENTS.format(name="events_by_arrival"))
            conn.execute(
                "INSERT INTO events_by_arrival (room, seq, ts, kind, data) "
                "SELECT room, seq, ts, kind, data FROM events ORDER BY room, seq"
            )
            conn.execute("DROP TABLE events")
            conn.execute("ALTER TABLE events_by_arrival RENAME TO events")
            logger.info("events_layout_moved", rows=rows)


def _index_old_reveals(conn: sqlite3.Connection) -> None:
    """Fill ``reveals`` from the reveal events a file stored before the table existed (once per file)."""
    with immediate(conn):
        if conn.execute("PRAGMA user_version").fetchone()[0] < REVEALS_INDEXED:  # not done meanwhile
            rows = conn.execute("SELECT room, seq, kind, data FROM events WHERE kind = 'reveal'")
            _index_reveals(conn, [(room, seq, 0, kind, data) for room, seq, kind, data in rows.fetchall()])
            conn.execute(f"PRAGMA user_version = {REVEALS_INDEXED}")


def _index_reveals(conn: sqlite3.Connection, rows: list[tuple[str, int, int, str, bytes]]) -> None:
    """Index the reveals among event ``rows`` by the seq they reveal (``reveals_sync``)."""
    found = [(room, decode_record(data)["of"], seq) for room, seq, _, kind, data in rows if kind == "reveal"]
    for start in range(0, len(found), INSERT_ROWS):  # one statement per chunk, as ``insert_events`` says why
        chunk = found[start : start + INSERT_ROWS]
        conn.execute(
            f"INSERT OR IGNORE INTO reveals (room, roll, seq) VALUES {', '.join(['(?, ?, ?)'] * len(chunk))}",  # noqa: S608
            [value for row in chunk for value in row],
        )


def _info(row: Sequence[Any]) -> RoomInfo:
    return RoomInfo(id=row[0], name=row[1], epoch=row[2], created=row[3], fear_max=row[4], hope_max=row[5])


_ROOM_COLUMNS = "id, name, epoch, created, fear_max, hope_max"


def _insert_room(conn: sqlite3.Connection, info: RoomInfo, max_rooms: int) -> None:
    """Add ``info`` to the rooms, inside the caller's transaction, unless the store holds ``max_rooms``."""
    (count,) = conn.execute("SELECT COUNT(*) FROM rooms").fetchone()
    if count >= max_rooms:
        raise RoomLimitReached(f"This server already holds its limit of {max_rooms} rooms.")
    conn.execute(
        f"INSERT INTO rooms ({_ROOM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",  # noqa: S608 (constant columns)
        (info.id, info.name, info.epoch, info.created, info.fear_max, info.hope_max),
    )


def create_room_sync(
    conn: sqlite3.Connection, name: str, *, fear_max: int, hope_max: int, max_rooms: int
) -> RoomInfo:
    info = RoomInfo(
        id=secrets.token_hex(8),
        name=name,
        epoch=secrets.token_hex(8),
        created=time.time_ns() // 1_000_000,
        fear_max=fear_max,
        hope_max=hope_max,
    )
    with immediate(conn):
        _insert_room(conn, info, max_rooms)
    return info


def import_room_sync(
    conn: sqlite3.Connection,
    info: RoomInfo,
    records: Sequence[Record],
    *,
    max_rooms: int,
    seeds: Mapping[int, bytes] | None = None,
    kept: Sequence[Record] = (),
) -> None:
    """Insert a room with its own id and epoch and all its records in one transaction (see EventLog), with
    its dice ``seeds`` and what its open witnessed rolls ``kept`` (a move with its secrets)."""
    with immediate(conn):
        if conn.execute("SELECT 1 FROM rooms WHERE id = ?", (info.id,)).fetchone() is not None:
            raise RoomExists(f"A room with id {info.id} already exists here.")
        _insert_room(conn, info, max_rooms)
        insert_events(conn, [(info.id, r["seq"], r["ts"], r["kind"], encode_record(r)) for r in records])
        # Rows a room of this id left (a delete takes them with it, so none should be) are not its seeds.
        rows = [(info.id, n, secret) for n, secret in (seeds or {}).items()]
        conn.executemany("INSERT OR REPLACE INTO seeds (room, n, seed) VALUES (?, ?, ?)", rows)
        insert_kept(conn, info.id, kept)


def delete_room_sync(conn: sqlite3.Connection, room: str) -> bool:
    """Remove a room and its events in one transaction; False when there was no such room."""
    with immediate(conn):
        conn.execute("DELETE FROM events WHERE room = ?", (room,))
        conn.execute("DELETE FROM reveals WHERE room = ?", (room,))
        conn.execute("DELETE FROM seeds WHERE room = ?", (room,))
        conn.execute("DELETE FROM pendings WHERE room = ?", (room,))
        deleted = conn.execute("DELETE FROM rooms WHERE id = ?", (room,)).rowcount
    return deleted > 0


def ensure_seed_sync(conn: sqlite3.Connection, room: str, n: int, candidate: bytes) -> bytes:
    """The room's dice seed ``n`` (spec/fairness.md): ``candidate`` stored if the room had none, else the one
    it had. A seed lives here, never in the event log, until its ``seed_reveal`` event publishes it."""
    with immediate(conn):
        conn.execute("INSERT OR IGNORE INTO seeds (room, n, seed) VALUES (?, ?, ?)", (room, n, candidate))
        row = conn.execute("SELECT seed FROM seeds WHERE room = ? AND n = ?", (room, n)).fetchone()
    seed: bytes = row[0]
    return seed


def seeds_sync(conn: sqlite3.Connection, room: str, first: int) -> dict[int, bytes]:
    """The room's stored dice seeds numbered ``first`` and later."""
    rows = conn.execute("SELECT n, seed FROM seeds WHERE room = ? AND n >= ? ORDER BY n", (room, first))
    return dict(rows)


# What open witnessed rolls keep apart from the log (EventLog.append's ``kept``): one row per pending, its
# map as MessagePack, changed only inside a write transaction, so values and closing never cross.


def insert_kept(conn: sqlite3.Connection, room: str, kept: Sequence[Record]) -> None:
    """Store ``kept`` inside the caller's transaction (the one storing their pending events)."""
    rows = [(room, k["pending"], encode_record(k)) for k in kept]
    conn.executemany("INSERT OR REPLACE INTO pendings (room, pending, data) VALUES (?, ?, ?)", rows)


def _kept_row(conn: sqlite3.Connection, room: str, pending: int, commit: str) -> Record | None:
    row = conn.execute("SELECT data FROM pendings WHERE room = ? AND pending = ?", (room, pending)).fetchone()
    kept = decode_record(row[0]) if row else None
    return kept if kept is not None and kept.get("commit") == commit else None


def _put_kept_row(conn: sqlite3.Connection, room: str, pending: int, kept: Record) -> None:
    row = (encode_record(kept), room, pending)
    conn.execute("UPDATE pendings SET data = ? WHERE room = ? AND pending = ?", row)


def keep_witness_sync(
    conn: sqlite3.Connection, room: str, pending: int, commit: str, participant: str, value: bytes
) -> str:
    with immediate(conn):
        kept = _kept_row(conn, room, pending, commit)
        if kept is None:
            return "missing"
        outcome = witness_into(kept, participant, value)
        if outcome == "stored":
            _put_kept_row(conn, room, pending, kept)
    return outcome


def close_pending_sync(conn: sqlite3.Connection, room: str, pending: int, commit: str) -> Record | None:
    with immediate(conn):
        kept = _kept_row(conn, room, pending, commit)
        if kept is not None and not kept.get("closed"):
            kept["closed"] = True
            _put_kept_row(conn, room, pending, kept)
    return kept


def kept_rolls_sync(conn: sqlite3.Connection, room: str) -> list[Record]:
    rows = conn.execute("SELECT data FROM pendings WHERE room = ? ORDER BY pending", (room,)).fetchall()
    return [decode_record(row[0]) for row in rows]


def retire_kept_sync(conn: sqlite3.Connection, room: str, upto: int, keep: Sequence[Sequence[Any]]) -> None:
    still = {(int(p), str(c)) for p, c in keep}
    with immediate(conn):
        rows = conn.execute(
            "SELECT pending, data FROM pendings WHERE room = ? AND pending <= ?", (room, upto)
        )
        gone = [
            (room, p) for p, data in rows.fetchall() if (p, decode_record(data).get("commit")) not in still
        ]
        conn.executemany("DELETE FROM pendings WHERE room = ? AND pending = ?", gone)


def append_sync(conn: sqlite3.Connection, room: str, records: Sequence[Record], expected: int) -> None:
    """Append ``records`` after seq ``expected`` in one transaction, or raise ``Conflict`` (for commands
    that change a room while no server serves it, e.g. ``tablerelay room archive``)."""
    with immediate(conn):
        current = last_seq_sync(conn, room)
        if current != expected:
            raise Conflict(room, expected, current)
        insert_events(conn, [(room, r["seq"], r["ts"], r["kind"], encode_record(r)) for r in records])


def get_room_sync(conn: sqlite3.Connection, room: str) -> RoomInfo | None:
    row = conn.execute(f"SELECT {_ROOM_COLUMNS} FROM rooms WHERE id = ?", (room,)).fetchone()  # noqa: S608
    return _info(row) if row else None


def list_rooms_sync(conn: sqlite3.Connection) -> list[RoomInfo]:
    rows = conn.execute(f"SELECT {_ROOM_COLUMNS} FROM rooms ORDER BY created, id").fetchall()  # noqa: S608
    return [_info(row) for row in rows]


def last_seq_sync(conn: sqlite3.Connection, room: str) -> int:
    (seq,) = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE room = ?", (room,)).fetchone()
    return int(seq)


def read_sync(conn: sqlite3.Connection, room: str, after_seq: int, limit: int) -> list[Record]:
    rows = conn.execute(
        "SELECT data FROM events WHERE room = ? AND seq > ? ORDER BY seq LIMIT ?", (room, after_seq, limit)
    ).fetchall()
    return [decode_record(row[0]) for row in rows]


def reveals_sync(conn: sqlite3.Connection, room: str, after: int, upto: int) -> dict[int, int]:
    rows = conn.execute(
        "SELECT roll, seq FROM reveals WHERE room = ? AND roll > ? AND roll <= ?", (room, after, upto)
    ).fetchall()
    return {int(roll): int(seq) for roll, seq in rows}


def state_sync(conn: sqlite3.Connection, room: str) -> RoomState:
    state = RoomState()
    while True:
        records = read_sync(conn, room, state.seq, READ_CHUNK)
        for record in records:
            state.apply(record)
        if len(records) < READ_CHUNK:
            return state


def insert_events(conn: sqlite3.Connection, rows: list[tuple[str, int, int, str, bytes]]) -> None:
    """Insert ``rows`` with one multi-row statement per ``INSERT_ROWS``.

    ``executemany`` steps once per row and releases the GIL around each step, and a thread that gives
    the GIL back to a busy event loop waits up to the switch interval (5 ms) to get it again: a
    transaction of 30 rows could spend most of its time waiting. One statement is one step.
    """
    for start in range(0, len(rows), INSERT_ROWS):
        chunk = rows[start : start + INSERT_ROWS]
        values = ", ".join(["(?, ?, ?, ?, ?)"] * len(chunk))
        conn.execute(
            f"INSERT INTO events (room, seq, ts, kind, data) VALUES {values}",  # noqa: S608 (placeholders only)
            [value for row in chunk for value in row],
        )
    _index_reveals(conn, rows)
