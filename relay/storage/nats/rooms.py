"""The cluster log's room directory: the key-value bucket ``tablerelay_rooms`` (room id -> RoomInfo as JSON,
one message per room).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from typing import Any

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from relay.core.info import RoomInfo
from relay.storage.base import RoomLimitReached
from relay.storage.nats.connect import bucket_subjects
from relay.storage.nats.stream import ROOM_TOKEN, ROOMS_BUCKET


class RoomDirectory:
    """The rooms bucket, read and written for ``NatsLog``'s room methods."""

    def __init__(self, js: JetStreamContext, kv: KeyValue) -> None:
        self.js = js
        self.kv = kv
        self.infos: dict[str, RoomInfo] = {}  # each room as last read or written here

    async def create(self, name: str, *, fear_max: int, hope_max: int, max_rooms: int) -> RoomInfo:
        if await self.count() >= max_rooms:
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
        self.infos[info.id] = info
        return info

    async def put(self, info: RoomInfo) -> None:
        """Add a room exactly as given (``store copy``); an existing one is left as it is."""
        with contextlib.suppress(nats.js.errors.KeyWrongLastSequenceError):
            await self.kv.create(info.id, json.dumps(info.wire()).encode())

    async def get(self, room: str) -> RoomInfo | None:
        # Always asked of the bucket (a server asks once per room load): another process may have deleted
        # the room since this one last saw it (``room delete --store``), and a node must not revive it.
        if not ROOM_TOKEN.match(room):
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
        info = _room_info(json.loads(value))
        self.infos[room] = info
        return info

    async def count(self) -> int:
        """Rooms in the directory (one request: the bucket keeps one message per room)."""
        info = await self.js.stream_info(f"KV_{ROOMS_BUCKET}")
        return int(info.state.messages)

    async def ids(self) -> list[str]:
        # From the bucket's stream in one request, not ``kv.keys()``: nats-py's key watcher can answer "no
        # keys" when its first message is still on the way as it reads the consumer's pending count (a
        # `store copy` out of a cluster once copied no room and said it had succeeded).
        prefix = f"$KV.{ROOMS_BUCKET}."
        return [subject[len(prefix) :] for subject in await bucket_subjects(self.js, ROOMS_BUCKET)]

    async def list_all(self) -> list[RoomInfo]:
        infos = [await self.get(room) for room in await self.ids()]
        return sorted((i for i in infos if i is not None), key=lambda i: (i.created, i.id))

    async def add(self, info: RoomInfo) -> None:
        """Enter a room exactly as given; ``KeyWrongLastSequenceError`` when its id is taken."""
        await self.kv.create(info.id, json.dumps(info.wire()).encode())
        self.infos[info.id] = info

    async def remove(self, room: str) -> None:
        """Take the room's entry out: no node finds the room from then on."""
        await self.js.purge_stream(f"KV_{ROOMS_BUCKET}", subject=f"$KV.{ROOMS_BUCKET}.{room}")


def _room_info(data: dict[str, Any]) -> RoomInfo:
    return RoomInfo(
        id=str(data["id"]),
        name=str(data["name"]),
        epoch=str(data["epoch"]),
        created=int(data["created"]),
        fear_max=int(data["fear_max"]),
        hope_max=int(data["hope_max"]),
    )
