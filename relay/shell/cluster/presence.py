"""Who is in a room across relay nodes (the cluster store, spec/cluster.md): no member outlives its node.

A node stores a participant's ``join`` when its first socket arrives and a ``leave`` when its last one
closes. A node that is killed stores no leaves, so without this module its sockets' participants stayed
listed on every other node, in member lists and fresh welcomes, for good. So each node publishes what it
holds, in two key-value buckets, and the survivors clear up after a node that stopped publishing:

- ``tablerelay_nodes`` (every key expires ``EXPIRY`` seconds after its last put): one key per running node,
  ``<node>.<run>``, put every ``BEAT`` seconds by a task that does nothing else, so a long clear-up pass
  cannot starve it; its value counts the run's finished clear-up passes. A run whose key has stayed
  missing for ``MISSING`` seconds is dead (a put that comes a moment late is not a death: taking a live
  node for dead stores leaves for members who are still there).
- ``tablerelay_presence``: one key per node run and room, ``<node>.<run>.<room>``, holding the ids of the
  participants with a socket on that run in that room (JSON); put when that set changes, removed when empty.

Every ``BEAT`` seconds the live run with the smallest key (the janitor) takes each key a dead run left: it
loads the room, appends a ``leave`` for each participant listed there whom the log shows present and whom
no live run lists and no socket here holds, and removes the key once the leaves are stored. The leaves go
through the room's ordinary conditional appends: should two nodes both take themselves for the janitor for a
moment, the second's append conflicts, and its retry (``relay.shell.cluster.retries``) finds the member gone
and stores nothing, so a leave is never stored twice. A node started under the name a previous run used
(``TABLERELAY_NODE``) clears that run's keys at once instead of waiting for them to expire.

The other way round, a ``leave`` another node stored for a participant who still has a socket here (one
person's two tabs on two nodes, or a janitor that read the keys just before this node listed a reconnect)
is answered with a ``join`` (``answer_leaves``), so the member list ends up matching the sockets.

Not covered: a node killed between storing a join and putting its key (a few milliseconds) leaves that
one join behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from relay.core.state import Member
from relay.settings.logs import get_logger
from relay.shell.cluster.witnesses import WitnessBoard
from relay.shell.connection import RoomHandle
from relay.shell.host import Host
from relay.storage.nats.connect import bucket_subjects, ensure_bucket, patiently

if TYPE_CHECKING:
    from relay.storage.nats.log import NatsLog

logger = get_logger("relay.presence")

NODES_BUCKET = "tablerelay_nodes"
PRESENCE_BUCKET = "tablerelay_presence"
#: Seconds between heartbeats (and janitor passes).
BEAT = 1.0
#: Seconds after its last heartbeat a node's key expires.
EXPIRY = 4.0
#: Seconds a run's key must stay missing before the run is taken for dead (so about 6 s after its last
#: heartbeat).
MISSING = 2.0
#: Seconds between reads of every presence key (finding runs that died while this node was not looking).
FULL_SCAN = 30.0
#: Seconds the janitor waits for a room's leaves to be stored before trying again on a later pass.
STORE_TIMEOUT = 15.0


def node_name(configured: str | None) -> str:
    return configured or "node-" + secrets.token_hex(4)


def owners(subjects: Sequence[str], bucket: str, depth: int) -> set[str]:
    """The ``<node>.<run>`` owners of a bucket's key subjects (``$KV.<bucket>.<node>.<run>[.<room>]``)."""
    prefix = f"$KV.{bucket}."
    found = set()
    for subject in subjects:
        if subject.startswith(prefix):
            parts = subject[len(prefix) :].split(".")
            if len(parts) == depth:
                found.add(f"{parts[0]}.{parts[1]}")
    return found


def stale(listed: Sequence[str], present: dict[str, Member], claimed: set[str]) -> list[Member]:
    """The members a dead run listed that the log still shows present and nobody alive holds."""
    return [present[pid] for pid in listed if pid in present and pid not in claimed]


class Presence:
    """One node's part: publishes its sockets' participants and heartbeat; clears up after dead runs."""

    def __init__(self, relay: Host, log: NatsLog, node: str | None) -> None:
        self.relay = relay
        self.js: JetStreamContext = log.js
        self.replicas = log.replicas
        self.node = node_name(node)
        self.me = f"{self.node}.{secrets.token_hex(4)}"
        self.nodes: KeyValue | None = None
        self.board: KeyValue | None = None
        self._dirty: dict[str, RoomHandle] = {}
        self._wake = asyncio.Event()
        self._seen: set[str] = set()  # runs seen alive
        self._suspects: set[str] = set()  # dead runs whose keys may remain
        self._missing: dict[str, float] = {}  # runs the looks miss -> since when (loop time)
        self.passes = 0  # clear-up passes finished, published as the heartbeat's value
        self._live: set[str] = set()
        self._scanned = -FULL_SCAN
        self._tasks: list[asyncio.Task[None]] = []
        # Who can witness rolls on the other runs (fair dice); started with the rest.
        self.witnesses = WitnessBoard(relay, self.js, self.replicas, self.me)

    # -- starting and stopping ---------------------------------------------------------------------------

    async def start(self) -> None:
        async def set_up() -> None:
            # A bucket just made (by this node or another starting with it) takes a moment to elect its
            # leader: its first put can find no one to answer.
            self.nodes = await ensure_bucket(self.js, NODES_BUCKET, self.replicas, ttl=EXPIRY)
            self.board = await ensure_bucket(self.js, PRESENCE_BUCKET, self.replicas)
            await self.nodes.put(self.me, b"1")

        await patiently(set_up)
        await patiently(self.witnesses.start)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._publish()),
            loop.create_task(self._heartbeat()),
            loop.create_task(self._tend()),
        ]
        logger.info("presence_started", run=self.me)

    async def close(self) -> None:
        """After the node's sockets have closed (their leaves stored): publish the last sets, sign off."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._flush(), 5.0)
        for task in self._tasks:
            task.cancel()
        await self.witnesses.close()
        if self.nodes is not None:
            with contextlib.suppress(Exception):
                await self.js.purge_stream(f"KV_{NODES_BUCKET}", subject=f"$KV.{NODES_BUCKET}.{self.me}")

    # -- this node's sockets -----------------------------------------------------------------------------

    def changed(self, handle: RoomHandle) -> None:
        """A participant's first socket arrived here, or its last one closed (or a witness's)."""
        self._dirty[handle.room.id] = handle
        self._wake.set()
        if handle.room.fair is not None:
            self.witnesses.changed(handle)

    def answer_leaves(self, handle: RoomHandle, records: Sequence[dict[str, Any]]) -> None:
        """Another node stored leaves: those of participants with a socket here are answered with joins."""
        room = handle.room
        back = [
            Member.from_wire(r["member"])
            for r in records
            if r["kind"] == "leave" and room.sockets.get(r["member"]["id"], 0) > 0
        ]
        if back:
            pending = room.settle_presence(back)
            if pending is not None:
                logger.info("presence_rejoined", room=room.id, members=len(pending.records))
                self.relay.submit(handle, pending)
            # Published again: a janitor that took this node for dead (a long pause) removed its key.
            self.changed(handle)

    async def _publish(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._flush()
            except Exception as exc:  # NATS away for a moment: try again on the next change or beat
                logger.warning("presence_publish_failed", error=type(exc).__name__)
                await asyncio.sleep(BEAT)
                self._wake.set()

    async def _flush(self) -> None:
        assert self.board is not None
        while self._dirty:
            room_id, handle = next(iter(self._dirty.items()))
            here = sorted(pid for pid, count in handle.room.sockets.items() if count > 0)
            key = f"{self.me}.{room_id}"
            if here:
                await self.board.put(key, json.dumps(here).encode())
            else:
                await self.js.purge_stream(f"KV_{PRESENCE_BUCKET}", subject=f"$KV.{PRESENCE_BUCKET}.{key}")
            if self._dirty.get(room_id) is handle:
                del self._dirty[room_id]

    # -- heartbeat and the janitor -----------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                assert self.nodes is not None
                await self.nodes.put(self.me, str(self.passes).encode())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("presence_beat_failed", error=type(exc).__name__)
            # At a fixed rate: a slow put does not push the next one later.
            await asyncio.sleep(max(0.0, BEAT - (loop.time() - started)))

    async def _tend(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                await self._look(loop.time())
                if not self.relay.stopping:  # while its sockets close, no rooms are loaded to store leaves
                    await self._clear_suspects(everyone=self._janitor())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("presence_pass_failed", error=type(exc).__name__)
            self.passes += 1
            await asyncio.sleep(BEAT)

    def _own_earlier(self, run: str) -> bool:
        return run != self.me and run.split(".")[0] == self.node

    async def _look(self, now: float) -> None:
        """Which runs are alive, and which dead ones may have left keys."""
        live = owners(await bucket_subjects(self.js, NODES_BUCKET), NODES_BUCKET, 2)
        live = {run for run in live if not self._own_earlier(run)} | {self.me}
        absent = (self._seen | self._missing.keys()) - live
        if now - self._scanned >= FULL_SCAN:
            self._scanned = now
            listed = owners(await bucket_subjects(self.js, PRESENCE_BUCKET), PRESENCE_BUCKET, 3)
            absent |= listed - live
        missing = {run: self._missing.get(run, now) for run in absent}
        for run in missing.keys() - self._missing.keys():
            logger.info("presence_run_missing", missing=run)
        # A run of this node's own name is gone for sure; another is dead once missing for MISSING seconds.
        dead = {run for run, since in missing.items() if now - since >= MISSING or self._own_earlier(run)}
        for run in dead:
            logger.info("presence_run_dead", dead=run, missing_s=round(now - missing[run], 1))
        self._suspects |= dead
        self._missing = {run: since for run, since in missing.items() if run not in dead}
        self._seen = (self._seen | live) - dead
        self._live = live
        self.witnesses.prune(live | self._missing.keys())

    def _janitor(self) -> bool:
        return min(self._live) == self.me

    async def _clear_suspects(self, *, everyone: bool) -> None:
        for run in sorted(self._suspects):
            if not everyone and not self._own_earlier(run):
                continue
            if run in self._live:  # it came back (a pause, not a death)
                self._suspects.discard(run)
                continue
            prefix = f"$KV.{PRESENCE_BUCKET}.{run}."
            rooms = [s[len(prefix) :] for s in await bucket_subjects(self.js, PRESENCE_BUCKET, prefix + ">")]
            for room_id in rooms:
                await self._clear(run, room_id)
            if not rooms:
                self._suspects.discard(run)

    async def _clear(self, run: str, room_id: str) -> None:
        """The leaves a dead run's key for ``room_id`` calls for, stored; then the key removed."""
        listed = await self._listed(f"{run}.{room_id}")
        handle = await self.relay.room(room_id) if listed else None
        if handle is not None:
            claimed = {pid for pid, count in handle.room.sockets.items() if count > 0}
            for other in self._live - {self.me}:
                claimed.update(await self._listed(f"{other}.{room_id}"))
            gone = stale(listed, handle.room.pending.members, claimed)
            if gone:
                await self._store_leaves(handle, gone)
                logger.info("presence_cleared", room=room_id, run=run, leaves=len(gone))
        await self.js.purge_stream(f"KV_{PRESENCE_BUCKET}", subject=f"$KV.{PRESENCE_BUCKET}.{run}.{room_id}")

    async def _store_leaves(self, handle: RoomHandle, gone: list[Member]) -> None:
        room = handle.room
        seq = room.pending.seq
        records = [room.record(seq + i, "leave", m, member=m.wire()) for i, m in enumerate(gone, 1)]
        pending = room.append_records(records)
        stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done(error: BaseException | None) -> None:
            if not stored.done():
                if error is None:
                    stored.set_result(None)
                else:
                    stored.set_exception(error)

        pending.done.append(done)
        self.relay.submit(handle, pending)
        await asyncio.wait_for(stored, STORE_TIMEOUT)

    async def _listed(self, key: str) -> list[str]:
        assert self.board is not None
        try:
            entry = await self.board.get(key)
        except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
            return []
        if not entry.value:
            return []
        return [str(pid) for pid in json.loads(entry.value)]
