"""Ed25519 signing in a process of its own, beside the event loop.

A signature costs about 20 µs (libsodium, through PyNaCl; 34 µs with ``cryptography``'s OpenSSL), a
fifth of the server's work per roll. A thread does not help:
``cryptography`` lets go of the GIL only inside each signature, and taking it back from a busy event loop
stalls both (a forced switch waits up to the 5 ms switch interval). A child process signs on the other
core instead, and the loop only writes the messages to a pipe and reads the signatures back, once per
group of events committed together.

The pipe protocol: the parent first writes the 32-byte private key; then each request (one per loop
iteration, holding every ``sign`` call made in it) is a count and that many messages, each its room id
and the canonical encoding of an event's signed part (the one encoding a form gets: the sockets get the
same bytes with ``t``, ``kid`` and ``sig`` appended), both length-prefixed; the child signs
``relay.signing.message`` of them. Each answer is the count and that many 64-byte signatures, in request
order. The key travels over the pipe, never in the command line or the environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import struct
import sys
from collections import deque

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from relay.logs import get_logger
from relay.signing import message, signer_of

logger = get_logger("relay.signer")
COUNT = struct.Struct(">I")
ROOM = struct.Struct(">H")
SIGNATURE = 64


class SignerGone(RuntimeError):
    """The signing process has ended; signatures are then made in the server process."""


class SignerProcess:
    """The parent's side: ``sign`` hands messages to the child and returns a future of their signatures."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        # Requests written and not yet answered: per request, its message count and the futures it
        # carries (every ``sign`` call of one loop iteration), in order.
        self._waiting: deque[tuple[int, list[tuple[int, asyncio.Future[list[bytes]]]]]] = deque()
        self._calls: list[tuple[int, asyncio.Future[list[bytes]]]] = []  # this iteration's, not yet sent
        self._unsent: list[bytes] = []  # their messages, each with its length prefix
        self._reader = asyncio.get_running_loop().create_task(self._read())
        self.alive = True

    @classmethod
    async def start(cls, private: Ed25519PrivateKey) -> SignerProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "relay.signer",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdin is not None
        raw = private.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
        process.stdin.write(raw)
        return cls(process)

    def sign(self, room_id: str, bodies: list[bytes]) -> asyncio.Future[list[bytes]]:
        """Signatures of ``bodies`` (canonical encodings of events' signed parts) in room ``room_id``."""
        future: asyncio.Future[list[bytes]] = asyncio.get_running_loop().create_future()
        stdin = self.process.stdin
        if not self.alive or stdin is None or stdin.is_closing():
            future.set_exception(SignerGone("the signing process has ended"))
            return future
        if not self._calls:
            # One request per loop iteration, whatever the number of rooms that committed in it: every
            # write to the pipe wakes the child, and every answer wakes the loop, which costs more than
            # the bytes do (with a thousand small tables, each iteration commits rolls of dozens of rooms).
            asyncio.get_running_loop().call_soon(self._send)
        self._calls.append((len(bodies), future))
        room = room_id.encode()
        prefix = ROOM.pack(len(room)) + room
        for body in bodies:
            self._unsent += (prefix, COUNT.pack(len(body)), body)
        return future

    def flush(self) -> None:
        """Write this iteration's request now rather than at the start of the next iteration."""
        self._send()

    def _send(self) -> None:
        if not self._calls:
            return  # flushed already
        calls, self._calls = self._calls, []
        unsent, self._unsent = self._unsent, []
        count = sum(n for n, _ in calls)
        stdin = self.process.stdin
        if not self.alive or stdin is None or stdin.is_closing():
            for _, future in calls:
                if not future.done():
                    future.set_exception(SignerGone("the signing process has ended"))
            return
        self._waiting.append((count, calls))
        stdin.write(COUNT.pack(count) + b"".join(unsent))

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while True:
                (count,) = COUNT.unpack(await stdout.readexactly(COUNT.size))
                data = await stdout.readexactly(count * SIGNATURE)
                expected, calls = self._waiting.popleft()
                if expected != count:
                    raise SignerGone(f"the signing process answered {count} signatures for {expected}")
                at = 0
                for n, future in calls:
                    end = at + n * SIGNATURE
                    if not future.done():
                        future.set_result([data[i : i + SIGNATURE] for i in range(at, end, SIGNATURE)])
                    at = end
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the child ended or misbehaved: sign in this process from now on
            if self.alive:
                logger.error("signer_ended", error=repr(exc))
        finally:
            self.alive = False
            while self._waiting:
                _, calls = self._waiting.popleft()
                for _, future in calls:
                    if not future.done():
                        future.set_exception(SignerGone("the signing process has ended"))

    async def close(self) -> None:
        self.alive = False
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


def _serve() -> None:
    """The child: sign each request's messages until the parent closes the pipe.

    Signals meant for the server (Ctrl-C in a terminal, a service manager's SIGTERM to the group) are
    ignored: the server finishes its broadcasts, with signatures, and then closes the pipe.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    raw = source.read(32)
    if len(raw) != 32:
        return
    sign = signer_of(raw)
    del raw
    while True:
        head = source.read(COUNT.size)
        if len(head) < COUNT.size:
            return
        (count,) = COUNT.unpack(head)
        signatures = []
        for _ in range(count):
            (size,) = ROOM.unpack(source.read(ROOM.size))
            room_id = source.read(size).decode()
            (length,) = COUNT.unpack(source.read(COUNT.size))
            signatures.append(sign(message(source.read(length), room_id)))
        sink.write(COUNT.pack(count) + b"".join(signatures))
        sink.flush()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        _serve()
