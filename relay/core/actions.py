"""What the room answers with, for the I/O shell to carry out, and the session it answers.

``Room`` (``relay.core.room``) and campaign management (``relay.core.membership``) both return lists of
``Action``: ``Send`` a frame to one session, ``Append`` records to the log (a ``Pending``), ``Broadcast`` a
committed record, or an ``Effect`` (closing sockets, sending tokens) that ``relay.shell.campaign_io`` carries
out. They live here, under both, so neither imports the other for them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from relay.core.state import Member


class Refused(Exception):
    """A hello the room will not take; ``code`` is the close code, the message its reason."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class Session:
    """One socket's view of the room: who it is and which renderings it asked for.

    ``id`` and ``role`` are copied out of ``member`` because fan-out reads them once per event per socket.
    """

    __slots__ = ("formats", "id", "member", "role", "witness")

    def __init__(self, member: Member, formats: frozenset[str] = frozenset(), witness: bool = False) -> None:
        self.member = member
        self.formats = formats
        self.id = member.id
        self.role = member.role
        self.witness = witness  # its hello said it witnesses rolls (spec/fairness.md)


@dataclass(eq=False)
class Pending:
    """Records handed to the log together, and who waits for them."""

    records: list[dict[str, Any]]
    expected: int  # the seq the first record follows
    generation: int
    ack_seq: int | None = None  # the seq acks carry
    acks: list[tuple[Session, str]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    done: list[Callable[[BaseException | None], None]] = field(default_factory=list)
    effects: tuple[Effect, ...] = ()  # for the I/O shell once stored (relay.core.membership)
    # Secrets an open witnessed roll needs to be completed after a crash (relay.core.fair.kept): stored with
    # the records (the same SQLite transaction) or before them (the NATS store), never in the log.
    kept: list[dict[str, Any]] = field(default_factory=list)
    completes: int | None = None  # the pending event's seq, when this is the roll that completes it

    @property
    def last(self) -> int:
        return self.expected + len(self.records)


@dataclass(frozen=True)
class Send:
    session: Session
    frame: dict[str, Any]


@dataclass(frozen=True)
class Append:
    pending: Pending


@dataclass(frozen=True)
class Broadcast:
    record: dict[str, Any]


class Effect:
    """Something else the I/O shell carries out (closing sockets, sending tokens): relay.core.membership."""

    __slots__ = ()


@dataclass(frozen=True)
class PrepareSeed:
    """Draw and store the room's dice seed ``n`` (spec/fairness.md), then hand it to the room."""

    n: int


@dataclass(frozen=True)
class WaitWitnesses:
    """Call the room's ``witness_due(pending)`` after ``ms`` milliseconds, if the roll is not made by then."""

    pending: int
    ms: int


@dataclass(frozen=True)
class KeepWitness:
    """Store a witness's value for the open roll of pending event ``pending`` (``commit`` tells that
    pending from any other stored at the same seq), then hand the outcome to ``relay.core.fair.witness_kept``:
    the witness's ack means its value is stored, so a restart or another node completes the roll with it."""

    pending: int
    commit: str
    participant: str
    value: bytes
    session: Session
    request: str


@dataclass(frozen=True)
class RetireKept:
    """A roll completing a pending is stored: forget what the store keeps for the room's pendings up to seq
    ``upto``, except ``keep`` (those still open, by seq and commit)."""

    upto: int
    keep: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class Measure:
    """A figure for the shell's metrics (``relay.shell.observe.metrics.Metrics.measure``)."""

    name: str
    value: float = 1.0


Action = Send | Append | Broadcast | PrepareSeed | WaitWitnesses | KeepWitness | RetireKept | Measure | Effect
