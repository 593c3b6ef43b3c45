"""Fan-out: each event encoded once per (audience form, format set), queued to every socket without waiting.

Each socket owns an ``Outbox``: a bounded queue of encoded frames drained by one sender task. Putting
never awaits, so a broadcast costs the same whether a socket is fast or stalled; a socket whose queue is
full is marked overflowed and the server closes it with 4008 (it can resume from its last seq).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from relay import protocol
from relay.formats import renderings
from relay.room import Session
from relay.state import RoomState
from relay.visibility import FULL, audience, render

NO_FORMATS: frozenset[str] = frozenset()


class Outbox:
    """A socket's bounded queue of encoded frames.

    Until the welcome is sent the queue only collects; ``start(floor)`` then drops queued events with a
    seq at or below ``floor`` (they were in the welcome's history) and the sender begins.
    """

    def __init__(self, limit: int) -> None:
        self._items: deque[tuple[int | None, bytes]] = deque()
        self._limit = limit
        self._wake = asyncio.Event()
        self.floor = 0
        self.overflowed = False
        self.closed = False
        self._direct: Callable[[bytes], bool] | None = None

    def __len__(self) -> int:
        return len(self._items)

    def put(self, data: bytes, seq: int | None = None) -> bool:
        """Queue ``data``; False when the queue was full (the socket must be closed)."""
        if self.closed:
            return True
        if self._direct is not None and not self._items:
            # Nothing queued ahead of it: hand it straight to the socket when the socket keeps up.
            if seq is not None and seq <= self.floor:
                return True
            if self._direct(data):
                return True
        if len(self._items) >= self._limit:
            self.overflowed = True
            self.close()
            return False
        self._items.append((seq, data))
        self._wake.set()
        return True

    def close(self) -> None:
        self.closed = True
        self._direct = None
        self._wake.set()

    async def run(
        self,
        floor: int,
        send: Callable[[bytes], Awaitable[None]],
        direct: Callable[[bytes], bool] | None = None,
    ) -> None:
        """Send queued frames in order until closed; events at or below ``floor`` are skipped.

        ``direct`` writes a frame without waiting and says whether it could (False when the socket's
        buffer is already full); with it, ``put`` bypasses the queue whenever the queue is empty.
        """
        self.floor = floor
        self._direct = direct
        items = self._items
        while True:
            while items and not self.closed:
                seq, data = items.popleft()
                if seq is not None and seq <= self.floor:
                    continue
                await send(data)
            if self.closed:
                return
            self._wake.clear()
            await self._wake.wait()


class Subscriber(Protocol):
    @property
    def session(self) -> Session: ...

    @property
    def outbox(self) -> Outbox: ...


class Renderer:
    """Event frames for one record, built and encoded at most once per (form, format set)."""

    def __init__(self, record: Mapping[str, Any], state: RoomState) -> None:
        self.record = record
        self.state = state
        self._frames: dict[tuple[str, frozenset[str]], dict[str, Any]] = {}
        self._bytes: dict[tuple[str, frozenset[str]], bytes] = {}
        self._renderings: dict[str, Any] | None = None
        self._rendered: frozenset[str] = NO_FORMATS

    def _key(self, session: Session) -> tuple[str, frozenset[str]]:
        form = audience(self.record, self.state, session.id, session.role)
        wants = session.formats if form == FULL and self.record["kind"] == "roll" else NO_FORMATS
        return form, wants

    def frame(self, session: Session) -> dict[str, Any]:
        key = self._key(session)
        return self._frame(key)

    def _frame(self, key: tuple[str, frozenset[str]]) -> dict[str, Any]:
        frame = self._frames.get(key)
        if frame is None:
            form, wants = key
            frame = render(self.record, form, self.state)
            if wants:
                extra = self._extra(wants)
                frame.update({name: extra[name] for name in wants if name in extra})
            self._frames[key] = frame
        return frame

    def _extra(self, wants: frozenset[str]) -> dict[str, Any]:
        missing = wants - self._rendered
        if self._renderings is None or missing:
            more = renderings(self.record, missing, self.state.gm_ids())
            self._renderings = {**(self._renderings or {}), **more}
            self._rendered = self._rendered | missing
        return self._renderings

    def encoded(self, session: Session) -> bytes:
        key = self._key(session)
        data = self._bytes.get(key)
        if data is None:
            data = self._bytes[key] = protocol.encode(self._frame(key))
        return data


def broadcast(
    record: Mapping[str, Any],
    subscribers: Iterable[Subscriber],
    state: RoomState,
    on_overflow: Callable[[Subscriber], None],
) -> int:
    """Queue ``record`` to every subscriber in the form it may see; returns how many encodings were made."""
    renderer = Renderer(record, state)
    seq = record["seq"]
    for sub in subscribers:
        if not sub.outbox.put(renderer.encoded(sub.session), seq):
            on_overflow(sub)
    return len(renderer._bytes)


def history(records: Iterable[Mapping[str, Any]], session: Session, state: RoomState) -> list[dict[str, Any]]:
    """Stored records as ``session`` may see them now, for a welcome."""
    return [Renderer(record, state).frame(session) for record in records]
