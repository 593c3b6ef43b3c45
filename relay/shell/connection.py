"""One socket and one loaded room as the shell holds them, and the outbox's view of a websockets socket.

``Connection`` is a socket's outbox, session and rate limit; ``RoomHandle`` a loaded ``Room`` with its
signed forms and its subscribers; ``SocketSink`` writes pre-framed messages straight to a socket's
transport. The server (``relay.shell.server``) makes them; its helpers are handed them.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from relay.core import protocol
from relay.core.actions import Session
from relay.core.room import Room
from relay.settings.config import Config
from relay.shell.fanout import Outbox
from relay.shell.ratelimit import TokenBucket
from relay.trust.forms import Forms


def close_reason(text: str) -> str:
    """A close reason within the protocol's 123 bytes."""
    data = text.encode()
    if len(data) <= 123:
        return text
    return data[:120].decode(errors="ignore") + "…"


class Connection:
    """One WebSocket: its outbox, its session once admitted, its rate limit.

    Slotted and small: ten thousand idle sockets each hold one.
    """

    __slots__ = ("_session", "bucket", "cid", "closing", "frames", "handle", "outbox", "ws")
    _ids = itertools.count(1)

    def __init__(self, ws: ServerConnection, config: Config, schedule: Callable[[Outbox], None]) -> None:
        self.ws = ws
        self.cid = next(self._ids)
        self.outbox = Outbox(config.limits.send_queue, schedule)
        self._session: Session | None = None
        self.bucket = TokenBucket(config.limits.rate, config.limits.burst)
        self.frames = 0
        self.closing = False
        self.handle: RoomHandle | None = None  # set once admitted; cleared when detached

    @property
    def session(self) -> Session:
        assert self._session is not None
        return self._session

    def admit(self, session: Session) -> None:
        self._session = session

    def close(self, code: int, reason: str) -> None:
        """Close without waiting (safe from callbacks); later frames are dropped."""
        if self.closing:
            return
        self.closing = True
        self.outbox.close()
        asyncio.get_running_loop().create_task(self.ws.close(code, close_reason(reason)))


@dataclass(eq=False)
class RoomHandle:
    """A loaded room as the server holds it: the sans-I/O room, its signed forms and who is subscribed."""

    room: Room
    forms: Forms
    # In order of arrival, but a roller is moved to be served first when its roll is stored
    # (relay.shell.fanout.serve_first), so it has its ack and event before the rest of the room.
    subscribers: dict[Connection, Session] = field(default_factory=dict)
    sessions: dict[Session, Connection] = field(default_factory=dict)
    outgoing: list[dict[str, Any]] = field(default_factory=list)  # committed, not yet broadcast
    # The timer that stores leaves for the members the log lists without a socket (relay.shell.upkeep).
    sweep_at: asyncio.TimerHandle | None = None


class SocketSink:
    """An outbox's view of a websockets connection: raw writes of pre-framed messages.

    Server frames are unmasked and we never fragment or compress (``compression=None``), so a framed
    message is the same bytes for every socket and can go straight to the transport, after anything
    websockets itself still has to send (a pong, say). Flow control is websockets' own: ``paused`` is
    set while the transport's buffer is above its high-water mark and ``drain`` waits for it to empty.
    """

    __slots__ = ("ws",)

    def __init__(self, ws: ServerConnection) -> None:
        self.ws = ws

    def ready(self) -> bool:
        return self.ws.protocol.state is State.OPEN and not self.ws.paused

    def write(self, chunks: list[bytes]) -> None:
        pending = self.ws.protocol.data_to_send()
        if pending:
            if not all(pending):  # an end-of-stream marker: let websockets handle its own shutdown
                self.ws.send_data()
                return
            chunks = [*pending, *chunks]
        self.ws.transport.write(b"".join(chunks))

    async def writable(self) -> bool:
        if self.ws.protocol.state is not State.OPEN:
            return False
        try:
            await self.ws.drain()
        except ConnectionClosed:
            return False
        return self.ws.protocol.state is State.OPEN


def peek_id(message: str | bytes) -> str | None:
    try:
        raw = protocol.decode(message)
    except protocol.FrameError:
        return None
    rid = raw.get("id")
    return rid if isinstance(rid, str) and len(rid) <= 64 else None
