"""What the cluster log knows of each room's subject (a ``Lane``): its tail, the appends waiting to be
published and this node's publishes in flight, and what the server has been handed of other nodes' events.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from relay.storage.base import Record

Deliver = Callable[[list[Record]], None]


@dataclass(eq=False)
class Append:
    records: Sequence[Record]
    expected: int
    future: asyncio.Future[int]
    kept: Sequence[Record] = ()  # stored in the pendings bucket before the message is published

    @property
    def last(self) -> int:
        return self.expected + len(self.records)


@dataclass(eq=False, slots=True)
class Own:
    """A publish of this node in flight: its room seqs and, once the stream has delivered it back, its
    bytes (decoded only if the publish is given up: otherwise the records are already known here)."""

    first: int
    last: int
    data: bytes | None = None


@dataclass(eq=False)
class Lane:
    """What this node knows of one room's subject."""

    room: str
    subject: str
    # The last message known on the subject: its last room seq and its stream seq (-1: not known yet).
    tail_seq: int = -1
    tail_stream: int = 0
    queue: deque[Append] = field(default_factory=deque)
    busy: bool = False
    refusing: BaseException | None = None  # set between a failure and the server having seen it
    # Delivery to the server.
    tracking: bool = False  # state() has been asked: remote messages are kept from now on
    deliver: Deliver | None = None  # set by follow()
    delivered: int = 0  # the last seq the server has been given
    held: dict[int, list[Record]] = field(default_factory=dict)  # remote messages by first seq
    own: dict[str, Own] = field(default_factory=dict)  # this node's publishes in flight, by Msg-Id
    # (first room seq, stream seq) of each message, when known from seq 1 on: where a read starts.
    index: list[tuple[int, int]] = field(default_factory=list)
    indexed: bool = False
    filling: bool = False  # a read of events the stream has not delivered is under way

    def note(self, first: int, last: int, stream_seq: int) -> None:
        if stream_seq > self.tail_stream:
            self.tail_stream, self.tail_seq = stream_seq, last
        if self.indexed and (not self.index or first > self.index[-1][0]):
            self.index.append((first, stream_seq))
