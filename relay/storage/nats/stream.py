"""Where the cluster log keeps a room's events: the stream ``TABLERELAY_EVENTS``, one subject per room, and
the rooms bucket's name; the bytes of one message (one append: a MessagePack array of the append's records,
each exactly as the SQLite log stores it, ``relay.storage.codec.encode_record``); and how long one request to
the stream waits for its answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgpack

from relay.storage.base import Record
from relay.storage.codec import decode_record, encode_record

STREAM = "TABLERELAY_EVENTS"
SUBJECTS = "tablerelay.events."
ROOMS_BUCKET = "tablerelay_rooms"
#: Seconds one publish waits for its PubAck (and a batched read for each of its messages).
PUBLISH_TIMEOUT = 2.0
#: A room id that is a safe subject token (and a key of the rooms bucket) as it is.
ROOM_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def subject(room: str) -> str:
    """The room's subject: its id when that is a safe subject token, else a hex spelling of it."""
    return SUBJECTS + (room if ROOM_TOKEN.match(room) else "x" + room.encode().hex())


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
