"""What the shell's helpers may use of the server: the narrow interfaces they are handed.

The server (``relay.shell.server.Relay``) satisfies both. Its helpers (upkeep of loaded rooms, cluster
retries and presence, campaign effects, the HTTP routes) are handed it as a ``Host`` or an ``HttpHost`` and
never import the server, so the server can import them and its internals stay its own.
"""

from __future__ import annotations

from typing import Any, Protocol

from relay.core.actions import Action, Pending
from relay.settings.config import Config, Limits
from relay.shell.admission import Gate
from relay.shell.connection import Connection, RoomHandle
from relay.shell.observe.looplag import LoopLag
from relay.shell.observe.metrics import Fullness, Metrics
from relay.storage.base import EventLog
from relay.trust.signing import Keyring


class Host(Protocol):
    """The server as the helpers of its rooms see it."""

    @property
    def config(self) -> Config: ...

    @property
    def limits(self) -> Limits: ...

    @property
    def log(self) -> EventLog: ...

    @property
    def metrics(self) -> Metrics: ...

    @property
    def keyring(self) -> Keyring | None: ...

    @property
    def secret(self) -> bytes: ...

    @property
    def public_base(self) -> str: ...

    @property
    def rooms(self) -> dict[str, RoomHandle]: ...

    @property
    def stopping(self) -> bool: ...

    async def room(self, room_id: str) -> RoomHandle | None:
        """The room, loaded if it was not; None when it does not exist."""
        ...

    def execute(self, handle: RoomHandle, actions: list[Action]) -> None:
        """Carry out what the room answered: sends, appends, broadcasts and campaign effects."""
        ...

    def submit(self, handle: RoomHandle, pending: Pending) -> None:
        """Hand an append to the log; its outcome comes back to the room."""
        ...

    def send_frame(self, conn: Connection, frame: dict[str, Any]) -> None:
        """Queue one frame to one socket."""
        ...


class HttpHost(Host, Protocol):
    """The server as its HTTP routes see it: what ``/healthz``, the handshake check and the key set read."""

    @property
    def gate(self) -> Gate: ...

    @property
    def connections(self) -> set[Connection]: ...

    @property
    def started(self) -> float: ...

    @property
    def lag(self) -> LoopLag: ...

    @property
    def fullness(self) -> Fullness:
        """Whether the store has room (``full``: the last append was refused for want of space)."""
        ...

    @property
    def published_keys(self) -> bytes:
        """The key set as ``/.well-known/tablerelay-keys.json`` serves it."""
        ...
