"""Ed25519 signing in a process of its own, beside the event loop.

A signature costs about 30 µs, about a quarter of the server's work per roll. A thread does not help:
``cryptography`` lets go of the GIL only inside each signature, and taking it back from a busy event loop
stalls both (a forced switch waits up to the 5 ms switch interval). A child process signs on the other
core instead, and the loop only writes the messages to a pipe and reads the signatures back, once per
group of events committed together.

The pipe protocol: the parent first writes the 32-byte private key; then each request (one per loop
iteration, holding every ``sign`` call made in it) is a count and that many length-prefixed messages,
and each answer is the count and that many 64-byte signatures, in request order. The key travels over
the pipe, never in the command line or the environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import struct
import sys
from collections import deque
from collections.abc import Callable

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from relay.logs import get_logger

logger = get_logger("relay.signer")
COUNT = struct.Struct(">I")
SIGNATURE = 64


class SignerGone(RuntimeError):
    """The signing process has ended; signatures are then made in the server process."""


#: Called with a request's signatures, or with None when the signing process ended before answering.
Answer = Callable[[list[bytes] | None], None]


class _Pipes(asyncio.subprocess.SubprocessStreamProtocol):
    """The child's stdout handed to ``on_data`` as it arrives, without a reader task.

    A task reading a stream resumes one loop iteration after its data arrives, and every future it
    completes runs its callbacks one iteration later still; under load every iteration is long, so the
    answers are parsed right where the bytes come in and the callbacks are called from there.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=1 << 16, loop=loop)
        self.on_data: Callable[[bytes], None] = lambda _: None
        self.on_lost: Callable[[BaseException | None], None] = lambda _: None

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if fd == 1 and isinstance(data, bytes):
            self.on_data(data)
        else:
            super().pipe_data_received(fd, data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self.on_lost(exc)
        super().pipe_connection_lost(fd, exc)


class SignerProcess:
    """The parent's side: ``sign`` hands messages to the child; their signatures come back in order."""

    def __init__(self, process: asyncio.subprocess.Process, pipes: _Pipes) -> None:
        self.process = process
        # Requests written and not yet answered: per request, its message count and the callers it
        # carries (every ``sign`` call of one loop iteration), in order.
        self._waiting: deque[tuple[int, list[tuple[int, Answer]]]] = deque()
        self._calls: list[tuple[int, Answer]] = []  # this iteration's, not yet sent
        self._unsent: list[bytes] = []  # their messages, each with its length prefix
        self._buffer = b""
        self.alive = True
        pipes.on_data = self._received
        pipes.on_lost = self._lost

    @classmethod
    async def start(cls, private: Ed25519PrivateKey) -> SignerProcess:
        loop = asyncio.get_running_loop()
        # What asyncio.create_subprocess_exec does, with the protocol above for the child's stdout.
        transport, pipes = await loop.subprocess_exec(
            lambda: _Pipes(loop),
            sys.executable,
            "-m",
            "relay.signer",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=None,
        )
        process = asyncio.subprocess.Process(transport, pipes, loop)
        assert process.stdin is not None
        raw = private.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
        process.stdin.write(raw)
        return cls(process, pipes)

    def sign(self, messages: list[bytes]) -> asyncio.Future[list[bytes]]:
        """A future of the signatures of ``messages`` (SignerGone if the process ends first)."""
        future: asyncio.Future[list[bytes]] = asyncio.get_running_loop().create_future()

        def answer(signatures: list[bytes] | None) -> None:
            if future.done():
                return
            if signatures is None:
                future.set_exception(SignerGone("the signing process has ended"))
            else:
                future.set_result(signatures)

        self.sign_then(messages, answer)
        return future

    def sign_then(self, messages: list[bytes], answer: Answer) -> None:
        """Have ``messages`` signed; ``answer`` gets their signatures, or None if the process is gone.

        ``answer`` is called straight from the pipe's data callback (or at once, when the process has
        ended), not from a task or a future's callback, each of which would cost a loop iteration.
        """
        stdin = self.process.stdin
        if not self.alive or stdin is None or stdin.is_closing():
            answer(None)
            return
        if not self._calls:
            # One request per loop iteration, whatever the number of rooms that committed in it: every
            # write to the pipe wakes the child, and every answer wakes the loop, which costs more than
            # the bytes do (with a thousand small tables, each iteration commits rolls of dozens of rooms).
            # ``flush`` sends it sooner when the caller knows no more will come in this iteration.
            asyncio.get_running_loop().call_soon(self.flush)
        self._calls.append((len(messages), answer))
        for message in messages:
            self._unsent += (COUNT.pack(len(message)), message)

    def flush(self) -> None:
        """Write this iteration's request now (nothing if it was written already)."""
        calls, self._calls = self._calls, []
        if not calls:
            return
        unsent, self._unsent = self._unsent, []
        count = sum(n for n, _ in calls)
        stdin = self.process.stdin
        if not self.alive or stdin is None or stdin.is_closing():
            for _, answer in calls:
                answer(None)
            return
        self._waiting.append((count, calls))
        stdin.write(COUNT.pack(count) + b"".join(unsent))

    def _received(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        at = 0
        answered: list[tuple[Answer, list[bytes]]] = []
        current: list[tuple[int, Answer]] = []  # popped, not yet parsed
        try:
            while len(buffer) - at >= COUNT.size:
                (count,) = COUNT.unpack_from(buffer, at)
                end = at + COUNT.size + count * SIGNATURE
                if len(buffer) < end:
                    break
                if not self._waiting:
                    raise SignerGone("the signing process answered a request never made")
                expected, current = self._waiting.popleft()
                if expected != count:
                    raise SignerGone(f"the signing process answered {count} signatures for {expected}")
                at += COUNT.size
                for n, answer in current:
                    stop = at + n * SIGNATURE
                    answered.append((answer, [buffer[i : i + SIGNATURE] for i in range(at, stop, SIGNATURE)]))
                    at = stop
                current = []
        except Exception as exc:  # the child misbehaved: sign in this process from now on
            unanswered = [answer for answer, _ in answered] + [answer for _, answer in current]
            answered.clear()
            self._buffer = b""
            self._lost(exc)
            self.process.kill()
            for answer in unanswered:
                answer(None)
            return
        finally:
            # Outside the parsing: a failing caller must not be taken for a misbehaving child.
            for answer, signatures in answered:
                try:
                    answer(signatures)
                except Exception:
                    logger.exception("signature_answer_failed")
        self._buffer = buffer[at:]

    def _lost(self, exc: BaseException | None) -> None:
        if self.alive:
            logger.error("signer_ended", error=repr(exc) if exc else "end of its output")
        self.alive = False
        while self._waiting:
            _, calls = self._waiting.popleft()
            for _, answer in calls:
                answer(None)

    async def close(self) -> None:
        self.alive = False
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 5)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        self.flush()  # answers None to calls not yet written: the process is gone
        self._lost(None)


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
    sign = Ed25519PrivateKey.from_private_bytes(raw).sign
    del raw
    while True:
        head = source.read(COUNT.size)
        if len(head) < COUNT.size:
            return
        (count,) = COUNT.unpack(head)
        signatures = []
        for _ in range(count):
            (length,) = COUNT.unpack(source.read(COUNT.size))
            signatures.append(sign(source.read(length)))
        sink.write(COUNT.pack(count) + b"".join(signatures))
        sink.flush()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        _serve()
