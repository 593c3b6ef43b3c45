"""What the room state machine (test_room_stateful.py) plays with: the room's settings and signing key,
real tokens, the audience table written out again, merges followed, and sockets whose bytes land in memory."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from relay.core import protocol
from relay.core.actions import Session
from relay.core.info import RoomInfo
from relay.settings.config import Limits
from relay.shell.fanout import Outbox
from relay.trust import signing

#: Canonical encodings already compared with the reference encoders (pure Python, slow).
CROSS_CHECKED: set[bytes] = set()
FEAR_MAX, HOPE_MAX = 4, 3  # small caps, so short runs reach them
INFO = RoomInfo(id="room1", name="Stateful", epoch="epoch-1", created=0, fear_max=FEAR_MAX, hope_max=HOPE_MAX)
# Short windows, so welcomes and resumes cross the edge between memory, the log and "not recovered".
LIMITS = Limits(history=6, resume_max=12)
KEYRING = signing.Keyring.of(Ed25519PrivateKey.generate())
ENVELOPE = {"t", "seq", "epoch", "ts", "kind", "actor", "visibility"}
SEALED_KEYS = ENVELOPE | {"sealed", "commitment", "kid", "sig"}
VISIBILITIES = ("public", "gm", "blind", "self")
SECRET = b"stateful-machine-secret-0123456789abcdef"  # tokens are real JWTs, made and checked with it
GM_SUBS = ("gm-1", "gm-2")  # two GM tokens, so one GM can remove or merge the other
NAMES = ("Aria", "Bo", "Cy")


@dataclass(frozen=True)
class TokenDesk:
    """What ``campaign_io.invites_frame`` reads of the server: the token secret and the public address."""

    secret: bytes
    public_base: str


DESK = TokenDesk(SECRET, "https://relay.test")


def in_audience(visibility: str, roller: str, viewer: str, role: str, merged: dict[str, str]) -> bool:
    """The audience table of spec/protocol.md, written out again so the room's own copy is checked.

    ``merged`` (stored merges: gone -> into) makes the participant a roller was merged into its roller too
    (docs/protocol.md: ``into`` sees the merged participant's ``gm``/``self`` rolls in full).
    """
    own = viewer in (roller, resolve(merged, roller))
    return {"public": True, "gm": role == "gm" or own, "blind": role == "gm", "self": own}[visibility]


def resolve(merged: dict[str, str], participant: str) -> str:
    """Who ``participant`` is now, following merges (a chain a→b, b→c ends at c)."""
    seen = {participant}
    while participant in merged:
        participant = merged[participant]
        assert participant not in seen, f"merges in a cycle: {merged}"  # fail, never loop for good
        seen.add(participant)
    return participant


def split_frames(data: bytes) -> Iterator[bytes]:
    """The payloads of unmasked binary WebSocket frames written back to back (RFC 6455 §5.2)."""
    pos = 0
    while pos < len(data):
        assert data[pos] == 0x82, "every server frame is one final binary frame"
        size, pos = data[pos + 1], pos + 2
        if size == 126:
            size, pos = int.from_bytes(data[pos : pos + 2], "big"), pos + 2
        elif size == 127:
            size, pos = int.from_bytes(data[pos : pos + 8], "big"), pos + 8
        yield data[pos : pos + size]
        pos += size


class CountingDice:
    """Faces that cycle through every value a die has, so runs see crits, Hope, Fear and ties."""

    def __init__(self) -> None:
        self._n = itertools.count(7)

    def roll(self, faces: int) -> int:
        return next(self._n) * 7919 % faces + 1


class MemorySink:
    """A socket that always takes what it is given: the bytes an outbox writes, in order."""

    def __init__(self) -> None:
        self.data = bytearray()

    def ready(self) -> bool:
        return True

    def write(self, chunks: list[bytes]) -> None:
        for chunk in chunks:
            self.data += chunk

    async def writable(self) -> bool:
        return True


@dataclass
class Hidden:
    """What must not leak from one hidden roll: its markers (label, intent) and its nonce."""

    seq: int
    visibility: str
    roller: str
    markers: tuple[bytes, ...]
    nonce: bytes


@dataclass(eq=False)
class Conn:
    """One socket: its session, its real outbox, and everything it received."""

    session: Session
    outbox: Outbox
    resume: protocol.Resume | None
    sink: MemorySink = field(default_factory=MemorySink)
    welcomed: bool = False
    read: int = 0  # bytes of ``sink.data`` already checked
    seqs: list[int] = field(default_factory=list)  # event seqs received: history, then live
    first_expected: int | None = None  # the seq its first history event must have
    sent: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # request id -> frames sent
    answers: dict[str, int] = field(default_factory=dict)  # request id -> answers received
    acked: dict[str, int] = field(default_factory=dict)  # roll id -> the seq its acks name
