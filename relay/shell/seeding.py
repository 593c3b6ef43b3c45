"""A room's dice seeds drawn and stored for the core to commit to (spec/fairness.md; ``fair_dice`` on).

The secrets come from the CSPRNG here, and the log keeps them (``EventLog.ensure_seed``: the first stored
wins, so every node of a room rolls from the same seed). A room is loaded with its open seed and the next one,
and each ``PrepareSeed`` the room answers with stores one more while the open one serves.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable

from relay.core.actions import Action, WaitWitnesses
from relay.core.fairness import SEED_BYTES
from relay.core.state import RoomState
from relay.settings.logs import get_logger
from relay.shell.connection import RoomHandle
from relay.storage.base import EventLog

logger = get_logger("relay.seeds")


async def load(log: EventLog, room: str, state: RoomState) -> dict[int, bytes]:
    """The stored secrets of the room's open seed (or the first it will open) and of the one after it."""
    current = state.seed_n if state.seed_open else state.seed_n + 1
    stored = await log.seeds(room, current)
    for n in (current, current + 1):
        if n not in stored:
            stored[n] = await log.ensure_seed(room, n, secrets.token_bytes(SEED_BYTES))
    return stored


class Preparer:
    """Stores the seeds rooms ask for, one task each, and hands each to its room once it is stored."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self._tasks: set[asyncio.Task[None]] = set()

    def prepare(self, handle: RoomHandle, n: int) -> None:
        task = asyncio.get_running_loop().create_task(self._store(handle, n))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def wait(
        self, handle: RoomHandle, action: WaitWitnesses, execute: Callable[[RoomHandle, list[Action]], None]
    ) -> None:
        """After the witnesses' wait, have the room make the roll with what it has, and carry that out."""

        def due() -> None:
            execute(handle, handle.room.witness_due(action.pending))

        asyncio.get_running_loop().call_later(action.ms / 1000, due)

    async def _store(self, handle: RoomHandle, n: int) -> None:
        room = handle.room
        try:
            secret = await self.log.ensure_seed(room.id, n, secrets.token_bytes(SEED_BYTES))
        except Exception as exc:
            # The room keeps rolling on its open seed and asks again at its next roll.
            logger.warning("seed_not_stored", room=room.id, n=n, error=type(exc).__name__)
            if room.fair is not None:
                room.fair.seeds.not_stored(n)
            return
        if room.fair is not None:
            room.fair.seeds.add(n, secret)
