"""The cluster event log: NATS JetStream, shared by several relay nodes (spec/cluster.md).

Layout
- One stream, ``TABLERELAY_EVENTS``, holds every room's events; a room's messages are on their own subject
  ``tablerelay.events.<room>``. One message is one append: a MessagePack array of the append's records,
  each exactly as the SQLite log stores it (``relay.storage.codec.encode_record``), so a store copy moves
  records byte for byte and their signatures still verify (``relay.storage.nats.stream``).
- The room directory is the key-value bucket ``tablerelay_rooms`` (room id -> RoomInfo as JSON;
  ``relay.storage.nats.rooms``).

Appends
- Conditional: each carries ``Nats-Expected-Last-Subject-Sequence`` with the stream sequence of the room's
  last message (a room seq is not a stream seq, so each room's lane remembers the last pair it knows). A
  node that lost the race gets JetStream's wrong-last-sequence error, reported as ``Conflict``.
- Idempotent: each carries a ``Nats-Msg-Id`` unique to this node and append, so a publish retried after a
  timeout (a leader election, say) is stored once and answered with the first PubAck.
- Acknowledged only after JetStream's PubAck (stored on a quorum of the stream's replicas). PubAcks come
  to one inbox subscription of the log's own (``relay.storage.nats.acks``), not through
  ``JetStreamContext.publish``: its request machinery (a random token from the OS, a reflective PubAck
  dataclass, a validation of both subjects) cost about a tenth of a node's CPU per roll in the cluster's
  many-tables profile.
- One publish per room is in flight at a time (the next one needs the stream sequence the previous one got);
  appends made meanwhile leave together, as one message, when it is acknowledged.

Events other nodes append
- One ordered push consumer per node reads the whole stream from the node's start. For each room the server
  follows (``follow``), records reach it exactly once and in seq order: this node's own appends through their
  futures, the others' through the ``deliver`` callback, never both. A message delivered ahead of an own
  append still in flight waits for that append's PubAck.

Connecting and setting up the stream and buckets is ``relay.storage.nats.connect``; reading a room's
messages back, ``relay.storage.nats.reads``.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import secrets
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api
from nats.js.kv import KeyValue

from relay.core.info import RoomInfo
from relay.core.state import RoomState
from relay.settings.logs import get_logger
from relay.storage.base import Conflict, EventLog, Record, RoomExists, RoomLimitReached
from relay.storage.nats.acks import PubAcks, stream_full
from relay.storage.nats.connect import connect as connect_store
from relay.storage.nats.lanes import Append, Deliver, Lane, Own
from relay.storage.nats.pendings import PendingVault
from relay.storage.nats.reads import messages
from relay.storage.nats.rooms import RoomDirectory
from relay.storage.nats.seeds import SeedVault
from relay.storage.nats.stream import (
    ROOM_TOKEN,
    STREAM,
    SUBJECTS,
    decode_message,
    encode_message,
    stream_seq_of,
    subject,
)

logger = get_logger("relay.log.nats")

#: JetStream's error code for a failed Nats-Expected-Last-Subject-Sequence check.
WRONG_LAST_SEQUENCE = 10071
#: Seconds an append keeps retrying (same Msg-Id; each publish waits PUBLISH_TIMEOUT for its PubAck) before
#: it is answered with an error the client may retry: long enough for a stream leader election.
APPEND_DEADLINE = 12.0
#: Records per message of an import (well under NATS's default 1 MB payload limit).
IMPORT_BATCH = 100
#: Seconds after a lost race before reading the winner's events, if the stream has not delivered them.
CATCH_UP_DELAY = 0.5


class NatsLog(EventLog):
    """The JetStream backend. ``await NatsLog.connect(...)`` inside the running loop; ``close()`` it."""

    shared = True

    def __init__(self, nc: NatsClient, js: JetStreamContext, rooms: KeyValue, replicas: int) -> None:
        self.nc = nc
        self.js = js
        self.kv = rooms
        self.rooms = RoomDirectory(js, rooms)
        self.seed_vault = SeedVault(js, replicas)
        self.pending_vault = PendingVault(js, replicas)
        self._kept_watch: asyncio.Task[None] | None = None
        self.replicas = replicas
        self._loop = asyncio.get_running_loop()
        self._lanes: dict[str, Lane] = {}
        self._by_subject: dict[str, Lane] = {}
        self._node = secrets.token_hex(6)
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sub: Any = None
        self._acks = PubAcks(nc)
        self._closed = False
        self._closing = asyncio.Event()  # set by close(): the disconnection that follows is expected

    # -- connecting -----------------------------------------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        store: str,
        *,
        creds: str | None = None,
        ca: str | None = None,
        replicas: int = 0,
        follow: bool = True,
        max_bytes: int = 0,
    ) -> NatsLog:
        """Connect, create the stream and bucket if missing (idempotently), start following the stream.

        ``replicas`` 0 means 3 when the cluster can hold 3 replicas, else 1. ``follow`` False is for one-shot
        commands that never serve sockets. ``max_bytes`` above 0: the stream's byte limit
        (``nats_max_bytes``).
        """
        link = await connect_store(store, creds=creds, ca=ca, replicas=replicas, max_bytes=max_bytes)
        log = cls(link.nc, link.js, link.rooms, link.replicas)
        log._closing = link.closing
        await log._acks.subscribe()
        if follow:
            # A serving node makes the fair-dice buckets at its start (spec/cluster.md), not at a room's first
            # witnessed roll: made there, with three replicas on a busy cluster, the roll waited seconds.
            await log.seed_vault.bucket()
            await log.pending_vault.bucket()
            await log._start_following()
        return log

    async def _start_following(self) -> None:
        info = await self.js.stream_info(STREAM)
        self._sub = await self.js.subscribe(
            SUBJECTS + ">",
            stream=STREAM,
            ordered_consumer=True,
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            config=api.ConsumerConfig(opt_start_seq=info.state.last_seq + 1),
            idle_heartbeat=1.0,
            cb=self._on_message,
        )

    # -- the room directory ---------------------------------------------------------------------------------

    async def create_room(self, name: str, *, fear_max: int, hope_max: int, max_rooms: int) -> RoomInfo:
        return await self.rooms.create(name, fear_max=fear_max, hope_max=hope_max, max_rooms=max_rooms)

    async def put_room(self, info: RoomInfo) -> None:
        """Add a room exactly as given (``store copy``); an existing one is left as it is."""
        await self.rooms.put(info)

    async def get_room(self, room: str) -> RoomInfo | None:
        return await self.rooms.get(room)

    async def list_rooms(self) -> list[RoomInfo]:
        return await self.rooms.list_all()

    # -- campaign life cycle (relay.ops.campaign)
    # ---------------------------------------------------------------

    async def import_room(
        self, info: RoomInfo, records: Sequence[Record], *, max_rooms: int, kept: Sequence[Record] = ()
    ) -> None:
        """As ``EventLog.import_room``. The events go first, through ordinary conditional appends (the first
        expects an empty subject, so a room id with events already stored is refused; each stores its
        pendings' kept first), then the directory entry; should anything fail, the subject is purged again."""
        if not ROOM_TOKEN.match(info.id):
            raise ValueError(f"room id {info.id!r} is not one a NATS store can hold")
        if await self.get_room(info.id) is not None:
            raise RoomExists(f"A room with id {info.id} already exists here.")
        if await self.rooms.count() >= max_rooms:
            raise RoomLimitReached(f"This store already holds its limit of {max_rooms} rooms.")
        seq = 0
        try:
            for start in range(0, len(records), IMPORT_BATCH):
                batch = records[start : start + IMPORT_BATCH]
                mine = [k for k in kept if seq < k["pending"] <= batch[-1]["seq"]]
                seq = await self.append(info.id, batch, seq, mine)
            await self.rooms.add(info)
        except (Conflict, nats.js.errors.KeyWrongLastSequenceError) as exc:
            if seq:  # ours went in before another writer's directory entry: take ours out again
                await self._purge_events(info.id)
            raise RoomExists(f"A room with id {info.id} already exists here.") from exc
        except BaseException:
            with contextlib.suppress(Exception):
                await self._purge_events(info.id)
            raise

    async def ensure_seed(self, room: str, n: int, candidate: bytes) -> bytes:
        return await self.seed_vault.ensure(room, n, candidate)

    async def seeds(self, room: str, first: int = 1) -> dict[int, bytes]:
        return await self.seed_vault.stored(room, first)

    async def keep_witness(self, room: str, pending: int, commit: str, participant: str, value: bytes) -> str:
        return await self.pending_vault.witness(room, pending, commit, participant, value)

    async def close_pending(self, room: str, pending: int, commit: str) -> Record | None:
        return await self.pending_vault.close(room, pending, commit)

    async def watch_kept(self, deliver: Callable[[str, Record], None]) -> None:
        if self._kept_watch is None:
            self._kept_watch = await self.pending_vault.watch(deliver)
            self._tasks.add(self._kept_watch)

    async def kept_rolls(self, room: str) -> list[Record]:
        return await self.pending_vault.stored(room)

    async def retire_kept(self, room: str, upto: int, keep: Collection[tuple[int, str]]) -> None:
        await self.pending_vault.retire(room, upto, keep)

    async def delete_room(self, room: str) -> bool:
        """As ``EventLog.delete_room``: the directory entry goes first (no node finds the room from then
        on), then every message on the room's subject. A node already holding the room keeps what it has in
        memory; relay.ops.campaign only deletes archived rooms from a NATS store, so nothing more is
        written."""
        if await self.get_room(room) is None:
            return False
        await self.rooms.remove(room)
        await self._purge_events(room)
        await self.seed_vault.remove(room)
        await self.pending_vault.remove(room)
        self.rooms.infos.pop(room, None)
        return True

    async def _purge_events(self, room: str) -> None:
        await self.js.purge_stream(STREAM, subject=subject(room))
        lane = self._lanes.get(room)
        if lane is not None:
            lane.tail_seq, lane.tail_stream, lane.index, lane.indexed = -1, 0, [], False

    # -- appends --------------------------------------------------------------------------------------------

    def _lane(self, room: str) -> Lane:
        lane = self._lanes.get(room)
        if lane is None:
            lane = self._lanes[room] = Lane(room, subject(room))
            self._by_subject[lane.subject] = lane
        return lane

    def append(
        self, room: str, records: Sequence[Record], expected_seq: int, kept: Sequence[Record] = ()
    ) -> asyncio.Future[int]:
        """As ``EventLog.append``; after a failure, appends made before the failed futures' callbacks have
        run fail the same way (they may have been built on the failed one: its seqs can be taken by another
        node's events, so the expected seq alone cannot tell)."""
        if self._closed:
            raise RuntimeError("the event log is closed")
        future: asyncio.Future[int] = self._loop.create_future()
        lane = self._lane(room)
        if lane.refusing is not None:
            # Made before the server saw the failure of an append this one may be built on.
            future.set_exception(lane.refusing)
            return future
        lane.queue.append(Append(records, expected_seq, future, kept))
        if not lane.busy:
            lane.busy = True
            self._spawn(self._pump(lane))
        return future

    def _spawn(self, coro: Any) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pump(self, lane: Lane) -> None:
        """Publish the lane's queued appends, one message at a time, until the queue is empty."""
        batch: list[Append] = []
        try:
            while lane.queue:
                if lane.tail_seq < 0 or lane.queue[0].expected > lane.tail_seq:
                    await self._refresh_tail(lane, patient=True)
                batch = [lane.queue.popleft()]
                if batch[0].expected != lane.tail_seq:
                    self._fail(lane, batch, Conflict(lane.room, batch[0].expected, lane.tail_seq))
                    continue
                while lane.queue and lane.queue[0].expected == batch[-1].last:
                    batch.append(lane.queue.popleft())
                await self._publish(lane, batch)
                batch = []
        except Exception as exc:  # the lane's state is unknown: read it again before the next append
            logger.error("append_failed", room=lane.room, error=type(exc).__name__, exc_info=exc)
            lane.tail_seq = -1
            self._fail(lane, batch, exc)  # the batch under way too: its requesters must hear
        finally:
            lane.busy = False
            if lane.queue and not self._closed:
                lane.busy = True
                self._spawn(self._pump(lane))

    async def _publish(self, lane: Lane, batch: list[Append]) -> None:
        # The tail the batch was checked against (``_pump``): another node's message may reach the lane while
        # the kept secrets below are stored, and the publish must then lose, not follow it.
        after = lane.tail_stream
        for append in batch:
            for kept in append.kept:
                # Before the message: a pending event any node can see always has its secret stored. A
                # failure here fails the batch (``_pump``) with nothing published.
                await self.pending_vault.put(lane.room, kept)
        records = [record for append in batch for record in append.records]
        first, last = records[0]["seq"], records[-1]["seq"]
        msg_id = f"{self._node}-{next(self._ids)}"
        headers = {
            "Nats-Msg-Id": msg_id,
            "Nats-Expected-Last-Subject-Sequence": str(after),
        }
        payload = encode_message(records)
        lane.own[msg_id] = Own(first, last)
        deadline = time.monotonic() + APPEND_DEADLINE
        error: BaseException  # what the last try failed with (the loop only gives up after one did)
        try:
            while True:
                try:
                    stored = await self._acks.send(lane.subject, payload, headers)
                except nats.js.errors.APIError as exc:
                    if exc.err_code == WRONG_LAST_SEQUENCE:
                        # Lost to another node, or an earlier try of this very publish was stored and
                        # JetStream checked the expected sequence before the Msg-Id: the message after
                        # ours tells.
                        mine = await self._stored_as(lane, msg_id, after)
                        if mine is not None:
                            stored = mine
                            break
                        lane.own.pop(msg_id, None)
                        await self._refresh_tail(lane)
                        conflict = Conflict(lane.room, batch[0].expected, max(lane.tail_seq, first))
                        self._fail(lane, batch, conflict)
                        return
                    full = stream_full(exc)
                    if full is not None:  # refused, not stored: no use trying again until there is room
                        lane.own.pop(msg_id, None)
                        self._fail(lane, batch, full)
                        return
                    error = exc
                except (TimeoutError, nats.errors.Error, OSError) as exc:  # an election, a reconnect
                    error = exc
                else:
                    break
                if time.monotonic() > deadline or self._closed:
                    self._give_up(lane, msg_id, batch, error)
                    return
                await asyncio.sleep(0.2)
        except Exception as exc:
            # Finding out what became of a lost race (the message after ours, the tail) failed too, in
            # the middle of an election say: the requesters must still hear, and the lane must not keep
            # waiting for this publish.
            self._give_up(lane, msg_id, batch, exc)
            return
        lane.own.pop(msg_id, None)
        lane.note(first, last, stored)
        lane.delivered = max(lane.delivered, last)
        for append in batch:
            if not append.future.done():
                append.future.set_result(append.last)
        self._release(lane)

    def _give_up(self, lane: Lane, msg_id: str, batch: list[Append], error: BaseException) -> None:
        """Fail a publish whose fate is not known: its requesters get ``error``; the lane reads its tail
        again before the next append, and takes the message as another node's should the stream have
        stored it after all."""
        given_up = lane.own.pop(msg_id, None)
        seen = decode_message(given_up.data) if given_up is not None and given_up.data is not None else None
        first = batch[0].records[0]["seq"]
        logger.warning("append_gave_up", room=lane.room, first=first, error=type(error).__name__)
        lane.tail_seq = -1  # it may have been stored after all: read the tail before the next one
        self._fail(lane, batch, error)
        if seen is not None:  # stored after all, and delivered: the server takes it as remote
            self._remote(lane, seen)

    async def _stored_as(self, lane: Lane, msg_id: str, after: int) -> int | None:
        """The stream seq of the room's first message after stream seq ``after`` if it is ``msg_id``."""
        try:
            msg = await self.js.get_msg(STREAM, seq=after + 1, subject=lane.subject, next=True)
        except nats.js.errors.NotFoundError:
            return None
        if (msg.headers or {}).get("Nats-Msg-Id") == msg_id and msg.seq is not None:
            return int(msg.seq)
        return None

    def _fail(self, lane: Lane, batch: list[Append], error: BaseException) -> None:
        """Fail ``batch`` and every append queued behind it (they were built on top of it)."""
        failed = [*batch, *lane.queue]
        lane.queue.clear()
        for append in failed:
            if not append.future.done():
                append.future.set_exception(error)
        lane.refusing = error
        # Runs after the server's callbacks for the futures failed above, which were scheduled first.
        self._loop.call_soon(self._accept, lane, error)
        if isinstance(error, Conflict):
            # The server retries once the other node's events reach it; should the stream be slow to
            # deliver them (its consumer being reset after a server died, say), read them instead.
            self._loop.call_later(CATCH_UP_DELAY, self._check_behind, lane)

    @staticmethod
    def _accept(lane: Lane, error: BaseException) -> None:
        if lane.refusing is error:
            lane.refusing = None

    async def _refresh_tail(self, lane: Lane, *, patient: bool = False) -> None:
        """Ask the stream's leader for the room's last message; ``patient``: through a leader election."""
        deadline = time.monotonic() + (APPEND_DEADLINE if patient else 0)
        while True:
            try:
                msg = await self.js.get_last_msg(STREAM, lane.subject)
                break
            except nats.js.errors.NotFoundError:
                lane.tail_seq, lane.tail_stream = 0, 0
                return
            except (TimeoutError, nats.errors.Error, OSError):
                if time.monotonic() > deadline or self._closed:
                    raise
                await asyncio.sleep(0.2)
        assert msg.data is not None
        assert msg.seq is not None
        records = decode_message(msg.data)
        if msg.seq >= lane.tail_stream:
            lane.tail_stream, lane.tail_seq = msg.seq, records[-1]["seq"]

    # -- events from the stream ------------------------------------------------------------------------

    async def _on_message(self, msg: Msg) -> None:
        lane = self._by_subject.get(msg.subject)
        if lane is None:
            return
        stream_seq = stream_seq_of(msg.reply)
        headers = msg.headers
        mine = lane.own.get(headers.get("Nats-Msg-Id", "")) if headers and lane.own else None
        if mine is not None:  # this node's append, still waiting for its PubAck: nothing to decode
            lane.note(mine.first, mine.last, stream_seq)
            mine.data = msg.data
            return
        try:
            records = decode_message(msg.data)
        except Exception:
            logger.exception("undecodable_message", subject=msg.subject)
            return
        lane.note(records[0]["seq"], records[-1]["seq"], stream_seq)
        if lane.tracking:
            self._remote(lane, records)

    def _remote(self, lane: Lane, records: list[Record]) -> None:
        if records[-1]["seq"] <= lane.delivered:
            return
        lane.held[records[0]["seq"]] = records
        self._release(lane)

    def _release(self, lane: Lane) -> None:
        """Hand the server the held messages that follow what it has, in order."""
        if lane.deliver is None:
            return
        for first in sorted(lane.held):
            records = lane.held[first]
            if records[-1]["seq"] <= lane.delivered:
                del lane.held[first]
            elif first <= lane.delivered + 1:
                del lane.held[first]
                records = records[lane.delivered + 1 - first :]  # the part the server lacks
                lane.delivered = records[-1]["seq"]
                # After the callbacks of the futures this node's PubAcks settled, which came first.
                self._loop.call_soon(lane.deliver, records)
            else:
                if not lane.own:  # a gap nothing of ours will fill (a consumer reset): read it
                    self._fill(lane, first - 1)
                return

    def catch_up(self, room: str) -> None:
        """Read the room's events the stream holds beyond what the server has, without waiting for the
        consumer to deliver them (the tail was just read from the leader)."""
        lane = self._lanes.get(room)
        if lane is not None:
            self._check_behind(lane)

    def _check_behind(self, lane: Lane) -> None:
        if lane.deliver is not None and not lane.own and lane.tail_seq > lane.delivered:
            self._fill(lane, lane.tail_seq)

    def _fill(self, lane: Lane, upto: int) -> None:
        """Read the records after what the server has through ``upto`` from the store, and deliver them."""
        if lane.filling or self._closed:
            return
        lane.filling = True

        async def fill() -> None:
            try:
                missing = await self.read(lane.room, lane.delivered, upto - lane.delivered)
            except Exception as exc:
                logger.warning("catch_up_failed", room=lane.room, error=type(exc).__name__)
                return
            finally:
                lane.filling = False
            for record in missing:
                if record["seq"] > lane.delivered and record["seq"] not in lane.held:
                    lane.held[record["seq"]] = [record]
            self._release(lane)

        self._spawn(fill())

    def follow(self, room: str, seq: int, deliver: Deliver) -> None:
        lane = self._lane(room)
        lane.deliver = deliver
        lane.delivered = max(lane.delivered, seq)
        self._release(lane)

    def unfollow(self, room: str) -> None:
        lane = self._lanes.get(room)
        if lane is None:
            return
        # Else every message of the room's subject would go on being read, kept and handed to a room the
        # server no longer holds, for as long as the node runs. Cleared as well as dropped: a catch-up
        # already scheduled still holds the lane.
        lane.deliver, lane.tracking, lane.delivered = None, False, 0
        lane.held.clear()
        lane.index, lane.indexed = [], False
        if not (lane.busy or lane.queue or lane.own or lane.filling):
            del self._lanes[room]
            del self._by_subject[lane.subject]
        # else: not idle after all (the server unloads only rooms with nothing in flight); the appends keep
        # their lane.

    # -- reads ----------------------------------------------------------------------------------------------

    async def _leader_last(self, lane: Lane) -> int:
        """The stream seq of the room's last message, from the leader (0: none)."""
        await self._refresh_tail(lane)
        return lane.tail_stream

    async def last_seq(self, room: str) -> int:
        lane = self._lane(room)
        await self._refresh_tail(lane)
        return lane.tail_seq

    async def read(self, room: str, after_seq: int, limit: int) -> list[Record]:
        if self._closed:
            raise RuntimeError("the event log is closed")
        lane = self._lane(room)
        start = 1
        if lane.indexed and lane.index:
            at = bisect.bisect_right(lane.index, (after_seq + 1, 1 << 62)) - 1
            if at >= 0:
                start = lane.index[at][1]
        until = await self._leader_last(lane)
        records: list[Record] = []
        for _, message in await messages(self.nc, self.js, lane.subject, start, until):
            records.extend(r for r in message if r["seq"] > after_seq)
            if len(records) >= limit:
                break
        return records[:limit]

    async def state(self, room: str) -> RoomState:
        """The fold of the room's log; from now on this node keeps the room's remote events for ``follow``."""
        if self._closed:
            raise RuntimeError("the event log is closed")
        lane = self._lane(room)
        lane.tracking = True
        until = await self._leader_last(lane)
        state = RoomState()
        index: list[tuple[int, int]] = []
        for stream_seq, records in await messages(self.nc, self.js, lane.subject, 1, until):
            if records[0]["seq"] != state.seq + 1:
                raise RuntimeError(f"room {room}: the stream holds seq {records[0]['seq']} after {state.seq}")
            index.append((records[0]["seq"], stream_seq))
            for record in records:
                state.apply(record)
        lane.index, lane.indexed = index, True
        lane.delivered = max(lane.delivered, state.seq)
        return state

    async def close(self) -> None:
        if self._closed:
            return
        # Finish the appends already made, then stop.
        while any(lane.busy for lane in self._lanes.values()):
            await asyncio.sleep(0.01)
        self._closed = True
        self._closing.set()
        for sub in (self._sub, self._acks.sub):
            if sub is not None:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
        for task in list(self._tasks):
            task.cancel()
        self._acks.stop()
        with contextlib.suppress(Exception):
            await self.nc.drain()
