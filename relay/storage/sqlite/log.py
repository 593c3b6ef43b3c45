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
import sqlite3
import threading
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from relay.core.info import RoomInfo
from relay.core.state import RoomState
from relay.settings.logs import get_logger
from relay.storage.base import EventLog, Record
from relay.storage.sqlite.commit import AppendItem, CallItem, Committer, Outcome, call_item
from relay.storage.sqlite.db import (
    check_on_loop,
    check_synchronous,
    connect,
    get_room_sync,
    kept_rolls_sync,
    list_rooms_sync,
    read_sync,
    reveals_sync,
    seeds_sync,
    state_sync,
)
from relay.storage.sqlite.writer import WriterProcess

T = TypeVar("T")
logger = get_logger("relay.sqlite")

MAX_BATCH = 1024  # appends per transaction; more wait for the next one
#: Rows the loop commits between checkpoints (the thread runs them): SQLite's own automatic checkpoint
#: comes every 1,000 pages, and a row of a small room's roll fills most of a page of its own.
CHECKPOINT_ROWS = 1000

_STOP = object()
_CHECKPOINT = object()


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


class SqliteLog(EventLog):
    """The SQLite backend. Create it inside a running event loop; ``close()`` it before the loop ends.

    Appends are committed by the event loop itself with ``on_loop`` (the writer thread takes what it
    cannot do without waiting, see the module's docstring), else by a writer thread, or with ``writer``
    (a started ``relay.storage.sqlite.writer.WriterProcess``) by a process of its own; reads stay on this
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

    def append(
        self, room: str, records: Sequence[Record], expected_seq: int, kept: Sequence[Record] = ()
    ) -> asyncio.Future[int]:
        if self._closed:
            raise RuntimeError("the event log is closed")
        if self._process is not None:
            return self._process.append(room, records, expected_seq, kept)
        future: asyncio.Future[int] = self._loop.create_future()
        # Handed to the writer once per loop iteration rather than one by one: every wake-up of the
        # writer thread is a GIL hand-off that the event loop pays for, and a frame burst read in one
        # iteration becomes one transaction.
        if not self._appends:
            self._loop.call_soon(self._hand_over)
        self._appends.append((AppendItem(room, records, expected_seq, kept), future))
        return future

    async def import_room(
        self, info: RoomInfo, records: Sequence[Record], *, max_rooms: int, kept: Sequence[Record] = ()
    ) -> None:
        await self._submit_write("import_room", dataclasses.astuple(info), records, max_rooms, kept)

    async def delete_room(self, room: str) -> bool:
        return bool(await self._submit_write("delete_room", room))

    async def ensure_seed(self, room: str, n: int, candidate: bytes) -> bytes:
        return bytes(await self._submit_write("ensure_seed", room, n, candidate))

    async def seeds(self, room: str, first: int = 1) -> dict[int, bytes]:
        return await self._read(lambda conn: seeds_sync(conn, room, first))

    async def keep_witness(self, room: str, pending: int, commit: str, participant: str, value: bytes) -> str:
        return str(await self._submit_write("keep_witness", room, pending, commit, participant, value))

    async def close_pending(self, room: str, pending: int, commit: str) -> Record | None:
        kept: Record | None = await self._submit_write("close_pending", room, pending, commit)
        return kept

    async def kept_rolls(self, room: str) -> list[Record]:
        return await self._read(lambda conn: kept_rolls_sync(conn, room))

    async def retire_kept(self, room: str, upto: int, keep: Collection[tuple[int, str]]) -> None:
        await self._submit_write("retire_kept", room, upto, [list(pair) for pair in keep])

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
