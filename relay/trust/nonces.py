"""Nonce pairs for Ed25519 made in a child process, so that signing on the event loop costs about 3 µs.

``relay.trust.ed25519`` explains the scheme: the costly part of a signature, r·B, does not depend on the
message, so a child process (``python -m relay.trust.nonces``) draws r and multiplies it out ahead of time, on
the other core, and the event loop signs each event form as it is made, in the iteration that made it: no
request to answer, nothing for a broadcast to wait for, and the event leaves with its ack.

The pipe protocol: the parent writes a count (4 bytes, big-endian); the child answers that many pairs,
``relay.trust.ed25519.PAIR`` bytes each. The child never sees the signing key. One request is in flight at a
time: the pool asks for ``BATCH`` more when it holds ``BATCH`` or fewer, so it holds at most ``2 × BATCH - 1``
pairs, a few tens of milliseconds of signing at the fastest the server goes. When the pool is empty
(startup before the first answer, a burst faster than the child, the child gone) ``take`` answers None and
the key signs as RFC 8032 does: the same trust, 20 µs instead of 2. A child that ends while the server
runs is started again, a second later at first and up to a minute apart while it keeps ending.

A pair is secret (with its signature it gives the key away) and is used once: ``take`` removes it, a
forked child of the server forgets every pool (``os.register_at_fork``), and ``close`` drops what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import struct
import sys
import time
import weakref

from relay.settings.logs import get_logger
from relay.trust.ed25519 import PAIR, nonces

logger = get_logger("relay.nonces")
COUNT = struct.Struct(">I")
#: Pairs asked for at a time: 32 KiB, about 9 ms of the child's CPU; at 20,000 signatures a second (more
#: than the server makes) a batch lasts 25 ms.
BATCH = 512
#: Seconds before starting a child that ended: doubled on each failure in a row, up to the last.
RESTART_DELAYS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0)
#: A child that made pairs this long counts as having worked: the next failure starts the delays over.
RESTART_RESET = 60.0

_pools: weakref.WeakSet[NoncePool] = weakref.WeakSet()


def _forget_all() -> None:
    # A forked child holds a copy of every pair: were it to sign, each pair could be used twice.
    for pool in list(_pools):
        pool.forget()


os.register_at_fork(after_in_child=_forget_all)


class NoncePool:
    """The parent's side: pairs from the child, each handed out by ``take`` once."""

    def __init__(self, process: asyncio.subprocess.Process, batch: int = BATCH) -> None:
        self.process = process
        self.batch = batch
        self._pairs: list[bytes] = []
        self._asked = False
        self._first = asyncio.get_running_loop().create_future()
        self._reader = asyncio.get_running_loop().create_task(self._read())
        self.alive = True  # a child is there to answer
        self.closing = False
        _pools.add(self)

    @classmethod
    async def start(cls, batch: int = BATCH) -> NoncePool:
        """Start the child and wait (a few milliseconds) for its first batch."""
        pool = cls(await _spawn(), batch)
        pool._ask()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(pool._first), 10)
        return pool

    def __len__(self) -> int:
        return len(self._pairs)

    def take(self) -> bytes | None:
        """One pair (r ‖ R), never handed out again; None when there is none (sign deterministically)."""
        pairs = self._pairs
        if len(pairs) <= self.batch and not self._asked:
            self._ask()
        return pairs.pop() if pairs else None

    def forget(self) -> None:
        self._pairs = []

    def _ask(self) -> None:
        stdin = self.process.stdin
        if not self.alive or stdin is None or stdin.is_closing():
            return
        self._asked = True
        stdin.write(COUNT.pack(self.batch))

    async def _read(self) -> None:
        failures = 0
        try:
            while True:
                started = time.monotonic()
                error = await self._read_child()
                if self.closing:
                    return
                # The child ended: sign deterministically until another one answers.
                self.alive = False
                self._asked = False
                if not self._first.done():
                    self._first.set_result(None)
                if time.monotonic() - started > RESTART_RESET:
                    failures = 0
                delay = RESTART_DELAYS[min(failures, len(RESTART_DELAYS) - 1)]
                failures += 1
                logger.error("nonce_maker_ended", error=error, restart_in=delay)
                ended = self.process
                if ended.stdin is not None:
                    ended.stdin.close()
                await asyncio.sleep(delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ended.wait(), 5)  # reaped, not left a zombie
                if self._closed():
                    return
                try:
                    self.process = await _spawn()
                except OSError as exc:
                    logger.error("nonce_maker_not_started", error=repr(exc))
                    continue  # counted as a failure: the next try waits longer
                self.alive = True
                self._ask()
                logger.info("nonce_maker_restarted", pid=self.process.pid)
        finally:
            self.alive = False
            if not self._first.done():
                self._first.set_result(None)

    def _closed(self) -> bool:
        return self.closing  # read afresh after an await (a plain attribute test would be narrowed)

    async def _read_child(self) -> str:
        """Take the current child's batches until it ends; what ended it."""
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while True:
                data = await stdout.readexactly(self.batch * PAIR)
                if self.closing:
                    return "closed"  # closed while the batch was on its way
                self._pairs += [data[i : i + PAIR] for i in range(0, len(data), PAIR)]
                self._asked = False
                if not self._first.done():
                    self._first.set_result(None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return repr(exc)

    async def close(self) -> None:
        self.closing = True
        self.alive = False
        self.forget()
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 5)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


async def _spawn() -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "relay.trust.nonces",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )


def _serve() -> None:
    """The child: answer each count with that many fresh pairs until the parent closes the pipe.

    Signals meant for the server (Ctrl-C in a terminal, a service manager's SIGTERM to the group) are
    ignored: the server goes on signing while it drains, then closes the pipe.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = source.read(COUNT.size)
        if len(head) < COUNT.size:
            return
        (count,) = COUNT.unpack(head)
        sink.write(nonces(count))
        sink.flush()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        _serve()
