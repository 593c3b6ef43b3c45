"""A sans-I/O table for room tests: a Room, an in-memory log that commits when told, what each session got."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import msgpack
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import rules
from relay.core import fair, protocol
from relay.core.actions import Append, Broadcast, KeepWitness, Pending, Send, Session
from relay.core.claims import Claims
from relay.core.info import RoomInfo
from relay.core.room import Room
from relay.core.state import RoomState, fold
from relay.settings.config import Limits
from relay.shell.fanout import Renderer
from relay.trust.forms import Forms
from relay.trust.signing import Keyring
from rules.rng import Scripted

INFO = RoomInfo(id="room1", name="Test", epoch="epoch1", created=0, fear_max=12, hope_max=6)
#: One key for the sans-I/O tests: frames are signed as the server signs them.
KEYRING = Keyring.of(Ed25519PrivateKey.from_private_bytes(bytes(range(32))))


def forms(room_id: str = INFO.id) -> Forms:
    return Forms(room_id, KEYRING, capacity=10_000)


def scripted(*faces: int) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A resolver that rolls the given faces, in order, across all rolls."""
    dice = Scripted(faces)
    return lambda intent: rules.resolve(intent, rng=dice)


def fixed(result: dict[str, Any]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A resolver that returns a copy of ``result`` whatever the intent (for resource rules)."""
    return lambda intent: {**result, "system": intent["system"]}


def frame(data: dict[str, Any], limits: Limits | None = None) -> protocol.Frame:
    """A client frame through the real decoder and validator."""
    return protocol.parse(msgpack.packb(data, use_bin_type=True), limits or Limits())


class Table:
    def __init__(
        self,
        resolve: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
        *,
        limits: Limits | None = None,
        info: RoomInfo = INFO,
        stored: list[dict[str, Any]] | None = None,
        auto_commit: bool = True,
        seeds: Mapping[int, bytes] | None = None,
    ) -> None:
        """``seeds``: the room's stored dice seeds, for fair dice (spec/fairness.md); none: SecureDice."""
        counter = itertools.count(1)
        nonces = itertools.count(1)
        self.room = Room(
            info,
            fold(stored or []),
            limits or Limits(),
            resolve=resolve or scripted(*([5, 6] * 50)),
            clock=lambda: 1_700_000_000_000,
            make_id=lambda: f"p{next(counter)}",
            nonce=lambda: bytes([next(nonces) % 256]) * 32,
            seeds=seeds,
        )
        self.stored: list[dict[str, Any]] = list(stored or [])
        self.queue: list[Pending] = []
        self.got: dict[Session, list[dict[str, Any]]] = defaultdict(list)
        self.sessions: list[Session] = []
        self.auto_commit = auto_commit
        self.forms = forms(info.id)
        # What the store keeps apart from the log for open witnessed rolls (spec/fairness.md), by pending seq.
        self.vault: dict[int, dict[str, Any]] = {}

    # -- people ------------------------------------------------------------------------------------------
    def join(
        self, role: str, *, sub: str | None = None, name: str | None = None, witness: bool = False
    ) -> Session:
        claims = Claims(INFO.id, role, sub, name, None)
        session, join = self.room.admit(claims, name, frozenset(), witness=witness)
        self.sessions.append(session)
        if join is not None:
            self.queue.append(join)
            if self.auto_commit:
                self.commit()
        return session

    def leave(self, session: Session) -> None:
        self.sessions.remove(session)
        leave = self.room.disconnect(session)
        if leave is not None:
            self.queue.append(leave)
            if self.auto_commit:
                self.commit()

    # -- frames ------------------------------------------------------------------------------------------
    def send(self, session: Session, data: dict[str, Any]) -> list[dict[str, Any]]:
        """Send a frame; returns the frames ``session`` got because of it (after commit when auto)."""
        before = len(self.got[session])
        self.execute(self.room.handle(session, frame(data, self.room.limits)))
        if self.auto_commit:
            self.commit()
        return self.got[session][before:]

    def execute(self, actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self.got[action.session].append(action.frame)
            elif isinstance(action, Append):
                self.queue.append(action.pending)
            elif isinstance(action, Broadcast):
                for s in self.sessions:
                    self.got[s].append(Renderer(action.record, self.room.committed, self.forms).frame(s))
            elif isinstance(action, KeepWitness):  # stored at once, as the store answers
                assert self.room.fair is not None
                self.execute(fair.witness_kept(self.room, self.room.fair, action, self.keep(action)))

    def keep(self, action: KeepWitness) -> str:
        """The store's side of a witness's value (relay.storage.base.EventLog.keep_witness)."""
        kept = self.vault.get(action.pending)
        if kept is None or kept["commit"] != action.commit:
            return "missing"
        if kept["closed"]:
            return "closed"
        if action.participant in kept["values"]:
            return "twice"
        kept["values"][action.participant] = action.value
        return "stored"

    def commit(self) -> None:
        """The log: store queued appends in order, refusing any whose expected seq is stale."""
        while self.queue:
            pending = self.queue.pop(0)
            if pending.expected != len(self.stored):
                self.execute(self.room.failed_append(pending, conflict=True))
                continue
            self.stored.extend(pending.records)
            for kept in pending.kept:
                self.vault[kept["pending"]] = {**kept, "values": dict(kept["values"])}
            self.execute(self.room.committed_append(pending))

    def fail_next(self) -> None:
        """The log could not store the next queued append (say, the disk is full)."""
        pending = self.queue.pop(0)
        self.execute(self.room.failed_append(pending, conflict=False))

    # -- looking ---------------------------------------------------------------------------------------
    def events(self, session: Session) -> list[dict[str, Any]]:
        return [f for f in self.got[session] if f["t"] == "event"]

    def replies(self, session: Session) -> list[dict[str, Any]]:
        return [f for f in self.got[session] if f["t"] != "event"]

    def refold(self) -> RoomState:
        return fold(self.stored)
