"""Reading a room's messages back from the events stream: batched direct gets, which any replica may answer,
and the stream's leader, one message at a time, when a replica is behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from relay.storage.base import Record
from relay.storage.nats.stream import PUBLISH_TIMEOUT, STREAM, decode_message

READ_BATCH = 500


async def messages(
    nc: NatsClient, js: JetStreamContext, subj: str, start: int, until: int
) -> list[tuple[int, list[Record]]]:
    """The messages of ``subj`` from stream seq ``start`` through ``until`` (the leader's last), in order."""
    found: list[tuple[int, list[Record]]] = []
    cursor = start
    attempts = 0
    while cursor <= until:
        batch = await direct_batch(nc, subj, cursor)
        if not batch:
            # A follower behind the leader answered: ask again, then ask the leader one by one.
            attempts += 1
            if attempts < 5:
                await asyncio.sleep(0.02 * attempts)
                continue
            batch = await leader_next(js, subj, cursor)
            if not batch:
                break
        for stream_seq, records in batch:
            if stream_seq <= until:
                found.append((stream_seq, records))
        cursor = batch[-1][0] + 1
    return found


async def direct_batch(nc: NatsClient, subj: str, start: int) -> list[tuple[int, list[Record]]]:
    """Up to READ_BATCH messages of ``subj`` from stream seq ``start``, by one batched direct get."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    found: list[tuple[int, list[Record]]] = []
    try:
        request = {"seq": start, "next_by_subj": subj, "batch": READ_BATCH}
        await nc.publish(f"$JS.API.DIRECT.GET.{STREAM}", json.dumps(request).encode(), reply=inbox)
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


async def leader_next(js: JetStreamContext, subj: str, start: int) -> list[tuple[int, list[Record]]]:
    try:
        msg = await js.get_msg(STREAM, seq=start, subject=subj, next=True)
    except nats.js.errors.NotFoundError:
        return []
    assert msg.data is not None
    assert msg.seq is not None
    return [(msg.seq, decode_message(msg.data))]
