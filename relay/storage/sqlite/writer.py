"""The SQLite writer in a process of its own (``sqlite_writer = "process"``), beside the event loop.

With the writer thread, a commit of some 44 appends took 2.5–5.1 ms of wall time for 1.0–1.5 ms of the
thread's CPU: the rest was waiting for the GIL behind the busy event loop, once when the thread wakes and
once per statement it steps. A child process commits on the other core with a GIL of its own; the loop
only writes one request per iteration to a pipe and reads the answers back.

The pipe protocol, msgpack both ways. The child first answers ``["ready"]`` once its connection is open
(or ``["failed", sentence]``). Each request is a list of items in the order they were made:
``[0, room, expected, [record, ...]]`` for an append (the records as they are; the child encodes each
for storage exactly as the thread would) and ``[1, op, [args...]]`` for the other writes
(``relay.storage.sqlite.commit.CALLS``); an append with kept secrets (``EventLog.append``) carries them as a
fifth element. The child reads every request waiting in the pipe and commits
their appends together (one transaction, as the thread does with its queue), then answers each request in
order with ``[outcomes, commits]``: an outcome per item, ``[0, value]`` or ``[1, error name,
[args...]]``, and the ``[appends, stored]`` of each transaction made for it.

Guarantees are the thread's: the committing code is the same (``relay.storage.sqlite.commit.Committer``),
and a future completes only once the child has answered after its COMMIT. If the child ends, every append
in flight fails, the error is logged once, and every later append fails at once: the server stops
storing, and never acks an event it did not store.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import astuple
from pathlib import Path
from typing import Any, cast

import msgpack

from relay.core.info import RoomInfo
from relay.settings.logs import configure, get_logger
from relay.storage.base import Conflict, Record, RoomExists, RoomLimitReached, StoreFull
from relay.storage.sqlite.commit import AppendItem, CallItem, Committer, Outcome, call_item
from relay.storage.sqlite.db import connect

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
    if isinstance(exc, RoomExists | RoomLimitReached | StoreFull | ValueError):
        return [FAILED, type(exc).__name__, [str(exc)]]
    return [FAILED, "WriterFailed", [f"{type(exc).__name__}: {exc}"]]


_ERRORS: dict[str, Callable[..., BaseException]] = {
    "Conflict": Conflict,
    "RoomExists": RoomExists,
    "RoomLimitReached": RoomLimitReached,
    "StoreFull": StoreFull,
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


class WriterProcess(asyncio.SubprocessProtocol):
    """The parent's side: ``append`` and ``call`` return futures settled by the child's answers.

    It is the child's protocol too: answers are parsed where the pipe's bytes arrive and settle their
    futures there, with no reader task between (one loop iteration less per commit than a stream's).
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.SubprocessTransport | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self._items: list[list[Any]] = []  # this iteration's request, not yet sent
        self._futures: list[asyncio.Future[Any]] = []
        self._waiting: deque[list[asyncio.Future[Any]]] = deque()  # per request sent, its futures
        self._unpacker = _unpacker()
        self._ready: asyncio.Future[None] = self._loop.create_future()
        self._ended: asyncio.Future[None] = self._loop.create_future()  # the answers' pipe has closed
        self._exited: asyncio.Future[None] = self._loop.create_future()
        self._closing = False
        self.alive = False
        self.pid = 0
        self.on_commit: Callable[[int, int], None] | None = None

    @classmethod
    async def start(cls, path: Path, synchronous: str) -> WriterProcess:
        loop = asyncio.get_running_loop()
        transport, writer = await loop.subprocess_exec(
            cls,
            sys.executable,
            "-m",
            "relay.storage.sqlite.writer",
            str(path),
            synchronous,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
        )
        try:
            await writer.opened()
        except WriterUnusable:
            transport.close()
            raise
        logger.info("sqlite_writer_started", pid=writer.pid)
        return writer

    async def opened(self) -> None:
        """Wait until the child has opened the database; ``WriterUnusable`` (once the child has exited)
        when it could not."""
        try:
            await self._ready
        except WriterUnusable:
            await self._exited
            raise

    # -- the protocol --------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports have the methods without subclassing asyncio's classes.
        self._transport = cast(asyncio.SubprocessTransport, transport)
        self.pid = self._transport.get_pid()
        self._stdin = cast(asyncio.WriteTransport, self._transport.get_pipe_transport(0))

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:  # noqa: ARG002 (stdout only)
        self._unpacker.feed(data)
        try:
            for message in self._unpacker:
                if self._ready.done():
                    self._settle(message)
                elif message == ["ready"]:
                    self.alive = True
                    self._ready.set_result(None)
                else:
                    why = message[1] if isinstance(message, list) and len(message) == 2 else repr(message)
                    why = str(why).rstrip(".")  # the process's own sentence may end with one
                    sentence = f"The SQLite writer process could not open the database: {why}."
                    self._ready.set_exception(WriterUnusable(sentence))
        except Exception as exc:  # an answer that does not fit: nothing it says can be trusted
            self._end(WriterGone(f"the SQLite writer process answered out of turn: {exc}"))
            if self._transport is not None:
                self._transport.kill()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:  # noqa: ARG002
        if fd == 1:
            self._end(WriterGone("the SQLite writer process ended"))

    def process_exited(self) -> None:
        # Not the end of the answers: the exit may be seen before the last bytes of the pipe are read
        # (the child answers, then exits, when the pipe closes). Its stdout closing is the end.
        if not self._exited.done():
            self._exited.set_result(None)

    def _end(self, reason: WriterGone) -> None:
        """The child is gone (or cannot be trusted): fail everything it held and take nothing more."""
        if self._ended.done():
            return
        self._ended.set_result(None)
        self.alive = False
        if not self._ready.done():
            code = self._transport.get_returncode() if self._transport is not None else None
            status = "" if code is None else f" with exit status {code}"
            sentence = f"The SQLite writer process ended{status} before it was ready."
            self._ready.set_exception(WriterUnusable(sentence))
        elif self._waiting or self._futures or not self._closing:
            logger.error(
                "sqlite_writer_ended",
                error=str(reason),
                pid=self.pid,
                in_flight=sum(len(futures) for futures in self._waiting) + len(self._futures),
                hint="appends fail from now on; restart the server",
            )
        gone = WriterGone("the SQLite writer process has ended; this may not have been stored")
        while self._waiting:
            _fail(self._waiting.popleft(), gone)
        _fail(self._futures, gone)
        self._items, self._futures = [], []

    # -- requests ------------------------------------------------------------------------------------------

    def append(
        self, room: str, records: Sequence[Record], expected: int, kept: Sequence[Record] = ()
    ) -> asyncio.Future[int]:
        # The records travel as they are, inside the request's one encoding; the child encodes each
        # for storage (decoding and encoding again gives the same bytes the thread would store).
        return self._add(
            [APPEND, room, expected, records, kept] if kept else [APPEND, room, expected, records]
        )

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
        if not self.alive or self._stdin is None or self._stdin.is_closing():
            self.alive = False  # its stdin is gone before its stdout's end is seen: take nothing more
            _fail(futures, WriterGone("the SQLite writer process has ended; this was not stored"))
            return
        self._waiting.append(futures)
        self._stdin.write(_pack(items))

    def _settle(self, answer: Any) -> None:
        outcomes, commits = answer
        futures = self._waiting.popleft()
        if len(outcomes) != len(futures):
            raise ValueError(f"{len(outcomes)} outcomes for {len(futures)} requests")
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
        if self._stdin is not None:
            self._stdin.close()  # the child reads to the end, answers, and exits
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._ended), 60)
        try:
            await asyncio.wait_for(asyncio.shield(self._exited), 10)
        except TimeoutError:
            if self._transport is not None:
                self._transport.kill()
            await self._exited
        if self._transport is not None:
            self._transport.close()


def _fail(futures: list[asyncio.Future[Any]], error: BaseException) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(error)


# -- the child -----------------------------------------------------------------------------------------------


def _item(raw: list[Any]) -> AppendItem | CallItem:
    if raw[0] == APPEND:
        _, room, expected, records, *kept = raw  # kept secrets ride as a fifth element, when any
        return AppendItem(room, records, expected, kept[0] if kept else ())
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
    # stdout carries the answers: log lines (``connect`` may log, moving an old file's layout) go to stderr.
    configure(stream=sys.stderr)
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
