"""Upkeep of the loaded rooms, off the hot path: a task that looks at every loaded room every few seconds.

- **Hidden rolls' blobs**: a hidden roll's blob and nonce (what its reveal publishes) are in its stored
  record. Once the roll is older than the room's recent window (``Limits.history`` seqs) they are dropped
  from memory; a late reveal reads them back from the log first (``reveal_later``). A room then keeps a
  few dozen bytes per unrevealed hidden roll rather than the whole sealed body.
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
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from relay import protocol
from relay.log.base import EventLog
from relay.logs import get_logger
from relay.room import Room

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


async def restore_blob(log: EventLog, room: Room, seq: int) -> None:
    """Read hidden roll ``seq``'s blob and nonce back from the log into the room's states."""
    records = await log.read(room.id, seq - 1, 1)
    if not records or records[0]["seq"] != seq or records[0].get("sealed") is None:
        return
    stored = records[0]["sealed"]
    for state in (room.committed, room.pending):
        sealed = state.sealed.get(seq)
        if sealed is not None and sealed.revealed is None and not sealed.blob:
            sealed.blob, sealed.nonce = stored["blob"], stored["nonce"]


def forget_blobs(room: Room, after: int) -> int:
    """Drop the blobs of hidden rolls with ``after < seq <= cutoff``, the cutoff being the start of the
    room's recent window; returns the cutoff (the next call's ``after``)."""
    cutoff = room.committed.seq - room.limits.history
    if cutoff <= after:
        return after
    for state in (room.committed, room.pending):
        for seq in reversed(state.sealed):  # newest first: stop at what an earlier call did
            if seq <= after:
                break
            if seq <= cutoff:
                sealed = state.sealed[seq]
                sealed.blob = sealed.nonce = b""
    return cutoff


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
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        every = min(EVERY, self.relay.limits.room_idle / 3)
        trim = _malloc_trim()
        trimmed = time.monotonic()
        while True:
            await asyncio.sleep(every)
            try:
                now = time.monotonic()
                self.tick(now)
                if trim is not None and now - trimmed >= TRIM_EVERY:
                    trimmed = now
                    trim()
                    took = time.monotonic() - now
                    logger.info("memory_trimmed", ms=round(took * 1000, 2), blocks=sys.getallocatedblocks())
            except Exception:
                logger.exception("upkeep_failed")

    def tick(self, now: float) -> None:
        relay = self.relay
        for room_id, handle in list(relay.rooms.items()):
            self._forgotten[room_id] = forget_blobs(handle.room, self._forgotten.get(room_id, 0))
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
        if handle is None:
            return
        relay.metrics.rooms.set(len(relay.rooms))
        logger.info("room_unloaded", room=room_id, seq=handle.room.committed.seq)

    def _forget_again(self, room: Room, seq: int) -> None:
        """A refused late reveal (not the roller, not a GM) leaves the blob out of memory again."""
        sealed = room.pending.sealed.get(seq)
        if sealed is None or sealed.revealed is not None or seq > self._forgotten.get(room.id, 0):
            return
        for state in (room.committed, room.pending):
            kept = state.sealed.get(seq)
            if kept is not None:
                kept.blob = kept.nonce = b""

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
