"""A room's state as a fold over its event log: Fear, Hope per participant, members, sealed rolls, roll ids.

``RoomState.apply(record)`` is the only way state changes; replaying a room's stored records in order
rebuilds exactly the state the server had. Records are plain dicts (see ``relay.events``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The fields each campaign-management event carries besides the envelope (seq, epoch, ts, kind, actor,
#: visibility). They are public (nothing hidden is in them) and rendered as stored (relay.core.visibility).
#: ``rename``: ``member`` (with its new name), ``was`` (the old name). ``merge``: ``merged`` (the member
#: folded away), ``into`` (the member that stays), ``hope`` (into's Hope after, or None). ``kick``:
#: ``member``, ``reason`` (str or None). ``invites``: ``generation`` (the invite tokens now valid).
#: ``archive``: nothing: the room is read-only from here on.
CAMPAIGN_FIELDS: dict[str, tuple[str, ...]] = {
    "rename": ("member", "was"),
    "merge": ("merged", "into", "hope"),
    "kick": ("member", "reason"),
    "invites": ("generation",),
    "archive": (),
}

#: Roll ids remembered for idempotent retries (docs/limits.md). A client sends a roll again when the socket
#: that carried it dropped before the answer came, as soon as it is back: seconds later. So each
#: participant's ids are kept for ``ROLL_ID_WINDOW_MS`` (by the events' own clock, so a fold of the log
#: keeps exactly the same ids) and its last ``ROLL_IDS_FLOOR`` whatever their age, never more than
#: ``ROLL_IDS_KEPT``. Bounded in time, a busy room's memory stops growing once it has run that long.
ROLL_ID_WINDOW_MS = 120_000
ROLL_IDS_FLOOR = 8
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


@dataclass(slots=True)
class Sealed:
    """A roll outside ``public``: who rolled it, and what its reveal will publish.

    Slotted and small, and only kept for the room's recent hidden rolls: once a roll is older than the
    recent window, ``relay.shell.upkeep`` removes its entry and raises ``RoomState.floor`` past it; a late
    reveal or a history reaching it reads it back from the log (``relay.shell.old_rolls``). The commitment is
    only ever read from the record.

    Never changed once made: a change (a reveal, a merge, an entry read back) puts a new entry in the
    map, so a room's two states may share one.
    """

    roller: str
    visibility: str
    blob: bytes
    nonce: bytes
    revealed: int | None = None  # the seq of its reveal event


@dataclass(frozen=True, slots=True)
class OpenPending:
    """A ``pending`` event no roll names yet (spec/fairness.md): whoever completes it needs these."""

    roller: str
    asked: tuple[str, ...]
    commit: str
    ts: int
    # What its roll will spend (the event's ``holds``: Fear, and the roller's Hope), held from every other
    # spend until the roll is made, so the roll that ends its wait can always be paid.
    fear: int = 0
    hope: int = 0


@dataclass
class RoomState:
    seq: int = 0
    fear: int = 0
    hope: dict[str, int] = field(default_factory=dict)
    members: dict[str, Member] = field(default_factory=dict)  # joined and not yet left
    participants: dict[str, Member] = field(default_factory=dict)  # everyone who ever joined
    sealed: dict[int, Sealed] = field(default_factory=dict)
    # Hidden rolls at or below this seq may have left ``sealed`` (relay.shell.upkeep): for them an absent
    # entry means "ask the log" (relay.shell.old_rolls), not "not a hidden roll". 0 in a fold of the log.
    floor: int = 0
    # participant -> roll id -> (seq, ts), oldest first (see ROLL_ID_WINDOW_MS)
    rolls: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    # Reveals applied so far: how an event renders depends on the state only through them
    # (relay.core.visibility.render), so a rendered form stays valid while this stays the same.
    reveals: int = 0
    # Campaign management (relay.core.membership): who was removed, who was merged into whom, which invite
    # generation is valid, and whether the room is archived (read-only). Folded like everything else,
    # so they hold across restarts and cluster nodes.
    revoked: set[str] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)  # merged participant -> the one it became
    invites: int = 0
    archived: bool = False
    # Set by the first kick, merge or archive: from then on some sessions may no longer act, and
    # ``Room.handle`` asks relay.core.membership.barred. One flag, so a room nobody managed tests one
    # attribute per command as before (it used to test ``archived``).
    managed: bool = False
    # The room's dice seeds (spec/fairness.md): the last committed seed's number, whether it is still open
    # (committed and not revealed), when it was committed (ms), how many rolls used it, and every commitment.
    seed_n: int = 0
    seed_open: bool = False
    seed_opened: int = 0
    seed_rolls: int = 0
    seed_commits: dict[int, str] = field(default_factory=dict)  # every seed's commitment, by its number
    # Pending events no roll names yet, by seq: folded, so a restarted node or another node finds them.
    pendings: dict[int, OpenPending] = field(default_factory=dict)

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
                ts = record["ts"]
                ids[request] = (seq, ts)
                if len(ids) > ROLL_IDS_FLOOR:
                    _forget_old_ids(ids, ts - ROLL_ID_WINDOW_MS)
            fair = record.get("fair")
            if fair is not None:
                self.seed_rolls += 1
                if isinstance(fair.get("pending"), int):
                    self.pendings.pop(fair["pending"], None)
            sealed = record.get("sealed")
            if sealed is not None:
                self.sealed[seq] = Sealed(
                    roller=actor,
                    visibility=record["visibility"],
                    blob=sealed["blob"],
                    nonce=sealed["nonce"],
                )
        elif kind == "reveal":
            target = self.sealed.get(record["of"])
            if target is not None:
                # Published now; the roll's own record still holds everything a history needs.
                self.sealed[record["of"]] = Sealed(target.roller, target.visibility, b"", b"", seq)
            elif record["of"] > self.floor:
                raise FoldError(f"reveal at {seq} names {record['of']}, which is not a sealed roll")
            # else an old roll out of memory (another node revealed it): the log now answers for it
            self.reveals += 1
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
        elif kind in CAMPAIGN_FIELDS:
            self._apply_campaign(kind, record)
        elif kind == "seed_commit":
            # The next seed committed while this one is open abandons it unrevealed: a room imported without
            # its open seed's secret (docs/fairness.md, "Where this differs", (7)) cannot reveal it.
            if record["n"] != self.seed_n + 1:
                raise FoldError(f"seed {record['n']} committed at {seq} while seed {self.seed_n} is current")
            self.seed_n, self.seed_open = record["n"], True
            self.seed_commits[record["n"]] = record["commit"]
            self.seed_opened, self.seed_rolls = record["ts"], 0
        elif kind == "pending":  # a witnessed roll's announcement (spec/fairness.md)
            asked, holds = tuple(record["asked"]), record.get("holds") or {}
            self.pendings[seq] = OpenPending(
                record["roller"],
                asked,
                record["commit"],
                record["ts"],
                holds.get("fear", 0),
                holds.get("hope", 0),
            )
        elif kind == "seed_reveal":
            if not self.seed_open or record["n"] != self.seed_n:
                raise FoldError(f"seed {record['n']} revealed at {seq}, but the open seed is {self.seed_n}")
            self.seed_open = False
        else:
            raise FoldError(f"unknown event kind {kind!r} at seq {seq}")
        self.seq = seq

    def _apply_campaign(self, kind: str, record: Mapping[str, Any]) -> None:
        if kind == "rename":
            member = Member.from_wire(record["member"])
            self.participants[member.id] = member
            if member.id in self.members:
                self.members[member.id] = member
        elif kind == "merge":
            gone, into = record["merged"]["id"], record["into"]["id"]
            self.participants.pop(gone, None)
            self.members.pop(gone, None)
            old = self.hope.pop(gone, None)
            if record["hope"] is not None:
                self.hope[into] = record["hope"]
            elif old is not None:
                self.hope.setdefault(into, old)
            self.aliases[gone] = into
            for source, target in self.aliases.items():  # a chain a→b, b→c points a at c
                if target == gone:
                    self.aliases[source] = into
            for at, sealed in self.sealed.items():  # the roller of a gm/self roll may still reveal it
                if sealed.roller == gone:
                    self.sealed[at] = dataclasses.replace(sealed, roller=into)
            self._inherit_rolls(gone, into)
            self.managed = True
        elif kind == "kick":
            self.managed = True
            pid = record["member"]["id"]
            self.revoked.add(pid)
            self.members.pop(pid, None)
            self.hope.pop(pid, None)  # no tracker for someone who is gone for good
        elif kind == "invites":
            self.invites = record["generation"]
        else:  # archive: nobody is present any more, and nothing new is stored
            self.archived = self.managed = True
            self.members.clear()

    def _inherit_rolls(self, gone: str, into: str) -> None:
        """``into`` answers retries of ``gone``'s rolls: the merged device reconnects as ``into`` and may
        resend a roll whose ack it never got, which must not roll again.

        In the fold, so it holds after a restart and on every node. The newest ``ROLL_IDS_KEPT`` of both
        are kept; an id both used stays ``into``'s own.
        """
        moved = self.rolls.pop(gone, None)
        if not moved:
            return
        combined = {**moved, **self.rolls.get(into, {})}
        newest = sorted(combined.items(), key=lambda item: item[1])[-ROLL_IDS_KEPT:]
        self.rolls[into] = dict(newest)

    def identity(self, participant: str) -> str:
        """The participant ``participant`` is now (itself, or the one it was merged into)."""
        return self.aliases.get(participant, participant)

    def copy(self) -> RoomState:
        return RoomState(
            seq=self.seq,
            fear=self.fear,
            hope=dict(self.hope),
            members=dict(self.members),
            participants=dict(self.participants),
            sealed=dict(self.sealed),  # entries are never changed, only replaced (Sealed)
            floor=self.floor,
            rolls={pid: dict(ids) for pid, ids in self.rolls.items()},
            reveals=self.reveals,
            revoked=set(self.revoked),
            aliases=dict(self.aliases),
            invites=self.invites,
            archived=self.archived,
            managed=self.managed,
            seed_n=self.seed_n,
            seed_open=self.seed_open,
            seed_opened=self.seed_opened,
            seed_rolls=self.seed_rolls,
            seed_commits=dict(self.seed_commits),
            pendings=dict(self.pendings),
        )

    @property
    def seed_commit(self) -> str | None:
        """The last committed seed's commitment."""
        return self.seed_commits.get(self.seed_n)

    def is_hidden(self, seq: int) -> bool:
        """True while ``seq`` is a sealed roll that has not been revealed (for a seq at or below
        ``floor``, as far as memory knows: ``relay.shell.old_rolls`` reads the rest from the log)."""
        sealed = self.sealed.get(seq)
        return sealed is not None and sealed.revealed is None

    def revealed(self, seq: int) -> bool:
        """True when ``seq`` is a sealed roll known to be revealed."""
        sealed = self.sealed.get(seq)
        return sealed is not None and sealed.revealed is not None

    def roll_seq(self, participant: str, request: str) -> int | None:
        """The seq of ``participant``'s roll with id ``request``, if it is remembered."""
        ids = self.rolls.get(participant)
        seen = None if ids is None else ids.get(request)
        return None if seen is None else seen[0]

    def held(self, name: str, who: str | None, skip: Container[int] = (), also: int | None = None) -> int:
        """How much of Fear (``name`` "fear") or of ``who``'s Hope the open pendings hold for their rolls, but
        those in ``skip`` and ``also``. Folded from the pending events, so a restarted node and every node
        of a cluster hold the same."""
        total = 0
        for seq, pending in self.pendings.items():
            if seq not in skip and seq != also:
                total += pending.fear if name == "fear" else pending.hope if pending.roller == who else 0
        return total

    def gm_ids(self) -> list[str]:
        return [m.id for m in self.participants.values() if m.role == "gm"]

    def wire(self) -> dict[str, Any]:
        return {
            "fear": self.fear,
            "hope": dict(self.hope),
            "members": [m.wire() for m in self.members.values()],
        }


def spending(result: Mapping[str, Any]) -> dict[str, int]:
    """The most a roll with rules result ``result`` can need of each resource, by name: its ``requires``, or
    what its effects spend when that is more. What a witnessed roll holds while it waits (a pending event's
    ``holds``): the rules' spends follow from the intent alone, and their gains, which depend on the dice,
    only ever add, so the roll that ends the wait can be paid whoever spends meanwhile."""
    needs: dict[str, int] = dict(result.get("requires") or {})
    spent: dict[str, int] = {}
    for effect in result.get("effects") or ():
        if effect["delta"] < 0:
            spent[effect["resource"]] = spent.get(effect["resource"], 0) - effect["delta"]
    for name, amount in spent.items():
        needs[name] = max(needs.get(name, 0), amount)
    for name in needs:
        if name not in ("fear", "hope"):
            raise ValueError(f"the rules asked for an unknown resource {name!r}")
    return {name: amount for name, amount in sorted(needs.items()) if amount > 0}


def _forget_old_ids(ids: dict[str, tuple[int, int]], before: int) -> None:
    """Drop the oldest ids stored before ``before`` (ms), keeping the last ``ROLL_IDS_FLOOR``; and any past
    ``ROLL_IDS_KEPT``. Usually one look at the oldest id, which is young enough, and nothing to drop."""
    while len(ids) > ROLL_IDS_FLOOR:
        oldest = next(iter(ids))  # dicts keep insertion order
        if ids[oldest][1] >= before and len(ids) <= ROLL_IDS_KEPT:
            return
        del ids[oldest]


def fold(records: Iterable[Mapping[str, Any]], state: RoomState | None = None) -> RoomState:
    state = state if state is not None else RoomState()
    for record in records:
        state.apply(record)
    return state
