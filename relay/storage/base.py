"""The event log interface every storage backend implements.

A room's events are records (plain dicts, shaped as ``relay.core.records`` describes) with dense seqs (1, 2,
3, …); ``append`` stores a group of them atomically after checking that the room's last stored seq is
``expected_seq`` (optimistic concurrency: two writers can never both extend the same seq). A future returned
by ``append`` completes only once the records are committed, and futures complete in the order their
appends were made.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Collection, Sequence
from typing import Any

# Part of this interface (what ``get_room`` answers), defined with the room it describes.
from relay.core.info import RoomInfo as RoomInfo
from relay.core.state import RoomState

Record = dict[str, Any]

#: Records per read when a backend without a reveal index looks for reveals (``EventLog.reveals``).
REVEAL_SCAN = 1000


def witness_into(kept: Record, participant: str, value: bytes) -> str:
    """``EventLog.keep_witness`` on a kept roll's map, changed in place when ``stored``."""
    if kept.get("closed"):
        return "closed"
    values = kept.setdefault("values", {})
    if participant in values:
        return "twice"
    values[participant] = value
    return "stored"


class Conflict(Exception):
    """The room's last stored seq was not the one the append expected."""

    def __init__(self, room: str, expected: int, actual: int) -> None:
        super().__init__(f"room {room}: expected last seq {expected}, found {actual}")
        self.room = room
        self.expected = expected
        self.actual = actual


class StoreFull(Exception):
    """The store has no room left for this append (a full disk under the SQLite file, or the NATS
    stream at its byte limit): nothing of it was stored, and later appends succeed once space is back.

    The message is a sentence for the operator's log; the client hears ``store_full``.
    """


class RoomExists(Exception):
    """An import names a room id this log already holds."""


class RoomLimitReached(Exception):
    """Creating another room would pass ``limits.max_rooms``."""


class EventLog(abc.ABC):
    #: True when other processes append to the same rooms (the cluster store): the server then follows
    #: each room it serves (``follow``) and retries appends that lost a race.
    shared = False

    def follow(self, room: str, seq: int, deliver: Callable[[list[Record]], None]) -> None:  # noqa: B027
        """From now on, call ``deliver`` with the records other writers store in ``room`` after ``seq``.

        Records reach the caller once each and in seq order, interleaved correctly with the outcomes of
        this process's own appends. A log with a single writer has nothing to deliver.
        """

    async def watch_kept(self, deliver: Callable[[str, Record], None]) -> None:  # noqa: B027
        """From now on, call ``deliver(room, kept)`` whenever what is kept for an open witnessed roll changes
        (a value stored through another process). A log with a single writer has nothing to deliver: its
        own process stored every value it holds."""

    def unfollow(self, room: str) -> None:  # noqa: B027
        """The server has let ``room`` go (unloaded it): stop delivering its records and keeping anything
        for it. The next ``state`` and ``follow`` start again from the store."""

    @abc.abstractmethod
    async def create_room(self, name: str, *, fear_max: int, hope_max: int, max_rooms: int) -> RoomInfo: ...

    @abc.abstractmethod
    async def get_room(self, room: str) -> RoomInfo | None: ...

    @abc.abstractmethod
    async def list_rooms(self) -> list[RoomInfo]: ...

    @abc.abstractmethod
    def append(
        self, room: str, records: Sequence[Record], expected_seq: int, kept: Sequence[Record] = ()
    ) -> asyncio.Future[int]:
        """Store ``records`` (seqs ``expected_seq + 1 …``); the future gives the last seq, or ``Conflict``.

        ``kept``: what open witnessed rolls need to be completed by another node or after a crash
        (``relay.core.fair.kept``: each names its room, its ``pending`` seq and ``commit``), stored apart
        from the events, with them or before them: no stored record lacks its kept secrets. Never in the
        log or an export (it holds the roll's nonce and intent before its reveal)."""

    @abc.abstractmethod
    async def keep_witness(self, room: str, pending: int, commit: str, participant: str, value: bytes) -> str:
        """Add a witness's value to what is kept for the open roll of pending ``pending``: ``stored``,
        ``twice`` (this participant's value is stored already), ``closed`` (its roll is being made) or
        ``missing`` (nothing kept: its roll is made)."""

    @abc.abstractmethod
    async def close_pending(self, room: str, pending: int, commit: str) -> Record | None:
        """Close what is kept for pending ``pending`` to later values and return it with every value
        stored (the same when closed again); None when nothing is kept for it."""

    @abc.abstractmethod
    async def kept_rolls(self, room: str) -> list[Record]:
        """Everything kept for the room's open witnessed rolls."""

    @abc.abstractmethod
    async def retire_kept(self, room: str, upto: int, keep: Collection[tuple[int, str]]) -> None:
        """Forget what is kept for the room's pendings at seqs up to ``upto``, except the (pending, commit)
        pairs in ``keep`` (the pendings still open): their rolls are stored, or they never were."""

    @abc.abstractmethod
    async def ensure_seed(self, room: str, n: int, candidate: bytes) -> bytes:
        """The room's secret dice seed ``n`` (spec/fairness.md): ``candidate`` when none was stored, else the
        stored one, so every node that asks gets the same. Kept apart from the events (never in the log or an
        export before its reveal), readable by every node, carried by backups."""

    @abc.abstractmethod
    async def seeds(self, room: str, first: int = 1) -> dict[int, bytes]:
        """The room's stored dice seeds numbered ``first`` and later."""

    @abc.abstractmethod
    async def read(self, room: str, after_seq: int, limit: int) -> list[Record]:
        """Up to ``limit`` records with seq > ``after_seq``, oldest first."""

    @abc.abstractmethod
    async def state(self, room: str) -> RoomState:
        """The fold of every stored record of ``room``."""

    async def reveals(self, room: str, after: int, upto: int) -> dict[int, int]:
        """The stored reveals of the rolls with ``after < seq <= upto``: the roll's seq -> its reveal's.

        Asked for old hidden rolls that have left a loaded room's memory (``relay.shell.old_rolls``). This
        default reads the room's events from ``after`` on (a reveal always follows its roll); a backend
        with an index on the revealed seq answers from it (``relay.storage.sqlite.log``).
        """
        found: dict[int, int] = {}
        seq = after
        while True:
            records = await self.read(room, seq, REVEAL_SCAN)
            for record in records:
                of = record.get("of") if record["kind"] == "reveal" else None
                if isinstance(of, int) and after < of <= upto:
                    found.setdefault(of, record["seq"])
            if len(records) < REVEAL_SCAN:
                return found
            seq = records[-1]["seq"]

    async def last_seq(self, room: str) -> int:
        """The room's last stored seq (0: none)."""
        return (await self.state(room)).seq

    # -- campaign life cycle (relay.ops.campaign). Not abstract, so a backend without them still loads; the
    # commands that need them say so. Archiving needs nothing here: it is an ``archive`` event.

    async def import_room(
        self, info: RoomInfo, records: Sequence[Record], *, max_rooms: int, kept: Sequence[Record] = ()
    ) -> None:
        """Store a room exactly as given (its id, epoch and every record, seqs 1..n), atomically, with
        ``kept`` (as ``append`` stores it) for its pendings still open.

        Raises ``RoomExists`` when a room with that id is already stored (nothing is changed then) and
        ``RoomLimitReached`` past ``max_rooms``. The caller has checked the records (signatures, dense
        seqs, a fold that applies).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot import rooms")

    async def delete_room(self, room: str) -> bool:
        """Remove the room and all its events for good; False when there was no such room."""
        raise NotImplementedError(f"{type(self).__name__} cannot delete rooms")

    @abc.abstractmethod
    async def close(self) -> None:
        """Finish every append already made, then release the storage."""
