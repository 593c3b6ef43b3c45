"""The PubAcks of the cluster log's publishes. They come to one inbox subscription of its own, not through
``JetStreamContext.publish``: its request machinery (a random token from the OS, a reflective PubAck
dataclass, a validation of both subjects) cost about a tenth of a node's CPU per roll in the cluster's
many-tables profile.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from relay.storage.base import StoreFull
from relay.storage.nats.stream import PUBLISH_TIMEOUT, STREAM

#: The status of a reply when nothing listens on the subject: no stream holds it.
NO_RESPONDERS = "503"
#: Seconds between looks for late PubAcks: a publish times out 2 to 2.25 s after it left.
ACK_SWEEP = 0.25


class PubAcks:
    """Publishes to the stream, each answered with the stream seq of its PubAck; ``subscribe()`` before the
    first, ``stop()`` when done."""

    def __init__(self, nc: NatsClient) -> None:
        self.nc = nc
        self._loop = asyncio.get_running_loop()
        # Each publish's reply subject is the prefix and a token of its own.
        self.prefix = nc.new_inbox() + "."
        self._acks: dict[str, asyncio.Future[int]] = {}
        self.tokens = itertools.count(1)
        # (when its PubAck is late, token) in order, as every publish waits as long: one timer fails the
        # late ones, rather than a timeout handle and a waiter future for each publish.
        self._due: deque[tuple[float, str]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self.sub: Any = None

    async def subscribe(self) -> None:
        self.sub = await self.nc.subscribe(self.prefix + "*", cb=self.on_ack)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    async def send(self, subj: str, payload: bytes, headers: dict[str, str]) -> int:
        """Publish to the stream; the stream seq of its PubAck (errors as ``JetStreamContext.publish``)."""
        token = str(next(self.tokens))
        acked: asyncio.Future[int] = self._loop.create_future()
        self._acks[token] = acked
        self._due.append((self._loop.time() + PUBLISH_TIMEOUT, token))
        if self._timer is None:
            self._timer = self._loop.call_later(ACK_SWEEP, self._sweep)
        try:
            await self.nc.publish(subj, payload, reply=self.prefix + token, headers=headers)
            return await acked
        finally:
            del self._acks[token]

    def _sweep(self) -> None:
        now = self._loop.time()
        due = self._due
        while due and due[0][0] <= now:
            acked = self._acks.get(due.popleft()[1])
            if acked is not None and not acked.done():
                acked.set_exception(TimeoutError("no PubAck"))
        self._timer = self._loop.call_later(ACK_SWEEP, self._sweep) if due else None

    async def on_ack(self, msg: Msg) -> None:
        acked = self._acks.get(msg.subject[len(self.prefix) :])
        if acked is None or acked.done():
            return  # late: its publish timed out and is being tried again
        if msg.headers and msg.headers.get("Status") == NO_RESPONDERS:
            acked.set_exception(nats.js.errors.NoStreamResponseError())
            return
        try:
            answer = json.loads(msg.data)
            error = answer.get("error")
            if error:
                acked.set_exception(_api_error(error))
            else:
                acked.set_result(int(answer["seq"]))
        except Exception as exc:  # not a PubAck: fail the publish, which is then tried again
            acked.set_exception(nats.errors.Error(f"unreadable PubAck: {exc!r}"))


def _api_error(error: dict[str, Any]) -> nats.js.errors.APIError:
    """nats-py's error for a JetStream API error answer (its ``from_error`` raises it, not returns it)."""
    try:
        nats.js.errors.APIError.from_error(error)
    except nats.js.errors.APIError as exc:
        return exc
    return nats.js.errors.APIError(**error)


#: JetStream's answers to a publish there is no room for: the stream at its byte limit with discard policy
#: new (10077, "maximum bytes exceeded", status 503), and the server's or the account's storage used up.
STORE_FAILED = 10077
NO_ROOM = {10023: "insufficient resources", 10047: "insufficient storage resources", 10002: "account limits"}


def stream_full(exc: nats.js.errors.APIError) -> StoreFull | None:
    """``exc`` as a ``StoreFull`` when JetStream refused the message for want of room, else None."""
    said = exc.description or ""
    full = exc.err_code in NO_ROOM or (exc.err_code == STORE_FAILED and "maximum bytes" in said)
    if not full:
        return None
    return StoreFull(f"The JetStream stream {STREAM} is full ({said}); nothing of this was stored.")
