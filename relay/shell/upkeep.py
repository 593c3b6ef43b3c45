"""Upkeep of the loaded rooms, off the hot path: a task that looks at every loaded room every few seconds.

- **Old hidden rolls**: a room keeps an entry (``relay.core.state.Sealed``) only for the hidden rolls of its
  recent window (``Limits.history`` seqs); older ones are removed and the states' ``floor`` raised past
  them, and a late reveal or a history reaching them reads them from the log (``relay.shell.old_rolls``). So
  a room that stays loaded for months holds no more per hidden roll than a fresh one.
- **Idle rooms**: a room with no socket, no append in flight and nothing waiting to be broadcast for
  ``Limits.room_idle`` seconds is unloaded; the next hello for it loads it from the log again.
- **Cycles, without walking the whole heap**: every second, a full garbage collection of what became
  long-lived since the second before, and then ``gc.freeze()``, which moves the survivors out of the
  collector's reach (a list splice, no walk). ``relay.shell.serve.settle_gc`` freezes start-up the same way.
  So a collection walks one second's worth of new long-lived objects (its longest 6 to 24 ms of CPU a
  minute with 300 to 1,000 tables of six on a busy machine), never the sockets and rooms there before:
  the minutely collection of the whole heap it replaces stopped the loop for 160 to 294 ms with 1,000
  sockets, 0.56 to 0.72 s with 6,000 and 0.4 to 1.4 s with 18,000 (docs/hardening.md). A frozen object
  is still freed the moment its last reference goes, as every object here is; only a reference cycle formed
  among frozen objects would wait for ever, and none is known: the collection of the whole heap found 0
  objects a minute in the soak, and tests hold that a closed socket and an unloaded room leave no cycle.
  CPython's own full collections, triggered as before, walk only what is not frozen either.
  ``TABLERELAY_FULL_GC=0`` turns both off, ``whole`` brings back the collection of the whole heap, unfrozen,
  once a minute (for chasing a leak: compare its ``collected``); docs/hardening.md has the runs.
- **Freed memory back to the system**: once a minute, on glibc, ``malloc_trim(0)`` hands the pages that
  freed C-level allocations left empty (frames, encoded records, dict tables over 512 bytes all come from
  ``malloc``) back to the kernel. Logged as ``memory_trimmed`` with the minute's collections (their count,
  their longest pause ``collect_ms``, what they found). Not what is frozen: ``gc.get_freeze_count()`` walks
  the frozen objects one by one (71 ms for 600,000 of them on a busy 2-core machine).

Nothing here runs per roll: a roll's path is unchanged, and the upkeep only ever looks at rooms.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import os
import sys
import time
from collections.abc import Callable, Container
from dataclasses import dataclass

from relay.core import protocol
from relay.core.room import Room
from relay.settings.logs import debug_enabled, get_logger
from relay.shell import old_rolls
from relay.shell.connection import Connection, RoomHandle
from relay.shell.host import Host
from relay.shell.observe import memtrace

logger = get_logger("relay.upkeep")

#: Seconds between two looks at the loaded rooms (more often when ``Limits.room_idle`` is short).
EVERY = 10.0
#: Seconds between two ``malloc_trim`` calls (and ``memory_trimmed`` lines).
TRIM_EVERY = 60.0
#: Seconds between two of the upkeep's collections (``TABLERELAY_FULL_GC`` unset): see ``Upkeep.run``.
COLLECT_EVERY = 1.0

#: ``TABLERELAY_FULL_GC``: what the upkeep's collections walk (docs/hardening.md).
NEW, OFF, WHOLE = "new", "off", "whole"


def gc_mode(value: str | None) -> str:
    """``TABLERELAY_FULL_GC``'s value as a mode: unset, empty or ``1``: ``NEW`` (what became long-lived since
    the look before, then frozen); ``0``: ``OFF``; ``whole``: ``WHOLE`` (the whole heap once a minute)."""
    if value == "0":
        return OFF
    if value is not None and value.strip().lower() == WHOLE:
        return WHOLE
    return NEW


_freezing = False


def freeze_survivors() -> None:
    """From now on in this process, the upkeep freezes what survives its collections.

    ``relay.shell.serve.settle_gc`` calls it in the server's process. Freezing is process-wide: a library
    user's process (a test's in-process server) keeps its collector as it was, and its upkeep collects what
    became long-lived without freezing it.
    """
    global _freezing
    _freezing = True


@dataclass
class Collections:
    """The upkeep's collections since the last ``memory_trimmed`` line."""

    count: int = 0
    collected: int = 0
    longest_ms: float = 0.0
    longest_cpu_ms: float = 0.0  # the longest's thread CPU time: without the waits for a core
    cpu_ms: float = 0.0  # all of them together

    def add(self, collected: int, ms: float, cpu_ms: float) -> None:
        self.count += 1
        self.collected += collected
        self.cpu_ms += cpu_ms
        if ms >= self.longest_ms:
            self.longest_ms, self.longest_cpu_ms = ms, cpu_ms


def collect(freeze: bool) -> tuple[int, float, float]:
    """A full collection, then (``freeze``) ``gc.freeze()`` of its survivors: (unreachable objects found, wall
    ms, thread CPU ms). Frozen objects are never walked again; the freeze itself is a list splice."""
    start, cpu = time.perf_counter(), time.thread_time()
    found = gc.collect()
    if freeze:
        gc.freeze()
    return found, (time.perf_counter() - start) * 1000, (time.thread_time() - cpu) * 1000


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


#: Seconds an entry read back from the log for a late reveal stays in memory at least: past the reveal's
#: commit, a second reveal's log read and a cluster retry (``relay.shell.cluster.retries``: at most about 50
#: s).
RESTORED_KEEP = 60.0


def forget(room: Room, unsent: int | None, keep: Container[int] = ()) -> int:
    """Remove the hidden rolls older than the room's recent window from both states and raise their
    ``floor`` to the window's start (``relay.shell.old_rolls`` reads them from the log from then on). Returns
    the number of entries removed.

    The window is the last ``Limits.history`` seqs, and never starts past ``unsent``, the first committed
    seq not yet broadcast (its rendering needs its entry). Kept: the seqs in ``keep`` (read back for a
    late reveal not long ago), and an entry whose two states differ (a reveal or merge in flight).
    """
    cutoff = room.committed.seq - room.limits.history
    if unsent is not None:
        cutoff = min(cutoff, unsent - 1)
    committed, pending = room.committed, room.pending
    if cutoff <= committed.floor and cutoff <= pending.floor:
        return 0
    old = [seq for seq in committed.sealed if seq <= cutoff and seq not in keep]
    removed = 0
    for seq in old:
        if pending.sealed.get(seq) == committed.sealed[seq]:  # equal field by field
            del committed.sealed[seq]
            pending.sealed.pop(seq, None)
            removed += 1
    committed.floor = max(committed.floor, cutoff)
    pending.floor = max(pending.floor, cutoff)
    return removed


def unsent(handle: RoomHandle) -> int | None:
    """The first committed seq of ``handle``'s room not yet broadcast, or None."""
    if handle.outgoing:
        return int(handle.outgoing[0]["seq"])
    return None


def idle(handle: RoomHandle) -> bool:
    """No socket, nothing being stored, nothing waiting to be broadcast, no leaves waiting to be stored."""
    return not (
        handle.sweep_at
        or handle.subscribers
        or handle.sessions
        or handle.room.sockets
        or handle.room.inflight
        or handle.outgoing
    )


class Upkeep:
    def __init__(self, relay: Host) -> None:
        self.relay = relay
        self._idle_since: dict[str, float] = {}  # room id -> when it was first seen idle (monotonic)
        # room id -> old hidden roll read back for a late reveal -> when (monotonic; RESTORED_KEEP)
        self._restored: dict[str, dict[int, float]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        every = min(EVERY, self.relay.limits.room_idle / 3)
        trim = _malloc_trim()
        trimmed = time.monotonic()
        mode = gc_mode(os.environ.get("TABLERELAY_FULL_GC"))  # docs/hardening.md
        tracing = memtrace.from_env()  # TABLERELAY_TRACEMALLOC: off unless an operator asks
        traced = time.monotonic()
        minute = Collections()
        # Every second, not every ten: each collection walks what became long-lived since the one
        # before, and under a hosted load that is about 70 objects per roll stored (its event in the
        # room's window: 7,000 a second at 100 rolls/s, 0.5 to 1 µs each on a busy machine), so a
        # collection ten seconds apart stopped the loop for 70 to 130 ms with 1,000 tables, one a second
        # apart for 12 to 24 ms. A deploy's reconnecting crowd is walked in as many bites.
        step = min(every, COLLECT_EVERY) if mode == NEW else every
        looked = time.monotonic()
        while True:
            await asyncio.sleep(step)
            try:
                now = time.monotonic()
                if mode == NEW:
                    minute.add(*collect(freeze=_freezing))
                if now - looked < every - step / 2:
                    continue
                looked = now
                self.tick(now)
                if now - trimmed >= TRIM_EVERY:
                    trimmed = now
                    self.free_memory(trim, mode == WHOLE, minute)
                    minute = Collections()
                if tracing is not None and now - traced >= TRIM_EVERY:
                    traced = now
                    logger.info("memory_sites", **tracing.report())
            except Exception:
                logger.exception("upkeep_failed")

    @staticmethod
    def free_memory(
        trim: Callable[[], int] | None, collect_whole: bool, earlier: Collections | None = None
    ) -> int | None:
        """(``collect_whole``) a full collection, unfrozen objects only (so the whole heap where nothing
        was frozen since start-up), then ``malloc_trim``; logged with ``earlier``, the collections since the
        last line. Returns what the collection found unreachable (None: not collected)."""
        seen = earlier if earlier is not None else Collections()
        collected = None
        if collect_whole:
            collected, ms, cpu_ms = collect(freeze=False)
            seen.add(collected, ms, cpu_ms)
        start = time.perf_counter()
        if trim is not None:
            trim()
        done = time.perf_counter()
        logger.info(
            "memory_trimmed",
            ms=round((done - start) * 1000, 2),
            collections=seen.count,
            collect_ms=round(seen.longest_ms, 2) if seen.count else None,  # the longest pause
            collect_cpu_ms=round(seen.longest_cpu_ms, 2) if seen.count else None,
            collections_cpu_ms=round(seen.cpu_ms, 1) if seen.count else None,  # the minute's, in all
            collected=seen.collected if seen.count else None,
            blocks=sys.getallocatedblocks(),
            full_collections=gc.get_stats()[2]["collections"],
        )
        return collected

    def tick(self, now: float) -> None:
        relay = self.relay
        for room_id, handle in list(relay.rooms.items()):
            restored = self._restored.get(room_id)
            if restored is not None:
                for seq, when in list(restored.items()):
                    if now - when >= RESTORED_KEEP:
                        del restored[seq]
                if not restored:
                    del self._restored[room_id]
            removed = forget(handle.room, unsent(handle), restored or ())
            if removed and debug_enabled():
                logger.debug(
                    "hidden_rolls_forgotten", room=room_id, removed=removed, floor=handle.room.committed.floor
                )
            if not idle(handle):
                self._idle_since.pop(room_id, None)
                continue
            since = self._idle_since.setdefault(room_id, now)
            if now - since >= relay.limits.room_idle:
                self.unload(room_id)

    def sweep_later(self, handle: RoomHandle) -> None:
        """Leaves for the members a just-loaded room's log lists without a socket (the server stopped or
        was killed with them connected), stored ``rejoin_grace`` seconds from now for those still away:
        a deploy's tables reconnect meanwhile and store neither a leave nor a join."""
        grace = self.relay.limits.rejoin_grace
        if grace <= 0:
            self._sweep(handle)
        elif handle.room.pending.members:  # just loaded: none has a socket yet
            handle.sweep_at = asyncio.get_running_loop().call_later(grace, self._sweep, handle)

    def _sweep(self, handle: RoomHandle) -> None:
        handle.sweep_at = None
        if self.relay.stopping or self.relay.rooms.get(handle.room.id) is not handle:
            return  # stopping (the next start sweeps), or the room replaced
        sweep = handle.room.sweep()
        if sweep is not None:
            logger.info("members_swept", room=handle.room.id, leaves=len(sweep.records))
            self.relay.submit(handle, sweep)

    def unload(self, room_id: str) -> None:
        relay = self.relay
        handle = relay.rooms.pop(room_id, None)
        self._idle_since.pop(room_id, None)
        self._restored.pop(room_id, None)
        if handle is None:
            return
        relay.log.unfollow(room_id)
        relay.metrics.rooms.set(len(relay.rooms))
        logger.info("room_unloaded", room=room_id, seq=handle.room.committed.seq)

    def reveal_later(self, handle: RoomHandle, conn: Connection, frame: protocol.Reveal) -> None:
        """Read the roll back from the log (``relay.shell.old_rolls``), then handle the reveal as if it had
        just arrived."""
        self._restored.setdefault(handle.room.id, {})[frame.seq] = time.monotonic()  # kept from now on
        task = asyncio.get_running_loop().create_task(self._reveal(handle, conn, frame))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reveal(self, handle: RoomHandle, conn: Connection, frame: protocol.Reveal) -> None:
        relay = self.relay
        try:
            await old_rolls.restore(relay.log, handle.room, frame.seq)
            self._restored.setdefault(handle.room.id, {})[frame.seq] = time.monotonic()
            if conn.closing or relay.stopping or conn.handle is not handle:
                return  # the client resends it after it resumes; a reveal is idempotent
            relay.execute(handle, handle.room.handle(conn.session, frame))
        except Exception:
            logger.exception("late_reveal_failed", room=handle.room.id, seq=frame.seq)
            relay.send_frame(
                conn, protocol.error_frame("internal", "Something went wrong on the server.", frame.id)
            )
