"""The SQLite writer in a process of its own (``sqlite_writer = "process"``), beside the event loop.

With the writer thread, a commit of some 44 appends took 2.5–5.1 ms of wall time for 1.0–1.5 ms of the
thread's CPU: the rest was waiting for the GIL behind the busy event loop, once when the thread wakes and
once per statement it steps. A child process commits on the other core with a GIL of its own; the loop
only writes one request per iteration to a pipe and reads the answers back, as with the signing process
(``relay.signer``).

The pipe protocol, msgpack both ways. The child first answers ``["ready"]`` once its connection is open
(or ``["failed", sentence]``). Each request is a list of items in the order they were made:
``[0, room, expected, [[seq, ts, kind], ...], [stored bytes, ...]]`` for an append (the records encoded
by the parent, once) and ``[1, op, [args...]]`` for the other writes (``relay.log.sqlite.CALLS``). The
child reads every request waiting in the pipe and commits their appends together (one transaction, as
the thread does with its queue), then answers each request in order with ``[outcomes, commits]``: an
outcome per item, ``[0, value]`` or ``[1, error name, [args...]]``, and the ``[appends, stored]`` of
each transaction made for it.

Guarantees are the thread's: the committing code is the same (``relay.log.sqlite.Committer``), and a
future completes only once the child has answered after its COMMIT. If the child ends, every append in
flight fails, the error is logged once, and every later append fails at once: the server stops storing,
and never acks an event it did not store.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import sys
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import astuple
from pathlib import Path
from typing import Any

import msgpack

from relay.log.base import Conflict, Record, RoomExists, RoomInfo, RoomLimitReached
from relay.log.sqlite import AppendItem, CallItem, Committer, Outcome, call_item, connect, encode_record
from relay.logs import get_logger

logger = get_logger("relay.sqlite_writer")
APPEND, CALL = 0, 1
OK, FAILED = 0, 1
READ_SIZE = 1 << 20


class WriterGone(RuntimeError):
    """The writer process has ended: nothing more can be stored by this server."""


class WriterFailed(RuntimeError):
    """The writer process could not store something (an SQLite error there, by name and sentence)."""


class WriterUnusable(RuntimeError):
    """The writer process could not open the database; the message is a sentence for the operator."""


# Errors the caller tells apart travel by name and come back as themselves.
def _error_out(exc: BaseException) -> list[Any]:
    if isinstance(exc, Conflict):
        return [FAILED, "Conflict", [exc.room, exc.expected, exc.actual]]
    if isinstance(exc, RoomExists | RoomLimitReached | ValueError):
        return [FAILED, type(exc).__name__, [str(exc)]]
    return [FAILED, "WriterFailed", [f"{type(exc).__name__}: {exc}"]]


_ERRORS: dict[str, Callable[..., BaseException]] = {
    "Conflict": Conflict,
    "RoomExists": RoomExists,
    "RoomLimitReached": RoomLimitReached,
    "ValueError": ValueError,
    "WriterFailed": WriterFailed,
}


def _error_in(name: str, args: Sequence[Any]) -> BaseException:
    return _ERRORS.get(name, WriterFailed)(*args)


def _value_out(value: Any) -> Any:
    return list(astuple(value)) if isinstance(value, RoomInfo) else value


def _pack(obj: Any) -> bytes:
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


def _unpacker() -> msgpack.Unpacker:
    return msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 30)


class WriterProcess:
    """The parent's side: ``append`` and ``call`` return futures settled by the child's answers."""

    def __init__(self, process: asyncio.subprocess.Process, unpacker: msgpack.Unpacker) -> None:
        self.process = process
        self._loop = asyncio.get_running_loop()
        self._items: list[list[Any]] = []  # this iteration's request, not yet sent
        self._futures: list[asyncio.Future[Any]] = []
        self._waiting: deque[list[asyncio.Future[Any]]] = deque()  # per request sent, its futures
        self._unpacker = unpacker
        self._closing = False
        self.alive = True
        self.on_commit: Callable[[int, int], None] | None = None
        self._reader = self._loop.create_task(self._read())

    @classmethod
    async def start(cls, path: Path, synchronous: str) -> WriterProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "relay.log.sqlite_writer",
            str(path),
            synchronous,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        unpacker = _unpacker()
        first: Any = None
        while first is None:
            data = await process.stdout.read(READ_SIZE)
            if not data:
                break
            unpacker.feed(data)
            first = next(unpacker, None)
        if first != ["ready"]:
            await process.wait()
            failed = isinstance(first, list) and len(first) == 2
            why = first[1] if failed else f"it ended with exit status {process.returncode}"
            raise WriterUnusable(f"The SQLite writer process could not open {path}: {why}.")
        logger.info("sqlite_writer_started", pid=process.pid)
        return cls(process, unpacker)

    # -- requests ------------------------------------------------------------------------------------------

    def append(self, room: str, records: Sequence[Record], expected: int) -> asyncio.Future[int]:
        heads = [[record["seq"], record["ts"], record["kind"]] for record in records]
        return self._add([APPEND, room, expected, heads, [encode_record(record) for record in records]])

    def call(self, op: str, args: list[Any]) -> asyncio.Future[Any]:
        return self._add([CALL, op, args])

    def _add(self, item: list[Any]) -> asyncio.Future[Any]:
        if not self.alive or self._closing:
            raise WriterGone("the SQLite writer process has ended; this server stores nothing more")
        future: asyncio.Future[Any] = self._loop.create_future()
        if not self._items:
            # One request per loop iteration: each write to the pipe wakes the child and each answer
            # wakes the loop, and a frame burst read in one iteration becomes one transaction.
            self._loop.call_soon(self._send)
        self._items.append(item)
        self._futures.append(future)
        return future

    def _send(self) -> None:
        if not self._items:
            return
        items, self._items = self._items, []
        futures, self._futures = self._futures, []
        stdin = self.process.stdin
        if not self.alive or stdin is None or stdin.is_closing():
            self.alive = False  # the reader may not have seen the end yet; nothing more is taken
            _fail(futures, WriterGone("the SQLite writer process has ended; this was not stored"))
            return
        self._waiting.append(futures)
        stdin.write(_pack(items))

    # -- answers -------------------------------------------------------------------------------------------

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while True:
                for answer in self._unpacker:
                    self._settle(answer)
                data = await stdout.read(READ_SIZE)
                if not data:
                    if self._waiting or not self._closing:
                        raise WriterGone("the SQLite writer process ended")
                    return
                self._unpacker.feed(data)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            code = await _exit_status(self.process)
            logger.error(
                "sqlite_writer_ended",
                error=str(exc),
                exit_status=code,
                in_flight=sum(len(futures) for futures in self._waiting),
                hint="appends fail from now on; restart the server",
            )
        finally:
            self.alive = False
            gone = WriterGone("the SQLite writer process has ended; this may not have been stored")
            while self._waiting:
                _fail(self._waiting.popleft(), gone)
            _fail(self._futures, gone)
            self._items, self._futures = [], []

    def _settle(self, answer: Any) -> None:
        outcomes, commits = answer
        futures = self._waiting.popleft()
        if len(outcomes) != len(futures):
            raise WriterGone(f"the SQLite writer answered {len(outcomes)} outcomes for {len(futures)}")
        if self.on_commit is not None:
            for batch, written in commits:
                self.on_commit(batch, written)
        for future, outcome in zip(futures, outcomes, strict=True):
            if future.done():
                continue
            if outcome[0] == OK:
                future.set_result(outcome[1])
            else:
                future.set_exception(_error_in(outcome[1], outcome[2]))

    async def close(self) -> None:
        """Send what this iteration made, let the child commit and answer everything, and wait for it."""
        self._send()
        self._closing = True
        if self.process.stdin is not None:
            self.process.stdin.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._reader), 60)
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


def _fail(futures: list[asyncio.Future[Any]], error: BaseException) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(error)


async def _exit_status(process: asyncio.subprocess.Process) -> int | None:
    with contextlib.suppress(TimeoutError):
        return await asyncio.wait_for(process.wait(), 2)
    return None


# -- the child -----------------------------------------------------------------------------------------------


def _item(raw: list[Any]) -> AppendItem | CallItem:
    if raw[0] == APPEND:
        _, room, expected, heads, encoded = raw
        records = [{"seq": seq, "ts": ts, "kind": kind} for seq, ts, kind in heads]
        return AppendItem(room, records, expected, encoded)
    _, op, args = raw
    return call_item(op, args)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _serve(path: str, synchronous: str) -> int:
    """Commit each batch of requests until the parent closes the pipe.

    Signals meant for the server (Ctrl-C in a terminal, a service manager's SIGTERM to the group) are
    ignored: the server drains, sends its last appends, and then closes the pipe.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    source, sink = sys.stdin.fileno(), sys.stdout.fileno()
    try:
        conn = connect(Path(path), synchronous)
    except (OSError, ValueError, sqlite3.Error) as exc:
        _write_all(sink, _pack(["failed", str(exc)]))
        return 1
    commits: list[list[int]] = []
    committer = Committer(conn, lambda batch, written: commits.append([batch, written]))
    unpacker = _unpacker()
    _write_all(sink, _pack(["ready"]))
    try:
        while True:
            data = os.read(source, READ_SIZE)
            if not data:
                return 0
            unpacker.feed(data)
            requests = [[_item(raw) for raw in request] for request in unpacker]
            if not requests:
                continue
            # Every request waiting in the pipe (the loop wrote more while the last commit ran) goes
            # into one batch, as the thread drains its queue: their appends share a transaction.
            outcomes = committer.process([item for request in requests for item in request])
            answers = []
            at = 0
            for index, request in enumerate(requests):
                mine = outcomes[at : at + len(request)]
                at += len(request)
                answers.append(
                    [[_outcome_out(o) for o in mine], commits if index == len(requests) - 1 else []]
                )
            _write_all(sink, b"".join(_pack(answer) for answer in answers))
            commits.clear()
    finally:
        conn.close()


def _outcome_out(outcome: Outcome) -> list[Any]:
    if outcome.error is not None:
        return _error_out(outcome.error)
    return [OK, _value_out(outcome.value)]


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        sys.exit(_serve(sys.argv[1], sys.argv[2]))
