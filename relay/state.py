"""A room's state as a fold over its event log: Fear, Hope per participant, members, sealed rolls, roll ids.

``RoomState.apply(record)`` is the only way state changes; replaying a room's stored records in order
rebuilds exactly the state the server had. Records are plain dicts (see ``relay.events``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Roll ids remembered per participant for idempotent retries. A retry comes seconds after the first try,
#: so the most recent ids are the ones that matter; keeping all of them would grow without bound.
ROLL_IDS_KEPT = 1024


class FoldError(ValueError):
    """The log holds something the fold cannot apply (a gap, an unknown kind): the log is damaged."""


@dataclass(frozen=True)
class Member:
    id: str
    name: str
    role: str

    def wire(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "role": self.role}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Member:
        return cls(str(data["id"]), str(data["name"]), str(data["role"]))


@dataclass
class Sealed:
    """A roll outside ``public``: who rolled it, and what its reveal will publish."""

    roller: str
    visibility: str
    commitment: str
    blob: bytes
    nonce: bytes
    revealed: int | None = None  # the seq of its reveal event


@dataclass
class RoomState:
    seq: int = 0
    fear: int = 0
    hope: dict[str, int] = field(default_factory=dict)
    members: dict[str, Member] = field(default_factory=dict)  # joined and not yet left
    participants: dict[str, Member] = field(default_factory=dict)  # everyone who ever joined
    sealed: dict[int, Sealed] = field(default_factory=dict)
    rolls: dict[str, dict[str, int]] = field(default_factory=dict)  # participant -> roll id -> seq
    # Reveals applied so far: how an event renders depends on the state only through them
    # (relay.visibility.render), so a rendered form stays valid while this stays the same.
    reveals: int = 0

    def apply(self, record: Mapping[str, Any]) -> None:
        seq = record["seq"]
        if seq != self.seq + 1:
            raise FoldError(f"event seq {seq} does not follow {self.seq}")
        kind = record["kind"]
        if kind == "roll":
            actor = record["actor"]["id"]
            request = record.get("request")
            if isinstance(request, str):
                ids = self.rolls.get(actor)
                if ids is None:
                    ids = self.rolls[actor] = {}
                ids[request] = seq
                if len(ids) > ROLL_IDS_KEPT:
                    del ids[next(iter(ids))]  # the oldest: dicts keep insertion order
            sealed = record.get("sealed")
            if sealed is not None:
                self.sealed[seq] = Sealed(
                    roller=actor,
                    visibility=record["visibility"],
                    commitment=sealed["commitment"],
                    blob=sealed["blob"],
                    nonce=sealed["nonce"],
                )
        elif kind == "reveal":
            target = self.sealed.get(record["of"])
            if target is None:
                raise FoldError(f"reveal at {seq} names {record['of']}, which is not a sealed roll")
            target.revealed = seq
            self.reveals += 1
            # Published now; the roll's own record still holds everything a history needs.
            target.blob = target.nonce = b""
        elif kind == "resource":
            if record["name"] == "fear":
                self.fear = record["value"]
            else:
                self.hope[record["participant"]] = record["value"]
        elif kind == "join":
            member = Member.from_wire(record["member"])
            self.members[member.id] = member
            self.participants[member.id] = member
            if member.role == "player":
                self.hope.setdefault(member.id, 0)
        elif kind == "leave":
            self.members.pop(record["member"]["id"], None)
        else:
            raise FoldError(f"unknown event kind {kind!r} at seq {seq}")
        self.seq = seq

    def copy(self) -> RoomState:
        return RoomState(
            seq=self.seq,
            fear=self.fear,
            hope=dict(self.hope),
            members=dict(self.members),
            participants=dict(self.participants),
            sealed={seq: dataclasses.replace(s) for seq, s in self.sealed.items()},
            rolls={pid: dict(ids) for pid, ids in self.rolls.items()},
            reveals=self.reveals,
        )

    def is_hidden(self, seq: int) -> bool:
        """True while ``seq`` is a sealed roll that has not been revealed."""
        sealed = self.sealed.get(seq)
        return sealed is not None and sealed.revealed is None

    def roll_seq(self, participant: str, request: str) -> int | None:
        """The seq of ``participant``'s roll with id ``request``, if it is remembered."""
        ids = self.rolls.get(participant)
        return None if ids is None else ids.get(request)

    def gm_ids(self) -> list[str]:
        return [m.id for m in self.participants.values() if m.role == "gm"]

    def wire(self) -> dict[str, Any]:
        return {
            "fear": self.fear,
            "hope": dict(self.hope),
            "members": [m.wire() for m in self.members.values()],
        }


def fold(records: Iterable[Mapping[str, Any]], state: RoomState | None = None) -> RoomState:
    state = state if state is not None else RoomState()
    for record in records:
        state.apply(record)
    return state
