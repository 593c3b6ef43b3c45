"""The shell's side of fair dice (spec/fairness.md; ``fair_dice`` on): seeds drawn and stored for the core
to commit to, and the store's part in witnessed rolls.

The secrets come from the CSPRNG here, and the log keeps them (``EventLog.ensure_seed``: the first stored
wins, so every node of a room rolls from the same seed). A room is loaded with its open seed and the next one,
and each ``PrepareSeed`` the room answers with stores one more while the open one serves.

A witnessed roll's secret (its nonce and frame) is stored with its pending event (``Pending.kept``), each
witness value before its ack (``KeepWitness``), and the store's copy is closed and merged before a roll is
made that another node may have had values for (the cluster store) or that this node does not hold (after a
restart, or another node's). A loaded room reopens the pendings its log holds without a roll (``recover``).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Coroutine
from typing import Any

from relay.core import fair
from relay.core.actions import Action, KeepWitness, RetireKept, WaitWitnesses
from relay.core.fairness import SEED_BYTES
from relay.core.state import RoomState
from relay.settings.logs import get_logger
from relay.shell.connection import RoomHandle
from relay.storage.base import EventLog

logger = get_logger("relay.seeds")
Execute = Callable[[RoomHandle, list[Action]], None]


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

    def __init__(self, log: EventLog, loaded: Callable[[RoomHandle], bool] = lambda _: True) -> None:
        self.log = log
        self.loaded = loaded  # whether a handle is still the server's (an unloaded room's timers stop)
        self._watching = False
        self._tasks: set[asyncio.Task[None]] = set()

    def prepare(self, handle: RoomHandle, n: int) -> None:
        self._spawn(self._store(handle, n))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def wait(self, handle: RoomHandle, action: WaitWitnesses, execute: Execute) -> None:
        """After the witnesses' wait, have the room make the roll with what it has, and carry that out."""

        def due() -> None:
            room = handle.room
            known = room.pending.pendings.get(action.pending)
            if room.fair is None or known is None or not self.loaded(handle):
                return  # made meanwhile, or the room let go (loading it again reopens its pendings)
            open_roll = room.fair.open.get(action.pending)
            if open_roll is not None and open_roll.made is not None:
                return
            if open_roll is not None and not self.log.shared:
                execute(handle, room.witness_due(action.pending))  # every stored value is in memory here
                return
            self._spawn(self._complete(handle, action.pending, known.commit, execute))

        asyncio.get_running_loop().call_later(action.ms / 1000, due)

    async def _complete(self, handle: RoomHandle, seq: int, commit: str, execute: Execute) -> None:
        """Close the store's copy of pending ``seq`` to later values, then make its roll with them."""
        room = handle.room
        try:
            stored = await self.log.close_pending(room.id, seq, commit)
        except Exception as exc:
            logger.warning("pending_not_closed", room=room.id, pending=seq, error=type(exc).__name__)
            self.wait(handle, WaitWitnesses(seq, fair.RETRY_MS), execute)
            return
        if stored is None and (room.fair is None or seq not in room.fair.open):
            if seq in room.pending.pendings and room.fair is not None:  # nothing kept, nothing held
                logger.error("pending_secret_missing", room=room.id, pending=seq)
                room.fair.refused.add(seq)  # it cannot be made: let it hold neither the seed nor its roller
            return
        execute(handle, room.witness_due(seq, stored))

    async def watch(self, rooms: dict[str, RoomHandle], execute: Execute) -> None:
        """With a shared store: values other nodes store for rolls held here reach them at once, so a roll is
        made as soon as every witness asked has answered, through whichever node (started once)."""
        if self._watching or not self.log.shared:
            return
        self._watching = True

        def changed(room_id: str, stored: dict[str, Any]) -> None:
            handle = rooms.get(room_id)
            if handle is not None and handle.room.fair is not None:
                execute(handle, fair.values_stored(handle.room, handle.room.fair, stored))

        try:
            await self.log.watch_kept(changed)
        except Exception as exc:  # rolls are then made at the end of their wait, with every stored value
            self._watching = False
            logger.warning("kept_watch_failed", error=type(exc).__name__)

    def keep(self, handle: RoomHandle, action: KeepWitness, execute: Execute) -> None:
        """Store a witness's value, then hand the store's answer to the room."""

        async def store() -> None:
            room = handle.room
            try:
                outcome = await self.log.keep_witness(
                    room.id, action.pending, action.commit, action.participant, action.value
                )
            except Exception as exc:
                logger.warning(
                    "witness_not_stored", room=room.id, pending=action.pending, error=type(exc).__name__
                )
                outcome = "failed"
            if room.fair is not None:
                execute(handle, fair.witness_kept(room, room.fair, action, outcome))

        self._spawn(store())

    def retire(self, handle: RoomHandle, action: RetireKept) -> None:
        """Forget what the store kept for pendings whose rolls are stored (``relay.core.fair.stored``)."""
        room_id = handle.room.id

        async def retire() -> None:
            try:
                await self.log.retire_kept(room_id, action.upto, action.keep)
            except Exception as exc:  # kept a while longer: the next roll's retiring takes it
                logger.warning("kept_not_retired", room=room_id, error=type(exc).__name__)

        self._spawn(retire())

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
