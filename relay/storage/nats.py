"""The cluster event log: NATS JetStream, shared by several relay nodes (spec/cluster.md).

Layout
- One stream, ``TABLERELAY_EVENTS``, holds every room's events; a room's messages are on their own subject
  ``tablerelay.events.<room>``. One message is one append: a MessagePack array of the append's records,
  each exactly as the SQLite log stores it (``relay.storage.sqlite.encode_record``), so a store copy moves
  records byte for byte and their signatures still verify.
- The room directory is the key-value bucket ``tablerelay_rooms`` (room id -> RoomInfo as JSON).

Appends
- Conditional: each carries ``Nats-Expected-Last-Subject-Sequence`` with the stream sequence of the room's
  last message (a room seq is not a stream seq, so each room's lane remembers the last pair it knows). A
  node that lost the race gets JetStream's wrong-last-sequence error, reported as ``Conflict``.
- Idempotent: each carries a ``Nats-Msg-Id`` unique to this node and append, so a publish retried after a
  timeout (a leader election, say) is stored once and answered with the first PubAck.
- Acknowledged only after JetStream's PubAck (stored on a quorum of the stream's replicas). PubAcks come
  to one inbox subscription of the log's own (``_acks``), not through ``JetStreamContext.publish``: its
  request machinery (a random token from the OS, a reflective PubAck dataclass, a validation of both
  subjects) cost about a tenth of a node's CPU per roll in the cluster's many-tables profile.
- One publish per room is in flight at a time (the next one needs the stream sequence the previous one got);
  appends made meanwhile leave together, as one message, when it is acknowledged.

Events other nodes append
- One ordered push consumer per node reads the whole stream from the node's start. For each room the server
  follows (``follow``), records reach it exactly once and in seq order: this node's own appends through their
  futures, the others' through the ``deliver`` callback, never both. A message delivered ahead of an own
  append still in flight waits for that append's PubAck.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import json
import os
import re
import secrets
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgpack
import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api
from nats.js.kv import KeyValue

from relay.core.state import RoomState
from relay.settings.logs import get_logger
from relay.storage.base import Conflict, EventLog, Record, RoomExists, RoomInfo, RoomLimitReached
from relay.storage.sqlite import decode_record, encode_record

logger = get_logger("relay.log.nats")

STREAM = "TABLERELAY_EVENTS"
SUBJECTS = "tablerelay.events."
ROOMS_BUCKET = "tablerelay_rooms"
#: JetStream's error code for a failed Nats-Expected-Last-Subject-Sequence check.
WRONG_LAST_SEQUENCE = 10071
#: The status of a reply when nothing listens on the subject: no stream holds it.
NO_RESPONDERS = "503"
#: JetStream's error code for replicas asked of a server that is not in a cluster.
NOT_CLUSTERED = 10074
#: Seconds a first node waits for a just-started cluster to have room for 3 replicas.
FORMING = 10.0
#: Seconds one publish waits for its PubAck, and how long an append keeps retrying (same Msg-Id) before
#: it is answered with an error the client may retry: long enough for a stream leader election.
PUBLISH_TIMEOUT = 2.0
APPEND_DEADLINE = 12.0
#: Seconds between looks for late PubAcks: a publish times out 2 to 2.25 s after it left.
ACK_SWEEP = 0.25
READ_BATCH = 500
#: Records per message of an import (well under NATS's default 1 MB payload limit).
IMPORT_BATCH = 100
#: Seconds after a lost race before reading the winner's events, if the stream has not delivered them.
CATCH_UP_DELAY = 0.5
#: Seconds the first connection may take, every server tried a few times.
CONNECT_PATIENCE = 20.0
#: Seconds to wait for a just-started cluster's JetStream to answer.
READY_TIMEOUT = 30.0
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

Deliver = Callable[[list[Record]], None]
T = TypeVar("T")


class BucketUnsettled(Exception):
    """A KV bucket JetStream would not make (it exists, or is being made) but cannot show yet."""

    def __init__(self, bucket: str, refusal: nats.js.errors.Error) -> None:
        said = refusal.description or type(refusal).__name__
        super().__init__(f"the bucket {bucket} could not be made ({said}) and is not there")


#: JetStream's answers while a just-started cluster, or a stream or bucket just made, elects its leader: they
#: pass on their own, so setting up waits them out (``patiently``).
NOT_READY: tuple[type[Exception], ...] = (
    TimeoutError,
    nats.errors.TimeoutError,
    nats.js.errors.ServiceUnavailableError,
    nats.js.errors.NoStreamResponseError,
    BucketUnsettled,
)


async def patiently(attempt: Callable[[], Awaitable[T]], timeout: float = READY_TIMEOUT) -> T:
    """``attempt()``, tried again every quarter second while JetStream is not ready (``NOT_READY``), for
    ``timeout`` seconds at most; then its last error is raised."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await attempt()
        except NOT_READY:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.25)


class StoreError(Exception):
    """The store address or the NATS cluster cannot be used; the message is a sentence for the operator."""


def subject(room: str) -> str:
    """The room's subject: its id when that is a safe subject token, else a hex spelling of it."""
    return SUBJECTS + (room if _TOKEN.match(room) else "x" + room.encode().hex())


def servers(store: str) -> list[str]:
    """The server addresses of a ``--store`` value: ``nats://h:p[,nats://h:p...]`` (or ``tls://``)."""
    urls = [part.strip() for part in store.split(",") if part.strip()]
    if not urls:
        raise StoreError("The store address names no NATS server.")
    for url in urls:
        if not url.startswith(("nats://", "tls://")):
            raise StoreError(f"A NATS store address starts with nats:// or tls://; got {url!r}.")
    return urls


def shown(store: str) -> str:
    """The store address as it may appear in messages and logs: passwords masked."""
    return re.sub(r"(://[^:/@,]+):[^@/,]*@", r"\1:***@", store)


def stream_seq_of(reply: str) -> int:
    """A delivered JetStream message's stream seq, from its reply subject (nats-py's ``Msg.metadata``
    builds a dataclass and a datetime for it, a few % of a node's CPU when every roll passes here)."""
    tokens = reply.split(".")
    # $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>, or the newer
    # form with a domain and an account hash after ACK, which moves every token two places on.
    return int(tokens[5] if len(tokens) == 9 else tokens[7])


def encode_message(records: Sequence[Record]) -> bytes:
    data: bytes = msgpack.packb([encode_record(r) for r in records], use_bin_type=True)
    return data


def decode_message(data: bytes) -> list[Record]:
    return [decode_record(blob) for blob in msgpack.unpackb(data, raw=False)]


@dataclass(eq=False)
class _Append:
    records: Sequence[Record]
    expected: int
    future: asyncio.Future[int]

    @property
    def last(self) -> int:
        return self.expected + len(self.records)


@dataclass(eq=False, slots=True)
class _Own:
    """A publish of this node in flight: its room seqs and, once the stream has delivered it back, its
    bytes (decoded only if the publish is given up: otherwise the records are already known here)."""

    first: int
    last: int
    data: bytes | None = None


@dataclass(eq=False)
class _Lane:
    """What this node knows of one room's subject."""

    room: str
    subject: str
    # The last message known on the subject: its last room seq and its stream seq (-1: not known yet).
    tail_seq: int = -1
    tail_stream: int = 0
    queue: deque[_Append] = field(default_factory=deque)
    busy: bool = False
    refusing: BaseException | None = None  # set between a failure and the server having seen it
    # Delivery to the server.
    tracking: bool = False  # state() has been asked: remote messages are kept from now on
    deliver: Deliver | None = None  # set by follow()
    delivered: int = 0  # the last seq the server has been given
    held: dict[int, list[Record]] = field(default_factory=dict)  # remote messages by first seq
    own: dict[str, _Own] = field(default_factory=dict)  # this node's publishes in flight, by Msg-Id
    # (first room seq, stream seq) of each message, when known from seq 1 on: where a read starts.
    index: list[tuple[int, int]] = field(default_factory=list)
    indexed: bool = False
    filling: bool = False  # a read of events the stream has not delivered is under way

    def note(self, first: int, last: int, stream_seq: int) -> None:
        if stream_seq > self.tail_stream:
            self.tail_stream, self.tail_seq = stream_seq, last
        if self.indexed and (not self.index or first > self.index[-1][0]):
            self.index.append((first, stream_seq))


class NatsLog(EventLog):
    """The JetStream backend. ``await NatsLog.connect(...)`` inside the running loop; ``close()`` it."""

    shared = True

    def __init__(self, nc: NatsClient, js: JetStreamContext, rooms: KeyValue, replicas: int) -> None:
        self.nc = nc
        self.js = js
        self.kv = rooms
        self.replicas = replicas
        self._loop = asyncio.get_running_loop()
        self._lanes: dict[str, _Lane] = {}
        self._by_subject: dict[str, _Lane] = {}
        self._node = secrets.token_hex(6)
        self._ids = itertools.count(1)
        self._infos: dict[str, RoomInfo] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sub: Any = None
        # PubAcks: each publish's reply subject is the prefix and a token of its own.
        self._ack_prefix = nc.new_inbox() + "."
        self._acks: dict[str, asyncio.Future[int]] = {}
        self._ack_tokens = itertools.count(1)
        # (when its PubAck is late, token) in order, as every publish waits as long: one timer fails the
        # late ones, rather than a timeout handle and a waiter future for each publish.
        self._ack_due: deque[tuple[float, str]] = deque()
        self._ack_timer: asyncio.TimerHandle | None = None
        self._ack_sub: Any = None
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
    ) -> NatsLog:
        """Connect, create the stream and bucket if missing (idempotently), start following the stream.

        ``replicas`` 0 means 3 when the cluster can hold 3 replicas, else 1. ``follow`` False is for one-shot
        commands that never serve sockets.
        """
        options: dict[str, Any] = {
            "servers": servers(store),
            "connect_timeout": 3,
            # A few tries per server for the first connection (a wrong password must not spin forever);
            # once connected, reconnecting never gives up (set below).
            "max_reconnect_attempts": 2,
            "reconnect_time_wait": 0.5,
            "allow_reconnect": True,
            "name": "tablerelay",
        }
        if creds:
            if not os.path.isfile(creds):
                raise StoreError(f"The NATS credentials file {creds} does not exist.")
            options["user_credentials"] = creds
        if ca:
            options["tls"] = _tls_context(ca)
        closing = asyncio.Event()
        first: list[Exception] = []  # errors of the first connection, told in one sentence if it fails
        options.update(_connection_callbacks(shown(store), closing.is_set, first))
        try:
            nc = await _first_connection(options, first)
        except (OSError, TimeoutError, nats.errors.Error) as exc:
            cause = _telling(first) or exc
            reason = str(cause).strip(". ") or type(cause).__name__
            raise StoreError(f"Cannot reach the NATS servers at {shown(store)}: {reason}.") from exc
        first.append(_CONNECTED)
        nc.options["max_reconnect_attempts"] = -1
        js = nc.jetstream(timeout=5)

        async def set_up() -> tuple[int, KeyValue]:
            count = await _ensure_stream(js, replicas)
            return count, await ensure_bucket(js, ROOMS_BUCKET, count)

        try:
            count, kv = await patiently(set_up)
        except BucketUnsettled as exc:
            await nc.close()
            raise StoreError(f"JetStream is not usable on {shown(store)}: {exc}.") from exc
        except NOT_READY as exc:
            await nc.close()
            waited = f"{READY_TIMEOUT:.0f} s"
            raise StoreError(f"JetStream on {shown(store)} did not answer within {waited}.") from exc
        except (nats.js.errors.Error, StoreError) as exc:
            await nc.close()
            raise StoreError(f"JetStream is not usable on {shown(store)}: {exc}.") from exc
        log = cls(nc, js, kv, count)
        log._closing = closing
        log._ack_sub = await nc.subscribe(log._ack_prefix + "*", cb=log._on_ack)
        if follow:
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
        if await self._room_count() >= max_rooms:
            raise RoomLimitReached(f"This server already holds its limit of {max_rooms} rooms.")
        info = RoomInfo(
            id=secrets.token_hex(8),
            name=name,
            epoch=secrets.token_hex(8),
            created=time.time_ns() // 1_000_000,
            fear_max=fear_max,
            hope_max=hope_max,
        )
        await self.kv.create(info.id, json.dumps(info.wire()).encode())
        self._infos[info.id] = info
        return info

    async def put_room(self, info: RoomInfo) -> None:
        """Add a room exactly as given (``store copy``); an existing one is left as it is."""
        with contextlib.suppress(nats.js.errors.KeyWrongLastSequenceError):
            await self.kv.create(info.id, json.dumps(info.wire()).encode())

    async def get_room(self, room: str) -> RoomInfo | None:
        # Always asked of the bucket (a server asks once per room load): another process may have deleted
        # the room since this one last saw it (``room delete --store``), and a node must not revive it.
        if not _TOKEN.match(room):
            return None
        try:
            entry = await self.kv.get(room)
            value = entry.value
        except nats.js.errors.KeyNotFoundError:
            value = None
        if not value:
            # A direct get may be answered by a replica that has not seen a room created a moment ago
            # (the link opened right after `room create`): ask the bucket's leader before saying no.
            try:
                msg = await self.js.get_last_msg(f"KV_{ROOMS_BUCKET}", f"$KV.{ROOMS_BUCKET}.{room}")
            except nats.js.errors.NotFoundError:
                return None
            value = msg.data
            if not value:  # deleted
                return None
        info = _info(json.loads(value))
        self._infos[room] = info
        return info

    async def _room_count(self) -> int:
        """Rooms in the directory (one request: the bucket keeps one message per room)."""
        info = await self.js.stream_info(f"KV_{ROOMS_BUCKET}")
        return int(info.state.messages)

    async def _room_ids(self) -> list[str]:
        # From the bucket's stream in one request, not ``kv.keys()``: nats-py's key watcher can answer "no
        # keys" when its first message is still on the way as it reads the consumer's pending count (a
        # `store copy` out of a cluster once copied no room and said it had succeeded).
        prefix = f"$KV.{ROOMS_BUCKET}."
        return [subject[len(prefix) :] for subject in await bucket_subjects(self.js, ROOMS_BUCKET)]

    async def list_rooms(self) -> list[RoomInfo]:
        infos = [await self.get_room(room) for room in await self._room_ids()]
        return sorted((i for i in infos if i is not None), key=lambda i: (i.created, i.id))

    # -- campaign life cycle (relay.ops.campaign)
    # ---------------------------------------------------------------

    async def import_room(self, info: RoomInfo, records: Sequence[Record], *, max_rooms: int) -> None:
        """As ``EventLog.import_room``. The events go first, through ordinary conditional appends (the first
        expects an empty subject, so a room id with events already stored is refused), then the directory
        entry; should anything fail on the way, the room's subject is purged again (best effort)."""
        if not _TOKEN.match(info.id):
            raise ValueError(f"room id {info.id!r} is not one a NATS store can hold")
        if await self.get_room(info.id) is not None:
            raise RoomExists(f"A room with id {info.id} already exists here.")
        if await self._room_count() >= max_rooms:
            raise RoomLimitReached(f"This store already holds its limit of {max_rooms} rooms.")
        seq = 0
        try:
            for start in range(0, len(records), IMPORT_BATCH):
                seq = await self.append(info.id, records[start : start + IMPORT_BATCH], seq)
            await self.kv.create(info.id, json.dumps(info.wire()).encode())
        except (Conflict, nats.js.errors.KeyWrongLastSequenceError) as exc:
            if seq:  # ours went in before another writer's directory entry: take ours out again
                await self._purge_events(info.id)
            raise RoomExists(f"A room with id {info.id} already exists here.") from exc
        except BaseException:
            with contextlib.suppress(Exception):
                await self._purge_events(info.id)
            raise
        self._infos[info.id] = info

    async def delete_room(self, room: str) -> bool:
        """As ``EventLog.delete_room``: the directory entry goes first (no node finds the room from then
        on), then every message on the room's subject. A node already holding the room keeps what it has in
        memory; relay.ops.campaign only deletes archived rooms from a NATS store, so nothing more is
        written."""
        if await self.get_room(room) is None:
            return False
        await self.js.purge_stream(f"KV_{ROOMS_BUCKET}", subject=f"$KV.{ROOMS_BUCKET}.{room}")
        await self._purge_events(room)
        self._infos.pop(room, None)
        return True

    async def _purge_events(self, room: str) -> None:
        await self.js.purge_stream(STREAM, subject=subject(room))
        lane = self._lanes.get(room)
        if lane is not None:
            lane.tail_seq, lane.tail_stream, lane.index, lane.indexed = -1, 0, [], False

    # -- appends --------------------------------------------------------------------------------------------

    def _lane(self, room: str) -> _Lane:
        lane = self._lanes.get(room)
        if lane is None:
            lane = self._lanes[room] = _Lane(room, subject(room))
            self._by_subject[lane.subject] = lane
        return lane

    def append(self, room: str, records: Sequence[Record], expected_seq: int) -> asyncio.Future[int]:
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
        lane.queue.append(_Append(records, expected_seq, future))
        if not lane.busy:
            lane.busy = True
            self._spawn(self._pump(lane))
        return future

    def _spawn(self, coro: Any) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pump(self, lane: _Lane) -> None:
        """Publish the lane's queued appends, one message at a time, until the queue is empty."""
        batch: list[_Append] = []
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

    async def _publish(self, lane: _Lane, batch: list[_Append]) -> None:
        records = [record for append in batch for record in append.records]
        first, last = records[0]["seq"], records[-1]["seq"]
        msg_id = f"{self._node}-{next(self._ids)}"
        headers = {
            "Nats-Msg-Id": msg_id,
            "Nats-Expected-Last-Subject-Sequence": str(lane.tail_stream),
        }
        payload = encode_message(records)
        lane.own[msg_id] = _Own(first, last)
        deadline = time.monotonic() + APPEND_DEADLINE
        error: BaseException  # what the last try failed with (the loop only gives up after one did)
        after = lane.tail_stream
        try:
            while True:
                try:
                    stored = await self._send(lane.subject, payload, headers)
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

    def _give_up(self, lane: _Lane, msg_id: str, batch: list[_Append], error: BaseException) -> None:
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

    async def _send(self, subj: str, payload: bytes, headers: dict[str, str]) -> int:
        """Publish to the stream; the stream seq of its PubAck (errors as ``JetStreamContext.publish``)."""
        token = str(next(self._ack_tokens))
        acked: asyncio.Future[int] = self._loop.create_future()
        self._acks[token] = acked
        self._ack_due.append((self._loop.time() + PUBLISH_TIMEOUT, token))
        if self._ack_timer is None:
            self._ack_timer = self._loop.call_later(ACK_SWEEP, self._sweep_acks)
        try:
            await self.nc.publish(subj, payload, reply=self._ack_prefix + token, headers=headers)
            return await acked
        finally:
            del self._acks[token]

    def _sweep_acks(self) -> None:
        now = self._loop.time()
        due = self._ack_due
        while due and due[0][0] <= now:
            acked = self._acks.get(due.popleft()[1])
            if acked is not None and not acked.done():
                acked.set_exception(TimeoutError("no PubAck"))
        self._ack_timer = self._loop.call_later(ACK_SWEEP, self._sweep_acks) if due else None

    async def _on_ack(self, msg: Msg) -> None:
        acked = self._acks.get(msg.subject[len(self._ack_prefix) :])
        if acked is None or acked.done():
            return  # late: its publish timed out and is being tried again
        if msg.headers and msg.headers.get("Status") == NO_RESPONDERS:
            acked.set_exception(nats.js.errors.NoStreamResponseError())
            return
        try:
            answer = json.loads(msg.data)
            error = answer.get("error")
            if error:
                acked.set_exception(_api_error(error))
            else:
                acked.set_result(int(answer["seq"]))
        except Exception as exc:  # not a PubAck: fail the publish, which is then tried again
            acked.set_exception(nats.errors.Error(f"unreadable PubAck: {exc!r}"))

    async def _stored_as(self, lane: _Lane, msg_id: str, after: int) -> int | None:
        """The stream seq of the room's first message after stream seq ``after`` if it is ``msg_id``."""
        try:
            msg = await self.js.get_msg(STREAM, seq=after + 1, subject=lane.subject, next=True)
        except nats.js.errors.NotFoundError:
            return None
        if (msg.headers or {}).get("Nats-Msg-Id") == msg_id and msg.seq is not None:
            return int(msg.seq)
        return None

    def _fail(self, lane: _Lane, batch: list[_Append], error: BaseException) -> None:
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
    def _accept(lane: _Lane, error: BaseException) -> None:
        if lane.refusing is error:
            lane.refusing = None

    async def _refresh_tail(self, lane: _Lane, *, patient: bool = False) -> None:
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

    def _remote(self, lane: _Lane, records: list[Record]) -> None:
        if records[-1]["seq"] <= lane.delivered:
            return
        lane.held[records[0]["seq"]] = records
        self._release(lane)

    def _release(self, lane: _Lane) -> None:
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

    def _check_behind(self, lane: _Lane) -> None:
        if lane.deliver is not None and not lane.own and lane.tail_seq > lane.delivered:
            self._fill(lane, lane.tail_seq)

    def _fill(self, lane: _Lane, upto: int) -> None:
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

    async def _messages(self, lane: _Lane, start: int, until: int) -> list[tuple[int, list[Record]]]:
        """The lane's messages from stream seq ``start`` through ``until`` (the leader's last), in order."""
        found: list[tuple[int, list[Record]]] = []
        cursor = start
        attempts = 0
        while cursor <= until:
            batch = await self._direct_batch(lane.subject, cursor)
            if not batch:
                # A follower behind the leader answered: ask again, then ask the leader one by one.
                attempts += 1
                if attempts < 5:
                    await asyncio.sleep(0.02 * attempts)
                    continue
                batch = await self._leader_next(lane.subject, cursor)
                if not batch:
                    break
            for stream_seq, records in batch:
                if stream_seq <= until:
                    found.append((stream_seq, records))
            cursor = batch[-1][0] + 1
        return found

    async def _direct_batch(self, subj: str, start: int) -> list[tuple[int, list[Record]]]:
        """Up to READ_BATCH messages of ``subj`` from stream seq ``start``, by one batched direct get."""
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox)
        found: list[tuple[int, list[Record]]] = []
        try:
            request = {"seq": start, "next_by_subj": subj, "batch": READ_BATCH}
            await self.nc.publish(f"$JS.API.DIRECT.GET.{STREAM}", json.dumps(request).encode(), reply=inbox)
            while True:
                try:
                    msg = await sub.next_msg(timeout=PUBLISH_TIMEOUT)
                except TimeoutError:
                    return found
                headers = msg.headers or {}
                status = headers.get("Status")
                if status:  # 204: end of the batch; 404: nothing (more) on the subject; 408: too early
                    return found
                found.append((int(headers["Nats-Sequence"]), decode_message(msg.data)))
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _leader_next(self, subj: str, start: int) -> list[tuple[int, list[Record]]]:
        try:
            msg = await self.js.get_msg(STREAM, seq=start, subject=subj, next=True)
        except nats.js.errors.NotFoundError:
            return []
        assert msg.data is not None
        assert msg.seq is not None
        return [(msg.seq, decode_message(msg.data))]

    async def _leader_last(self, lane: _Lane) -> int:
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
        for _, message in await self._messages(lane, start, until):
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
        for stream_seq, records in await self._messages(lane, 1, until):
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
        for sub in (self._sub, self._ack_sub):
            if sub is not None:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
        for task in list(self._tasks):
            task.cancel()
        if self._ack_timer is not None:
            self._ack_timer.cancel()
        with contextlib.suppress(Exception):
            await self.nc.drain()


_CONNECTED = Exception("connected")


def _api_error(error: dict[str, Any]) -> nats.js.errors.APIError:
    """nats-py's error for a JetStream API error answer (its ``from_error`` raises it, not returns it)."""
    try:
        nats.js.errors.APIError.from_error(error)
    except nats.js.errors.APIError as exc:
        return exc
    return nats.js.errors.APIError(**error)


def _telling(errors: list[Exception]) -> Exception | None:
    """The error of a failed first connection that says most: a refused login or certificate rather than
    the reset connection the server follows it with."""
    for error in errors:
        if isinstance(error, (nats.errors.AuthorizationError, ssl.SSLError)):
            return error
        if "authoriz" in str(error).lower():
            return error
    return errors[-1] if errors else None


async def _first_connection(options: dict[str, Any], first: list[Exception]) -> NatsClient:
    """``nats.connect``, given up on a certificate the CA does not vouch for (not something a retry
    mends) or after CONNECT_PATIENCE seconds: nats-py retries a failed TLS handshake by waiting, for ever,
    on the broken connection."""
    connecting = asyncio.ensure_future(nats.connect(**options))
    deadline = time.monotonic() + CONNECT_PATIENCE
    while not connecting.done():
        if any(isinstance(exc, ssl.SSLError) for exc in first) or time.monotonic() > deadline:
            connecting.cancel()
            with contextlib.suppress(BaseException):
                await connecting
            raise TimeoutError("no connection")
        await asyncio.wait({connecting}, timeout=0.05)
    return connecting.result()


def _tls_context(ca: str) -> ssl.SSLContext:
    """Checks the servers' certificates against ``ca`` (a PEM file) instead of the system's CAs."""
    try:
        return ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise StoreError(f"The NATS CA file {ca} cannot be read as PEM certificates: {exc}.") from exc


def _connection_callbacks(store: str, closing: Callable[[], bool], first: list[Exception]) -> dict[str, Any]:
    """nats-py's connection events as log lines (by default it prints tracebacks to stderr). Until the
    first connection is made (``first`` ends with ``_CONNECTED``), errors are kept for the caller instead."""

    async def error(exc: Exception) -> None:
        if not first or first[-1] is not _CONNECTED:
            first.append(exc)
            return
        logger.warning("nats_error", store=store, error=str(exc) or type(exc).__name__)

    async def disconnected() -> None:
        if not closing():
            logger.warning("nats_disconnected", store=store)

    async def reconnected() -> None:
        logger.info("nats_reconnected", store=store)

    return {"error_cb": error, "disconnected_cb": disconnected, "reconnected_cb": reconnected}


def _info(data: dict[str, Any]) -> RoomInfo:
    return RoomInfo(
        id=str(data["id"]),
        name=str(data["name"]),
        epoch=str(data["epoch"]),
        created=int(data["created"]),
        fear_max=int(data["fear_max"]),
        hope_max=int(data["hope_max"]),
    )


def _stream_config(replicas: int) -> api.StreamConfig:
    return api.StreamConfig(
        name=STREAM,
        subjects=[SUBJECTS + ">"],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        num_replicas=replicas,
        duplicate_window=120.0,  # seconds a Msg-Id is remembered: far longer than any append's retries
        allow_direct=True,
        discard=api.DiscardPolicy.OLD,
    )


async def _existing_replicas(js: JetStreamContext) -> int | None:
    try:
        info = await js.stream_info(STREAM)
    except nats.js.errors.NotFoundError:
        return None
    return int(info.config.num_replicas or 1)


async def _ensure_stream(js: JetStreamContext, replicas: int) -> int:
    """The events stream, created if missing; returns its replica count (what the bucket should use).

    ``replicas`` 0: 3, unless the server is not clustered, or 3 replicas still find no room after
    FORMING seconds (a cluster of fewer than 3 servers; a cluster just started may still be gathering its
    servers, hence the wait): then 1.
    """
    existing = await _existing_replicas(js)
    if existing is not None:
        return existing
    count = replicas or 3
    patience = time.monotonic() + FORMING
    while True:
        try:
            await js.add_stream(_stream_config(count))
            return count
        except nats.js.errors.APIError as exc:
            existing = await _existing_replicas(js)
            if existing is not None:  # made by another node meanwhile
                return existing
            if replicas or count == 1:
                raise StoreError(f"Cannot create the JetStream stream {STREAM}: {exc}.") from exc
            if exc.err_code == NOT_CLUSTERED or time.monotonic() > patience:
                count = 1
            else:
                await asyncio.sleep(0.5)


async def bucket_subjects(js: JetStreamContext, bucket: str, filter: str | None = None) -> list[str]:
    """The subjects holding messages in a KV bucket's stream (one request, no consumer)."""
    info = await js.stream_info(f"KV_{bucket}", subjects_filter=filter or f"$KV.{bucket}.>")
    return list((info.state.subjects or {}).keys())


async def ensure_bucket(js: JetStreamContext, name: str, replicas: int, *, ttl: float = 0) -> KeyValue:
    """KV bucket ``name`` (one value per key; ``ttl`` seconds before a key expires, 0: never), made if
    missing."""
    with contextlib.suppress(nats.js.errors.BucketNotFoundError, nats.js.errors.NotFoundError):
        return await js.key_value(name)
    try:
        return await js.create_key_value(bucket=name, history=1, replicas=replicas, ttl=ttl or None)
    except nats.js.errors.BadRequestError as refusal:
        # Made by another node meanwhile, or by our own earlier try whose answer timed out: in a cluster the
        # refusal can come while the stream is still being made, before its info is found.
        try:
            return await js.key_value(name)
        except nats.js.errors.BucketNotFoundError:
            raise BucketUnsettled(name, refusal) from refusal
