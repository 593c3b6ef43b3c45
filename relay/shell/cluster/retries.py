"""Appends that lost a race to another relay node (the cluster store, spec/cluster.md), tried again.

On one node an append never conflicts. In a cluster another node may store the room's next seq first; the
log then answers ``Conflict`` with the seq it found. The intent is not answered with an error: once the
other node's events have reached this node's copy of the room (``Host._remote``), the frame is handled
again against the new state, so its requirements (Fear, Hope, a sealed roll still unrevealed, a roll id
already stored) are checked as a single node would check them, and it is appended again or refused with
the single node's error. A roll retried this way is rolled again: its first dice were never stored or
shown to anyone. Joins and leaves are settled the same way, from this node's sockets.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from relay.core.actions import Append, Pending, Send, Session
from relay.core.state import Member
from relay.settings.logs import get_logger
from relay.shell.connection import Connection, RoomHandle
from relay.shell.host import Host
from relay.storage.base import Conflict

logger = get_logger("relay.cluster")

#: Tries per intent: each lost race means another node's append succeeded, so this bounds only a storm.
MAX_ATTEMPTS = 25
#: Seconds to wait for the other node's events before trying anyway.
CATCH_UP = 2.0


@dataclass(eq=False)
class _Origin:
    conn: Connection
    session: Session
    frame: Any
    attempt: int


class Retries:
    def __init__(self, relay: Host) -> None:
        self.relay = relay
        # The frame each append came from; weak, so a settled append takes its entry with it.
        self._origins: weakref.WeakKeyDictionary[Pending, _Origin] = weakref.WeakKeyDictionary()
        self._waiting: dict[RoomHandle, list[tuple[int, Callable[[], None]]]] = {}
        self._checks: set[asyncio.Task[None]] = set()

    def remember(self, actions: list[Any], conn: Connection, frame: Any, attempt: int = 0) -> None:
        for action in actions:
            if isinstance(action, Append):
                self._origins[action.pending] = _Origin(conn, conn.session, frame, attempt)

    def take(self, handle: RoomHandle, pending: Pending, error: Conflict) -> bool:
        """Whether a retry will answer for ``pending`` (True: its requester and waiters are left to it).

        Called before the room hears of the failure, so the requester's error can be held back.
        """
        origin = self._origins.pop(pending, None)
        if origin is not None:
            if origin.attempt >= MAX_ATTEMPTS:
                logger.warning("retries_exhausted", room=handle.room.id, attempts=origin.attempt)
                return False
            ack = (origin.session, getattr(origin.frame, "id", None))
            if ack in pending.acks:
                pending.acks.remove(ack)
            self._after(handle, error.actual, lambda: self._again(handle, origin))
            return False  # other waiters on the same append (none for a frame) are answered as usual
        kinds = {record["kind"] for record in pending.records}
        if pending.records and kinds <= {"join", "leave"}:
            members = [Member.from_wire(record["member"]) for record in pending.records]
            done, pending.done = pending.done, []
            self._after(handle, error.actual, lambda: self._settle(handle, members, done))
            return True
        return False

    def held_back(self, handle: RoomHandle, conn: Connection, frame: Any, actions: list[Any]) -> bool:
        """Whether a ``not_found`` answer is held back until this node has caught up with the room.

        One node has stored a participant's join before that participant's welcome, so its GM can name it
        at once; another node may not have received the join yet. Before saying "no such participant"
        (or "no such roll"), this node asks the stream for the room's last seq and, if it lacks events,
        handles the frame again once they have arrived.
        """
        if len(actions) != 1 or not isinstance(actions[0], Send):
            return False
        if actions[0].frame.get("t") != "error" or actions[0].frame.get("code") != "not_found":
            return False

        async def check() -> None:
            try:
                last = await self.relay.log.last_seq(handle.room.id)
            except Exception:
                last = 0
            if last > handle.room.committed.seq:
                catch_up = getattr(self.relay.log, "catch_up", None)
                if catch_up is not None:
                    catch_up(handle.room.id)
                self._after(handle, last, lambda: self._answer(handle, conn, frame))
            else:
                self.relay.execute(handle, actions)

        task = asyncio.get_running_loop().create_task(check())
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)
        return True

    def _answer(self, handle: RoomHandle, conn: Connection, frame: Any) -> None:
        if conn.closing or conn.handle is not handle:
            return
        actions = handle.room.handle(conn.session, frame)
        self.remember(actions, conn, frame)
        self.relay.execute(handle, actions)

    def _again(self, handle: RoomHandle, origin: _Origin) -> None:
        conn = origin.conn
        if conn.closing or conn.handle is not handle:
            return  # the client left; it sends the frame again after it resumes
        actions = handle.room.handle(origin.session, origin.frame)
        self.remember(actions, conn, origin.frame, origin.attempt + 1)
        self.relay.execute(handle, actions)

    def _settle(
        self, handle: RoomHandle, members: list[Member], done: list[Callable[[BaseException | None], None]]
    ) -> None:
        pending = handle.room.settle_presence(members)
        if pending is None:
            for callback in done:
                callback(None)
            return
        pending.done.extend(done)
        self.relay.submit(handle, pending)

    # -- waiting for another node's events ---------------------------------------------------------------

    def _after(self, handle: RoomHandle, seq: int, run: Callable[[], None]) -> None:
        """``run`` once the room's committed seq reaches ``seq`` (or after CATCH_UP seconds)."""
        loop = asyncio.get_running_loop()
        ran = False

        def once() -> None:
            nonlocal ran
            if not ran:
                ran = True
                run()

        if handle.room.committed.seq >= seq:
            loop.call_soon(once)
            return
        self._waiting.setdefault(handle, []).append((seq, once))
        loop.call_later(CATCH_UP, once)

    def caught_up(self, handle: RoomHandle) -> None:
        waiting = self._waiting.get(handle)
        if not waiting:
            return
        seq = handle.room.committed.seq
        ready = [run for target, run in waiting if target <= seq]
        rest = [(target, run) for target, run in waiting if target > seq]
        if rest:
            self._waiting[handle] = rest
        else:
            del self._waiting[handle]
        for run in ready:
            run()
