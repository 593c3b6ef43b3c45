"""The embedded event log: one SQLite file (``Config.db_path``) in WAL mode holding rooms and events.

Every append made in one loop iteration is committed together, so a hundred concurrent rollers share
one commit instead of paying for a hundred. Each append's expected seq is checked against its room's
last stored seq; a mismatch fails that append alone. Futures complete after the commit, in order.

Who commits (``sqlite_writer``): by default (``on_loop``) the event loop itself, at the end of the
iteration, as one ``INSERT`` that never waits for a lock; whatever cannot be done that way (another
connection holds the lock, a room's stored seq moved behind the server's back, an error) goes to the
writer thread, which waits and checks patiently, and so do the appends after it until it is done. The
thread also runs the checkpoints, so the loop never syncs the database file. Without ``on_loop`` the
thread commits everything (each commit then costs a hand-off to it and back: a wake-up, the GIL, and
the loop's wake-up, which is most of a roll's round trip when rolls come one at a time).

Durability: with ``synchronous=NORMAL`` in WAL mode a committed transaction is in the WAL file before the
ack, so a crash of the process loses nothing; a power cut or kernel crash may lose the last commits that
the OS had not yet written. ``synchronous = "full"`` in the config also syncs the WAL on every commit.

Reads use their own connections on a small thread pool (WAL lets them run beside the writer), so the
event loop never touches SQLite.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import queue
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgpack
import msgspec

from relay.core.state import RoomState
from relay.settings.logs import get_logger
from relay.storage.base import Conflict, EventLog, Record, RoomExists, RoomInfo, RoomLimitReached

if TYPE_CHECKING:
    from relay.storage.sqlite_writer import WriterProcess

T = TypeVar("T")
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
""".format(events=EVENTS.format(name="events"))
#: ``PRAGMA user_version`` once ``reveals`` indexes every stored reveal (files written before it had
#: none: ``connect`` fills it from their events once).
REVEALS_INDEXED = 1
SYNCHRONOUS = ("normal", "full", "extra")  # "off" could corrupt the file on power loss
MAX_BATCH = 1024  # appends per transaction; more wait for the next one
READ_CHUNK = 5000


# The bytes ``msgpack.packb(record, use_bin_type=True)`` writes, from msgspec's compiled encoder in a fifth
# of the time (packb sets up a packer on every call; every stored event passes here, on the event loop).
_encode = msgspec.msgpack.Encoder().encode


def encode_record(record: Record) -> bytes:
    return _encode(record)


def decode_record(data: bytes) -> Record:
    record: Record = msgpack.unpackb(data, raw=False, strict_map_key=False)
    return record


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


def _events_by_arrival(conn: sqlite3.Connection) -> None:
    """Move a file's events to the layout by arrival (once per file), every row as it was, in one
    transaction: a process that opens the file meanwhile waits, then finds it done."""
    conn.execute("BEGIN IMMEDIATE")
    try:
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
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _index_old_reveals(conn: sqlite3.Connection) -> None:
    """Fill ``reveals`` from the reveal events a file stored before the table existed (once per file)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] < REVEALS_INDEXED:  # not done meanwhile
            rows = conn.execute("SELECT room, seq, kind, data FROM events WHERE kind = 'reveal'")
            _index_reveals(conn, [(room, seq, 0, kind, data) for room, seq, kind, data in rows.fetchall()])
            conn.execute(f"PRAGMA user_version = {REVEALS_INDEXED}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _index_reveals(conn: sqlite3.Connection, rows: list[tuple[str, int, int, str, bytes]]) -> None:
    """Index the reveals among event ``rows`` by the seq they reveal (``reveals_sync``)."""
    found = [(room, decode_record(data)["of"], seq) for room, seq, _, kind, data in rows if kind == "reveal"]
    for start in range(0, len(found), INSERT_ROWS):  # one statement per chunk, as ``_insert`` says why
        chunk = found[start : start + INSERT_ROWS]
        conn.execute(
            f"INSERT OR IGNORE INTO reveals (room, roll, seq) VALUES {', '.join(['(?, ?, ?)'] * len(chunk))}",  # noqa: S608
            [value for row in chunk for value in row],
        )


def _info(row: Sequence[Any]) -> RoomInfo:
    return RoomInfo(id=row[0], name=row[1], epoch=row[2], created=row[3], fear_max=row[4], hope_max=row[5])


_ROOM_COLUMNS = "id, name, epoch, created, fear_max, hope_max"


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
    conn.execute("BEGIN IMMEDIATE")
    try:
        (count,) = conn.execute("SELECT COUNT(*) FROM rooms").fetchone()
        if count >= max_rooms:
            raise RoomLimitReached(f"This server already holds its limit of {max_rooms} rooms.")
        conn.execute(
            f"INSERT INTO rooms ({_ROOM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",  # noqa: S608 (constant columns)
            (info.id, info.name, info.epoch, info.created, info.fear_max, info.hope_max),
        )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return info


def import_room_sync(
    conn: sqlite3.Connection, info: RoomInfo, records: Sequence[Record], *, max_rooms: int
) -> None:
    """Insert a room with its own id and epoch and all its records in one transaction (see EventLog)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("SELECT 1 FROM rooms WHERE id = ?", (info.id,)).fetchone() is not None:
            raise RoomExists(f"A room with id {info.id} already exists here.")
        (count,) = conn.execute("SELECT COUNT(*) FROM rooms").fetchone()
        if count >= max_rooms:
            raise RoomLimitReached(f"This server already holds its limit of {max_rooms} rooms.")
        conn.execute(
            f"INSERT INTO rooms ({_ROOM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",  # noqa: S608 (constant columns)
            (info.id, info.name, info.epoch, info.created, info.fear_max, info.hope_max),
        )
        _insert(conn, [(info.id, r["seq"], r["ts"], r["kind"], encode_record(r)) for r in records])
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def delete_room_sync(conn: sqlite3.Connection, room: str) -> bool:
    """Remove a room and its events in one transaction; False when there was no such room."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("DELETE FROM events WHERE room = ?", (room,))
        conn.execute("DELETE FROM reveals WHERE room = ?", (room,))
        deleted = conn.execute("DELETE FROM rooms WHERE id = ?", (room,)).rowcount
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return deleted > 0


def append_sync(conn: sqlite3.Connection, room: str, records: Sequence[Record], expected: int) -> None:
    """Append ``records`` after seq ``expected`` in one transaction, or raise ``Conflict`` (for commands
    that change a room while no server serves it, e.g. ``tablerelay room archive``)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = last_seq_sync(conn, room)
        if current != expected:
            raise Conflict(room, expected, current)
        _insert(conn, [(room, r["seq"], r["ts"], r["kind"], encode_record(r)) for r in records])
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


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


@dataclass(eq=False)
class AppendItem:
    """An append for the committer: ``records`` after ``expected``."""

    room: str
    records: Sequence[Record]
    expected: int


@dataclass(eq=False)
class CallItem:
    """Any other write (create, import, delete a room), run alone in its own transaction."""

    fn: Callable[[sqlite3.Connection], Any]


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None


_STOP = object()
_CHECKPOINT = object()

#: Rows per INSERT statement (5 parameters each, well under SQLite's 32,766 host parameters).
INSERT_ROWS = 500
#: Rooms whose last seq the writer keeps (a few dozen bytes each); past it the map starts over.
LAST_SEQS_KEPT = 100_000
#: Rows the loop commits between checkpoints (the thread runs them): SQLite's own automatic checkpoint
#: comes every 1,000 pages, and a row of a small room's roll fills most of a page of its own.
CHECKPOINT_ROWS = 1000


def _insert(conn: sqlite3.Connection, rows: list[tuple[str, int, int, str, bytes]]) -> None:
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


def _settle(futures: Sequence[asyncio.Future[Any]], outcomes: Sequence[Outcome]) -> None:
    for future, outcome in zip(futures, outcomes, strict=True):
        if future.done():
            continue
        if outcome.error is not None:
            future.set_exception(outcome.error)
        else:
            future.set_result(outcome.value)


@dataclass
class _Stats:
    transactions: int = 0
    appends: int = 0
    largest_batch: int = 0

    def add(self, batch: int, written: int) -> None:
        self.transactions += 1
        self.appends += written
        self.largest_batch = max(self.largest_batch, batch)


class Committer:
    """The one writer's side of the file: a batch of appends and calls in, an outcome for each out.

    Used by the writer thread and by the writer process (``relay.storage.sqlite_writer``) alike, so both
    keep the same guarantees. ``on_commit`` gets each transaction's append count and the number stored.
    """

    def __init__(
        self, conn: sqlite3.Connection, on_commit: Callable[[int, int], None], *, remembers: bool = True
    ) -> None:
        self.conn = conn
        self.on_commit = on_commit
        # Each room's last stored seq. A committer that does not remember (the thread behind the loop's
        # committer, which writes too) reads it afresh inside every transaction.
        self._last: dict[str, int] = {}
        self.remembers = remembers
        self.rows = 0  # rows stored so far (the loop's committer asks for a checkpoint by them)

    def forget(self) -> None:
        """Read every room's last seq afresh: another committer on this file may have written."""
        self._last.clear()

    def learn(self, done: Iterable[tuple[AppendItem, Outcome]]) -> None:
        """Take in what another committer on this file did with some appends."""
        for item, outcome in done:
            if outcome.error is None and outcome.value is not None:
                self._last[item.room] = outcome.value
            else:
                self._last.pop(item.room, None)

    def attempt(self, items: Sequence[AppendItem]) -> list[Outcome] | None:
        """Store ``items`` without waiting for anything (the event loop's commit), or return None with
        nothing stored and nothing remembered, for a patient committer to do instead.

        Rooms whose last seq is not known are read first, outside a transaction: the ``INSERT`` is one
        statement, and should another connection have written meanwhile the primary key fails it whole.
        A batch that needs more than one statement (reveals, which go to a second table, or more rows than
        one ``INSERT`` takes) takes a transaction instead, without waiting for the lock.
        """
        appends = [(item, Outcome()) for item in items]
        locked = sum(len(item.records) for item in items) > INSERT_ROWS or any(
            record["kind"] == "reveal" for item in items for record in item.records
        )
        try:
            self._store(appends, self._last, in_transaction=locked, give_up=sqlite3.Error)
        except sqlite3.Error:
            self._last.clear()
            return None
        return [outcome for _, outcome in appends]

    def process(self, batch: Sequence[AppendItem | CallItem]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        appends: list[tuple[AppendItem, Outcome]] = []
        for item in batch:
            outcome = Outcome()
            outcomes.append(outcome)
            if isinstance(item, CallItem):
                try:
                    outcome.value = item.fn(self.conn)
                except BaseException as exc:
                    outcome.error = exc
            else:
                appends.append((item, outcome))
        if appends:
            self._commit(appends)
        return outcomes

    def _commit(self, appends: list[tuple[AppendItem, Outcome]]) -> None:
        """Store every append whose expected seq follows its room's last one, in one transaction.

        The writer keeps each room's last stored seq (``_last``), so a batch usually needs no query before
        its rows: it is one multi-row ``INSERT``, which in autocommit mode is a transaction by itself.
        Every statement lets go of the GIL and must take it back from the busy event loop, up to a switch
        interval (5 ms) later, so a per-room ``SELECT MAX(seq)`` plus ``BEGIN``/``COMMIT`` made a batch
        touching thirty rooms wait for the GIL some thirty times. The primary key still guards the seqs:
        should another connection have written to a room behind the writer's back, the ``INSERT`` fails
        whole, nothing is stored, and the batch is done again the careful way (``BEGIN IMMEDIATE`` and
        every room's last seq read inside the transaction).
        """
        if not self.remembers:
            self._last.clear()
        elif sum(len(item.records) for item, _ in appends) <= INSERT_ROWS and all(
            item.room in self._last for item, _ in appends
        ):  # one statement: the rows, not the appends, must fit one INSERT
            try:
                self._store(appends, self._last, in_transaction=False, give_up=sqlite3.IntegrityError)
                return
            except sqlite3.IntegrityError:
                self._last.clear()  # someone else wrote: the careful way, with seqs read afresh
                for _, outcome in appends:
                    outcome.value = outcome.error = None
        self._store(appends, {}, in_transaction=True)

    def _store(
        self,
        appends: list[tuple[AppendItem, Outcome]],
        known: dict[str, int],
        *,
        in_transaction: bool,
        give_up: type[sqlite3.Error] | None = None,
    ) -> None:
        """One attempt: ``known`` holds last seqs already known; the rest are read.

        Outside a transaction the rows must fit one ``INSERT`` (one statement is atomic). An error of
        the ``give_up`` kind is raised, with nothing stored, for the caller to retry another way; any
        other error settles the batch.
        """
        conn = self.conn
        rows: list[tuple[str, int, int, str, bytes]] = []
        written: list[Outcome] = []
        # The batch's rooms only: ``known`` holds every room appended to lately (a hosted relay's
        # thousands), and copying it for each commit was most of a small commit's Python.
        last: dict[str, int] = {}
        try:
            if in_transaction:
                conn.execute("BEGIN IMMEDIATE")
            for item, outcome in appends:
                room = item.room
                current = last.get(room)
                if current is None:
                    current = known.get(room)
                    if current is None:
                        current = last_seq_sync(conn, room)
                    last[room] = current
                if item.expected != current:
                    outcome.error = Conflict(item.room, item.expected, current)
                    continue
                seq = current
                for record in item.records:
                    seq += 1
                    if record["seq"] != seq:
                        raise ValueError(f"room {item.room}: record seq {record['seq']} should be {seq}")
                    rows.append((item.room, seq, record["ts"], record["kind"], encode_record(record)))
                last[item.room] = seq
                outcome.value = seq
                written.append(outcome)
            if rows:
                _insert(conn, rows)
            if in_transaction:
                conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if give_up is not None and isinstance(exc, give_up):
                raise
            self._last.clear()  # what is stored is not known for sure any more
            for outcome in written:
                outcome.value = None
                outcome.error = exc
            for _, outcome in appends:
                if outcome.error is None and outcome.value is None:
                    outcome.error = exc
            return
        self.rows += len(rows)
        if len(self._last) > LAST_SEQS_KEPT:
            self._last.clear()  # read again as rooms append
        self._last.update(last)
        self.on_commit(len(appends), len(written))


#: The writes other than appends, by name: the writer process gets the name and plain arguments.
def _create_room(
    conn: sqlite3.Connection, name: str, fear_max: int, hope_max: int, max_rooms: int
) -> RoomInfo:
    return create_room_sync(conn, name, fear_max=fear_max, hope_max=hope_max, max_rooms=max_rooms)


def _import_room(
    conn: sqlite3.Connection, info: Sequence[Any], records: Sequence[Record], max_rooms: int
) -> None:
    import_room_sync(conn, RoomInfo(*info), records, max_rooms=max_rooms)


CALLS: dict[str, Callable[..., Any]] = {
    "create_room": _create_room,
    "import_room": _import_room,
    "delete_room": delete_room_sync,
}


def call_item(op: str, args: Sequence[Any]) -> CallItem:
    """The write named ``op`` (a key of ``CALLS``) with its arguments after the connection."""
    fn = CALLS[op]
    return CallItem(lambda conn: fn(conn, *args))


class SqliteLog(EventLog):
    """The SQLite backend. Create it inside a running event loop; ``close()`` it before the loop ends.

    Appends are committed by the event loop itself with ``on_loop`` (the writer thread takes what it
    cannot do without waiting, see the module's docstring), else by a writer thread, or with ``writer``
    (a started ``relay.storage.sqlite_writer.WriterProcess``) by a process of its own; reads stay on this
    process's reader threads in every case (WAL).
    """

    def __init__(
        self,
        path: Path,
        *,
        synchronous: str = "normal",
        writer: WriterProcess | None = None,
        on_loop: bool = False,
    ) -> None:
        self.path = path
        self.synchronous = synchronous
        self._loop = asyncio.get_running_loop()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._appends: list[tuple[AppendItem, asyncio.Future[Any]]] = []  # this iteration's, not handed over
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tablerelay-sqlite-read")
        self._closed = False
        self.stats = _Stats()
        # Called with each transaction's append count, from the writer thread or, with the writer
        # process, on the loop (the server feeds its batch-size histogram; prometheus_client is thread-safe).
        self.on_commit: Callable[[int], None] | None = None
        self._process = writer
        self._writer: threading.Thread | None = None
        self._on_loop: Committer | None = None
        # Appends (and checkpoints) handed to the thread and not done yet: the loop's wait their turn.
        self._behind = 0
        self._checkpoint_at = CHECKPOINT_ROWS  # the loop's committer's row count that asks for the next one
        if writer is not None:
            writer.on_commit = self._committed
            return
        if on_loop:
            check_on_loop(synchronous)
            conn = connect(path, synchronous)
            conn.execute("PRAGMA busy_timeout = 0")  # a held lock sends the batch to the thread
            conn.execute("PRAGMA wal_autocheckpoint = 0")  # the thread checkpoints (and syncs)
            self._on_loop = Committer(conn, self._committed)
        self._committer = Committer(connect(path, synchronous), self._committed, remembers=not on_loop)
        self._writer = threading.Thread(target=self._run, name="tablerelay-sqlite-write", daemon=True)
        self._writer.start()

    @classmethod
    async def with_process(cls, path: Path, *, synchronous: str = "normal") -> SqliteLog:
        """A log whose writes are committed by a writer process (``sqlite_writer = "process"``)."""
        from relay.storage.sqlite_writer import WriterProcess

        check_synchronous(synchronous)  # the same error as the thread's, before starting anything
        return cls(path, synchronous=synchronous, writer=await WriterProcess.start(path, synchronous))

    def _committed(self, batch: int, written: int) -> None:
        self.stats.add(batch, written)
        if self.on_commit is not None:
            self.on_commit(batch)

    # -- the writer thread -------------------------------------------------------------------------------

    def _run(self) -> None:
        committer = self._committer
        try:
            while True:
                batch: list[tuple[AppendItem | CallItem, asyncio.Future[Any]]] = []
                stop = checkpoint = False
                item = self._queue.get()
                while True:
                    if item is _STOP:
                        stop = True
                    elif item is _CHECKPOINT:  # what came before it first, and nothing after
                        checkpoint = True
                        break
                    elif isinstance(item, list):  # one loop iteration's appends
                        batch.extend(item)
                    else:
                        batch.append(item)
                    if stop or len(batch) >= MAX_BATCH:
                        break
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                if batch:
                    items = [item for item, _ in batch]
                    self._deliver(items, [future for _, future in batch], committer.process(items))
                if checkpoint:
                    self._checkpoint(committer.conn)
                    with contextlib.suppress(RuntimeError):
                        self._loop.call_soon_threadsafe(self._checkpointed)
                if stop:
                    return
        finally:
            committer.conn.close()

    @staticmethod
    def _checkpoint(conn: sqlite3.Connection) -> None:
        """Copy the WAL's pages into the database file (and sync both: off the loop)."""
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:  # the next one may do; the WAL only grows meanwhile
            logger.warning("checkpoint_failed", error=str(exc))

    def _checkpointed(self) -> None:
        self._behind -= 1

    def _deliver(
        self,
        items: list[AppendItem | CallItem],
        futures: list[asyncio.Future[Any]],
        outcomes: list[Outcome],
    ) -> None:
        def complete() -> None:
            on_loop = self._on_loop
            if on_loop is not None:
                if any(isinstance(item, CallItem) for item in items):
                    on_loop.forget()  # a room created, imported or deleted under its feet
                appended = [(i, o) for i, o in zip(items, outcomes, strict=True) if isinstance(i, AppendItem)]
                self._behind -= len(appended)
                on_loop.learn(appended)
            _settle(futures, outcomes)

        with contextlib.suppress(RuntimeError):  # the loop is gone; nobody is waiting any more
            self._loop.call_soon_threadsafe(complete)

    def _submit_write(self, op: str, *args: Any) -> asyncio.Future[Any]:
        if self._closed:
            raise RuntimeError("the event log is closed")
        if self._process is not None:
            return self._process.call(op, list(args))
        future: asyncio.Future[Any] = self._loop.create_future()
        self._hand_over()  # after the appends made before it, as if they had been queued one by one
        self._queue.put((call_item(op, args), future))
        return future

    def _hand_over(self) -> None:
        """Commit every append made in this loop iteration, here when the loop commits and nothing
        handed to the thread is still waiting, else by giving them to the thread as one queue item."""
        appends, self._appends = self._appends, []
        if not appends:
            return
        on_loop = self._on_loop
        if on_loop is not None:
            if not self._behind:
                outcomes = on_loop.attempt([item for item, _ in appends])
                if outcomes is not None:
                    _settle([future for _, future in appends], outcomes)
                    if on_loop.rows >= self._checkpoint_at:
                        # The thread checkpoints while the loop's appends wait behind it: a checkpoint
                        # that races new writes never reaches the WAL's end, and only one that does lets
                        # the next write start the WAL over (and that write's sync is then the thread's).
                        self._checkpoint_at = on_loop.rows + CHECKPOINT_ROWS
                        self._behind += 1
                        self._queue.put(_CHECKPOINT)
                    return
            self._behind += len(appends)
        self._queue.put(appends)

    # -- reads ---------------------------------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path, self.synchronous)
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise RuntimeError("the event log is closed")
        return await self._loop.run_in_executor(self._pool, lambda: fn(self._reader()))

    # -- the interface ---------------------------------------------------------------------------------------

    async def create_room(self, name: str, *, fear_max: int, hope_max: int, max_rooms: int) -> RoomInfo:
        info = await self._submit_write("create_room", name, fear_max, hope_max, max_rooms)
        return info if isinstance(info, RoomInfo) else RoomInfo(*info)  # the process sends its fields

    async def get_room(self, room: str) -> RoomInfo | None:
        return await self._read(lambda conn: get_room_sync(conn, room))

    async def list_rooms(self) -> list[RoomInfo]:
        return await self._read(list_rooms_sync)

    def append(self, room: str, records: Sequence[Record], expected_seq: int) -> asyncio.Future[int]:
        if self._closed:
            raise RuntimeError("the event log is closed")
        if self._process is not None:
            return self._process.append(room, records, expected_seq)
        future: asyncio.Future[int] = self._loop.create_future()
        # Handed to the writer once per loop iteration rather than one by one: every wake-up of the
        # writer thread is a GIL hand-off that the event loop pays for, and a frame burst read in one
        # iteration becomes one transaction.
        if not self._appends:
            self._loop.call_soon(self._hand_over)
        self._appends.append((AppendItem(room, records, expected_seq), future))
        return future

    async def import_room(self, info: RoomInfo, records: Sequence[Record], *, max_rooms: int) -> None:
        await self._submit_write("import_room", dataclasses.astuple(info), records, max_rooms)

    async def delete_room(self, room: str) -> bool:
        return bool(await self._submit_write("delete_room", room))

    async def read(self, room: str, after_seq: int, limit: int) -> list[Record]:
        return await self._read(lambda conn: read_sync(conn, room, after_seq, limit))

    async def reveals(self, room: str, after: int, upto: int) -> dict[int, int]:
        return await self._read(lambda conn: reveals_sync(conn, room, after, upto))

    async def state(self, room: str) -> RoomState:
        return await self._read(lambda conn: state_sync(conn, room))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._process is not None:
            await self._process.close()  # the process commits every append already handed to it first
        else:
            assert self._writer is not None
            self._hand_over()
            self._queue.put(_STOP)
            await asyncio.to_thread(self._writer.join)
            # Let the writer's last call_soon_threadsafe run so every future is settled.
            await asyncio.sleep(0)
            if self._on_loop is not None:
                self._on_loop.conn.close()
        self._pool.shutdown(wait=True)
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
