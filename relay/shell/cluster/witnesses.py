"""Who can witness a room's rolls on the other relay nodes (spec/fairness.md; the cluster store).

A roll asks the online witness-capable players; a node knows its own sockets' hellos only. So each node
publishes, per room, the participants whose socket there said ``"witness": true``, in the key-value bucket
``tablerelay_witnesses`` (``<node>.<run>.<room>`` -> JSON ids), and watches the bucket: what other runs
publish goes into each loaded room's ``FairState.elsewhere``. Those witnesses see the pending through their
own node and answer there; their values are stored in the shared store and merged by the node making the
roll.

A key is deleted (a marker the watchers see) when a room has no witness left on its run. A run that dies
leaves its keys behind: they are dropped from what this node asks once the presence heartbeat says the run is
dead (``prune``); until then, asking someone who left only costs a roll its wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import nats.errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from relay.settings.logs import get_logger
from relay.shell.connection import RoomHandle
from relay.shell.host import Host
from relay.storage.nats.connect import ensure_bucket

logger = get_logger("relay.presence")

WITNESS_BUCKET = "tablerelay_witnesses"


class WitnessBoard:
    """This node's witnesses published, the other runs' witnesses known, per room."""

    def __init__(self, relay: Host, js: JetStreamContext, replicas: int, me: str) -> None:
        self.relay = relay
        self.js = js
        self.replicas = replicas
        self.me = me
        self.kv: KeyValue | None = None
        # room -> run -> witness-capable participant ids there; a loaded room's FairState holds its entry.
        self.known: dict[str, dict[str, set[str]]] = {}
        self._dirty: dict[str, RoomHandle] = {}
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._published: set[str] = set()  # rooms with a key of this run

    async def start(self) -> None:
        self.kv = await ensure_bucket(self.js, WITNESS_BUCKET, self.replicas)
        watcher = await self.kv.watchall()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._watch(watcher)), loop.create_task(self._publish())]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.kv is not None:
            for room_id in list(self._published):
                with contextlib.suppress(Exception):
                    await self.kv.delete(f"{self.me}.{room_id}")

    def for_room(self, room: str) -> dict[str, set[str]]:
        """The other runs' witnesses of ``room``, kept current (a loaded room's ``FairState.elsewhere``)."""
        return self.known.setdefault(room, {})

    def changed(self, handle: RoomHandle) -> None:
        self._dirty[handle.room.id] = handle
        self._wake.set()

    def prune(self, live: set[str]) -> None:
        """Forget the witnesses of runs the heartbeat says are dead."""
        for runs in self.known.values():
            for run in [run for run in runs if run not in live]:
                del runs[run]

    async def _publish(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                while self._dirty:
                    room_id, handle = next(iter(self._dirty.items()))
                    fair = handle.room.fair
                    ids = sorted(fair.witnesses) if fair is not None else []
                    assert self.kv is not None
                    if ids:
                        await self.kv.put(f"{self.me}.{room_id}", json.dumps(ids).encode())
                        self._published.add(room_id)
                    elif room_id in self._published:
                        await self.kv.delete(f"{self.me}.{room_id}")  # a marker: the watchers see it
                        self._published.discard(room_id)
                    if self._dirty.get(room_id) is handle:
                        del self._dirty[room_id]
            except Exception as exc:  # NATS away for a moment: again on the next change
                logger.warning("witnesses_publish_failed", error=type(exc).__name__)
                await asyncio.sleep(1.0)
                self._wake.set()

    async def _watch(self, watcher: KeyValue.KeyWatcher) -> None:
        while True:
            try:
                entry = await watcher.updates(timeout=3600)  # type: ignore[no-untyped-call]
            except nats.errors.TimeoutError:
                continue
            if entry is None:  # the end of what was there when the watch began
                continue
            run, _, room = entry.key.rpartition(".")
            if run == self.me or not run:
                continue
            runs = self.known.setdefault(room, {})
            if entry.operation in ("DEL", "PURGE") or not entry.value:
                runs.pop(run, None)
                continue
            try:
                runs[run] = {str(pid) for pid in json.loads(entry.value)}
            except ValueError:
                logger.warning("witnesses_unreadable", key=entry.key)
                continue
            logger.debug("witnesses_seen", room=room, run=run, count=len(runs[run]))
