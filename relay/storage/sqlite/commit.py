"""The one writer's side of the SQLite file (``Committer``): a batch of appends and other writes in, an
outcome for each out. The writer thread, the event loop's own commits and the writer process
(``relay.storage.sqlite.writer``) all commit through it, so all keep the same guarantees.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay.core.info import RoomInfo
from relay.storage.base import Conflict, Record, StoreFull
from relay.storage.codec import encode_record
from relay.storage.sqlite.db import (
    INSERT_ROWS,
    close_pending_sync,
    create_room_sync,
    delete_room_sync,
    ensure_seed_sync,
    import_room_sync,
    insert_events,
    insert_kept,
    keep_witness_sync,
    last_seq_sync,
    retire_kept_sync,
)


@dataclass(eq=False)
class AppendItem:
    """An append for the committer: ``records`` after ``expected``."""

    room: str
    records: Sequence[Record]
    expected: int
    kept: Sequence[Record] = ()  # stored in the same transaction (EventLog.append)


@dataclass(eq=False)
class CallItem:
    """Any other write (create, import, delete a room), run alone in its own transaction."""

    fn: Callable[[sqlite3.Connection], Any]


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None


#: SQLite's primary result codes for a full disk (``database or disk is full``) and for an I/O error,
#: which a write to the WAL or a checkpoint on a full disk may give instead.
SQLITE_FULL = 13
SQLITE_IOERR = 10
#: An I/O error while the data folder's filesystem has less than this free is taken as a full disk.
LOW_SPACE = 16 << 20


def full_disk(exc: BaseException, folder: str | None) -> StoreFull | None:
    """``exc`` as a ``StoreFull`` when it says the disk under the database is full, else None.

    After SQLITE_FULL (or SQLITE_IOERR) SQLite has rolled back the statement, and perhaps the whole
    transaction (https://sqlite.org/lang_transaction.html, "Response To Errors Within A Transaction"): the
    connection stays usable once the committer has rolled back whatever is left.
    """
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int):
        return None
    primary = code & 0xFF
    if primary == SQLITE_IOERR and folder is not None:
        try:
            low = shutil.disk_usage(folder).free < LOW_SPACE
        except OSError:
            low = False
        if not low:
            return None
    elif primary != SQLITE_FULL:
        return None
    return StoreFull(f"The disk under the SQLite database is full ({exc}); nothing of this was stored.")


#: Rooms whose last seq the writer keeps (a few dozen bytes each); past it the map starts over.
LAST_SEQS_KEPT = 100_000


class Committer:
    """The one writer's side of the file: a batch of appends and calls in, an outcome for each out.

    Used by the writer thread and by the writer process (``relay.storage.sqlite.writer``) alike, so both
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
        self._folder: str | None = None  # the database file's folder, once a failure asks

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
            item.kept or any(record["kind"] == "reveal" for record in item.records) for item in items
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
            item.room in self._last and not item.kept for item, _ in appends
        ):  # one statement: the rows, not the appends, must fit one INSERT (and no kept secrets beside)
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
                if item.kept:  # in this transaction: a stored pending always has its secret
                    insert_kept(conn, item.room, item.kept)
            if rows:
                insert_events(conn, rows)
            if in_transaction:
                conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                # SQLite may have rolled the transaction back already (a full disk); if not, this does,
                # and nothing of the batch is stored either way.
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if give_up is not None and isinstance(exc, give_up):
                raise
            self._last.clear()  # what is stored is not known for sure any more
            error = full_disk(exc, self.folder()) or exc
            for outcome in written:
                outcome.value = None
                outcome.error = error
            for _, outcome in appends:
                if outcome.error is None and outcome.value is None:
                    outcome.error = error
            return
        self.rows += len(rows)
        if len(self._last) > LAST_SEQS_KEPT:
            self._last.clear()  # read again as rooms append
        self._last.update(last)
        self.on_commit(len(appends), len(written))

    def folder(self) -> str | None:
        """The folder of the database file (asked once, when a failure needs it)."""
        if self._folder is None:
            with contextlib.suppress(sqlite3.Error):
                for _, name, file in self.conn.execute("PRAGMA database_list"):
                    if name == "main" and file:
                        self._folder = str(Path(file).parent)
        return self._folder


#: The writes other than appends, by name: the writer process gets the name and plain arguments.
def _create_room(
    conn: sqlite3.Connection, name: str, fear_max: int, hope_max: int, max_rooms: int
) -> RoomInfo:
    return create_room_sync(conn, name, fear_max=fear_max, hope_max=hope_max, max_rooms=max_rooms)


def _import_room(
    conn: sqlite3.Connection,
    info: Sequence[Any],
    records: Sequence[Record],
    max_rooms: int,
    kept: Sequence[Record] = (),
) -> None:
    import_room_sync(conn, RoomInfo(*info), records, max_rooms=max_rooms, kept=kept)


CALLS: dict[str, Callable[..., Any]] = {
    "create_room": _create_room,
    "import_room": _import_room,
    "delete_room": delete_room_sync,
    "ensure_seed": ensure_seed_sync,
    "keep_witness": keep_witness_sync,
    "close_pending": close_pending_sync,
    "retire_kept": retire_kept_sync,
}


def call_item(op: str, args: Sequence[Any]) -> CallItem:
    """The write named ``op`` (a key of ``CALLS``) with its arguments after the connection."""
    fn = CALLS[op]
    return CallItem(lambda conn: fn(conn, *args))
