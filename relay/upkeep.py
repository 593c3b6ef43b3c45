"""Upkeep of the loaded rooms, off the hot path: a task that looks at every loaded room every few seconds.

- **Hidden rolls' blobs**: a hidden roll's blob and nonce (what its reveal publishes) are in its stored
  record. Once the roll is older than the room's recent window (``Limits.history`` seqs) they are dropped
  from memory; a late reveal reads them back from the log first (``reveal_later``). The two folds'
  entries for such a roll then point at one entry shared by every old unrevealed roll of the same roller
  and visibility (``settled``), so a room keeps a seq and two dict slots per old hidden roll.
- **Idle rooms**: a room with no socket, no append in flight and nothing waiting to be broadcast for
  ``Limits.room_idle`` seconds is unloaded; the next hello for it loads it from the log again.
- **Freed memory back to the system**: once a minute, on glibc, ``malloc_trim(0)`` hands the pages that
  freed C-level allocations left empty (frames, encoded records, dict tables over 512 bytes all come from
  ``malloc``) back to the kernel. Without it the soak saw the resident size creep up long after the
  Python objects had stopped growing (docs/hardening.md). Its duration is logged (``memory_trimmed``).

Nothing here runs per roll: a roll's path is unchanged, and the upkeep only ever looks at rooms.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from relay import memtrace, protocol
from relay.log.base import EventLog
from relay.logs import get_logger
from relay.room import Room
from relay.state import Sealed

if TYPE_CHECKING:
    from relay.server import Connection, Relay, RoomHandle

logger = get_logger("relay.upkeep")

#: Seconds between two looks at the loaded rooms (more often when ``Limits.room_idle`` is short).
EVERY = 10.0
#: Seconds between two ``malloc_trim`` calls.
TRIM_EVERY = 60.0


def _malloc_trim() -> Callable[[], int] | None:
    """glibc's ``malloc_trim(0)``, or None on another C library or system."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: int(trim(0))


def blob_dropped(room: Room, seq: int) -> bool:
    """True when ``seq`` is an unrevealed hidden roll whose blob is no longer in memory."""
    sealed = room.pending.sealed.get(seq)
    return sealed is not None and sealed.revealed is None and not sealed.blob


#: Old unrevealed rolls' shared entries, one per (roller, visibility) (``relay.state.Sealed``).
Settled = dict[tuple[str, str], Sealed]


def settled(shared: Settled, sealed: Sealed) -> Sealed:
    """The entry every old unrevealed roll of ``sealed``'s roller and visibility shares (no blob)."""
    key = (sealed.roller, sealed.visibility)
    entry = shared.get(key)
    if entry is None:
        entry = shared[key] = Sealed(sys.intern(sealed.roller), sys.intern(sealed.visibility), b"", b"")
    return entry


async def restore_blob(log: EventLog, room: Room, seq: int) -> None:
    """Read hidden roll ``seq``'s blob and nonce back from the log into the room's states."""
    records = await log.read(room.id, seq - 1, 1)
    if not records or records[0]["seq"] != seq or records[0].get("sealed") is None:
        return
    stored = records[0]["sealed"]
    for state in (room.committed, room.pending):
        sealed = state.sealed.get(seq)
        if sealed is not None and sealed.revealed is None and not sealed.blob:
            state.sealed[seq] = Sealed(sealed.roller, sealed.visibility, stored["blob"], stored["nonce"])


def forget_blobs(room: Room, after: int, shared: Settled) -> int:
    """Settle the hidden rolls with ``after < seq <= cutoff``, the cutoff being the start of the room's
    recent window: an unrevealed one's entry becomes the shared one of its roller and visibility (no
    blob), a revealed one's entry in ``pending`` the same object as in ``committed``. Returns the cutoff
    (the next call's ``after``)."""
    cutoff = room.committed.seq - room.limits.history
    if cutoff <= after:
        return after
    committed, pending = room.committed.sealed, room.pending.sealed
    for seq in reversed(committed):  # newest first: stop at what an earlier call did
        if seq <= after:
            break
        if seq > cutoff:
            continue
        sealed = committed[seq]
        if sealed.revealed is None:
            committed[seq] = settled(shared, sealed)
            if _same_unrevealed(pending.get(seq), sealed):  # else a merge or reveal not yet stored
                pending[seq] = committed[seq]
        elif pending.get(seq) == sealed:  # revealed in both, equal field by field
            pending[seq] = sealed
    return cutoff


def _same_unrevealed(other: Sealed | None, sealed: Sealed) -> bool:
    return other is not None and other.revealed is None and other.roller == sealed.roller


def idle(handle: RoomHandle) -> bool:
    """No socket, nothing being stored, nothing waiting to be signed or broadcast."""
    return not (
        handle.subscribers
        or handle.sessions
        or handle.room.sockets
        or handle.room.inflight
        or handle.outgoing
        or handle.signing
    )


class Upkeep:
    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self._forgotten: dict[str, int] = {}  # room id -> the seq up to which blobs were dropped
        self._idle_since: dict[str, float] = {}  # room id -> when it was first seen idle (monotonic)
        self._settled: dict[str, Settled] = {}  # room id -> its old unrevealed rolls' shared entries
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        every = min(EVERY, self.relay.limits.room_idle / 3)
        trim = _malloc_trim()
        trimmed = time.monotonic()
        tracing = memtrace.from_env()  # TABLERELAY_TRACEMALLOC: off unless an operator asks
        traced = time.monotonic()
        while True:
            await asyncio.sleep(every)
            try:
                now = time.monotonic()
                self.tick(now)
                if trim is not None and now - trimmed >= TRIM_EVERY:
                    trimmed = now
                    trim()
                    took = time.monotonic() - now
                    logger.info(
                        "memory_trimmed",
                        ms=round(took * 1000, 2),
                        blocks=sys.getallocatedblocks(),
                        full_collections=gc.get_stats()[2]["collections"],  # cycles freed only then
                    )
                if tracing is not None and now - traced >= TRIM_EVERY:
                    traced = now
                    logger.info("memory_sites", **tracing.report())
            except Exception:
                logger.exception("upkeep_failed")

    def tick(self, now: float) -> None:
        relay = self.relay
        for room_id, handle in list(relay.rooms.items()):
            shared = self._settled.setdefault(room_id, {})
            self._forgotten[room_id] = forget_blobs(handle.room, self._forgotten.get(room_id, 0), shared)
            if not idle(handle):
                self._idle_since.pop(room_id, None)
                continue
            since = self._idle_since.setdefault(room_id, now)
            if now - since >= relay.limits.room_idle:
                self.unload(room_id)

    def unload(self, room_id: str) -> None:
        relay = self.relay
        handle = relay.rooms.pop(room_id, None)
        self._forgotten.pop(room_id, None)
        self._idle_since.pop(room_id, None)
        self._settled.pop(room_id, None)
        if handle is None:
            return
        relay.metrics.rooms.set(len(relay.rooms))
        logger.info("room_unloaded", room=room_id, seq=handle.room.committed.seq)

    def _forget_again(self, room: Room, seq: int) -> None:
        """A refused late reveal (not the roller, not a GM) leaves the blob out of memory again."""
        sealed = room.pending.sealed.get(seq)
        if sealed is None or sealed.revealed is not None or seq > self._forgotten.get(room.id, 0):
            return
        shared = self._settled.setdefault(room.id, {})
        for state in (room.committed, room.pending):
            kept = state.sealed.get(seq)
            if kept is not None and kept.revealed is None:
                state.sealed[seq] = settled(shared, kept)

    def reveal_later(self, handle: RoomHandle, conn: Connection, frame: protocol.Reveal) -> None:
        """Read the roll's blob back from the log, then handle the reveal as if it had just arrived."""
        task = asyncio.get_running_loop().create_task(self._reveal(handle, conn, frame))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reveal(self, handle: RoomHandle, conn: Connection, frame: protocol.Reveal) -> None:
        relay = self.relay
        try:
            await restore_blob(relay.log, handle.room, frame.seq)
            if conn.closing or relay.stopping or conn.handle is not handle:
                return  # the client resends it after it resumes; a reveal is idempotent
            if blob_dropped(handle.room, frame.seq):
                raise RuntimeError(f"the log holds no sealed roll at seq {frame.seq}")
            relay._execute(handle, handle.room.handle(conn.session, frame))
            self._forget_again(handle.room, frame.seq)
        except Exception:
            logger.exception("late_reveal_failed", room=handle.room.id, seq=frame.seq)
            relay._send(
                conn, protocol.error_frame("internal", "Something went wrong on the server.", frame.id)
            )
