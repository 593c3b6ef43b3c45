"""Fair rolls in the room (spec/fairness.md), sans-I/O: which seed a roll uses, the roller's seed, and the
witnesses of GM and hidden rolls.

An unwitnessed roll is made at once from the open seed and the roller's seed. A witnessed one (a hidden
roll, or a GM's) first appends a public ``pending`` event that binds its intent and label to a secret nonce
and names the witnesses asked; each asked client answers with random bytes (a ``witness`` frame), and the
roll is made once all have answered or when the shell's timer says ``witness_wait_ms`` has passed. The
values the server could not foresee go into the roll's key, so its owner cannot steer the dice.

What this module needs of the room is the narrow ``Room`` protocol below (``relay.core.room.Room`` is one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import rules
from relay.core import fairness, protocol
from relay.core.actions import Action, Append, Pending, PrepareSeed, Send, Session, WaitWitnesses
from relay.core.seeds import RoomSeeds
from relay.core.state import Member, RoomState
from relay.settings.config import Limits
from rules.rng import KeyedDice

#: Sealed rolls are witnessed whoever makes them; public ones when a GM makes them.
SEALED = ("gm", "blind", "self")
#: The most witnesses one roll asks (spec/fairness.md).
MAX_ASKED = 16
SEED_NOT_READY = "The room's next dice seed is still being stored; try again in a moment."


@dataclass(eq=False)
class OpenRoll:
    """A witnessed roll between its ``pending`` event and the roll itself."""

    seq: int  # the pending event's
    roller: Session
    frame: protocol.Roll
    n: int
    nonce: bytes
    asked: tuple[str, ...]
    values: dict[str, bytes] = field(default_factory=dict)
    acks: list[tuple[Session, str]] = field(default_factory=list)


class FairState:
    """A room's fair-dice state: its seeds, its open witnessed rolls, who can witness."""

    def __init__(self, seeds: RoomSeeds) -> None:
        self.seeds = seeds
        self.open: dict[int, OpenRoll] = {}  # by the pending event's seq
        self.witnesses: dict[str, int] = {}  # participant id -> its witness-capable sockets

    def joined(self, session: Session, witness: bool) -> None:
        if witness:
            self.witnesses[session.id] = self.witnesses.get(session.id, 0) + 1

    def left(self, session: Session, witness: bool) -> None:
        if witness:
            count = self.witnesses.get(session.id, 0) - 1
            if count > 0:
                self.witnesses[session.id] = count
            else:
                self.witnesses.pop(session.id, None)


class Room(Protocol):
    """What fair rolls need of a room."""

    @property
    def id(self) -> str: ...

    @property
    def limits(self) -> Limits: ...

    @property
    def pending(self) -> RoomState: ...

    @property
    def fair(self) -> FairState | None: ...

    def now(self) -> int: ...

    def draw_nonce(self) -> bytes: ...

    def record(self, seq: int, kind: str, actor: Member, **fields: Any) -> dict[str, Any]: ...

    def append_records(
        self,
        records: list[dict[str, Any]],
        ack: tuple[Session, str] | None = None,
        *,
        ack_seq: int | None = None,
    ) -> Pending: ...

    def make_roll(
        self,
        session: Session,
        frame: protocol.Roll,
        result: dict[str, Any],
        fair: dict[str, Any] | None,
        before: list[dict[str, Any]],
        acks: list[tuple[Session, str]],
    ) -> list[Action]: ...


def _error(session: Session, code: str, message: str, request_id: str | None) -> list[Action]:
    return [Send(session, protocol.error_frame(code, message, request_id))]


def roll(room: Room, state: FairState, session: Session, frame: protocol.Roll) -> list[Action]:
    """A roll frame in a fair room: made at once, or its pending event appended and its witnesses awaited."""
    for open_roll in state.open.values():
        if open_roll.roller.id == session.id and open_roll.frame.id == frame.id:
            open_roll.acks.append((session, frame.id))  # a retry while witnesses answer: the same roll
            return []
    busy = bool(state.open)  # an open roll holds its seed: no reveal until it is made
    plan = state.seeds.for_roll(room.pending, room.now(), hold=busy)
    if plan is None:
        return _error(session, "conflict", SEED_NOT_READY, frame.id)
    events, n, secret = plan
    before = seed_records(room, events, session.member)
    asked = _asked(room, state, session, frame)
    if not asked:
        fair, result = _result(room, session, frame, n, secret, None, None, {})
        made = room.make_roll(session, frame, result, fair, before, [(session, frame.id)])
        return made + prepare(room, state)
    # The intent is checked now, so a bad one is refused before anyone is asked to witness it.
    rules.resolve(frame.intent, rng=KeyedDice(bytes(32)))
    nonce = room.draw_nonce()
    seq = room.pending.seq + 1 + len(before)
    commit = fairness.pending_commit(protocol.event_values(frame.intent), frame.label, nonce)
    pending = room.record(
        seq, "pending", session.member, roller=session.id, n=n, asked=list(asked), commit=commit
    )
    pending["visibility"] = frame.visibility
    state.open[seq] = OpenRoll(seq, session, frame, n, nonce, asked, acks=[(session, frame.id)])
    wait = WaitWitnesses(seq, room.limits.witness_wait_ms)
    return [Append(room.append_records([*before, pending])), wait, *prepare(room, state)]


def witness(room: Room, state: FairState, session: Session, frame: protocol.Witness) -> list[Action]:
    """A witness's value for an open roll: kept, and the roll made once every witness asked has answered."""
    open_roll = state.open.get(frame.pending)
    if open_roll is None:
        return _error(session, "not_found", "There is no open roll at that seq to witness.", frame.id)
    if session.id not in open_roll.asked:
        return _error(session, "forbidden", "You were not asked to witness that roll.", frame.id)
    if session.id in open_roll.values:
        return _error(session, "conflict", "You have already witnessed that roll.", frame.id)
    open_roll.values[session.id] = frame.value
    answered: list[Action] = [Send(session, {"t": "ack", "id": frame.id, "seq": open_roll.seq})]
    if len(open_roll.values) < len(open_roll.asked):
        return answered
    return answered + complete(room, state, open_roll.seq)


def complete(room: Room, state: FairState, seq: int) -> list[Action]:
    """Make the open roll of pending ``seq`` with the values it has (the shell calls this when the wait is
    over; a roll already made is not made again)."""
    open_roll = state.open.pop(seq, None)
    if open_roll is None:
        return []
    secret = state.seeds.secrets.get(open_roll.n)
    if secret is None:  # cannot happen while the open seed is held; refuse rather than roll unfairly
        return [Send(s, protocol.error_frame("internal", SEED_NOT_READY, rid)) for s, rid in open_roll.acks]
    frame, roller = open_roll.frame, open_roll.roller
    fair, result = _result(room, roller, frame, open_roll.n, secret, seq, open_roll.nonce, open_roll.values)
    return room.make_roll(roller, frame, result, fair, [], open_roll.acks) + prepare(room, state)


def abandon(state: FairState, committed_seq: int, code: str, message: str) -> list[Action]:
    """Open rolls whose pending event was not stored (its append failed): their rollers get the failure's
    ``code`` and ``message``."""
    gone = [seq for seq in state.open if seq > committed_seq]
    actions: list[Action] = []
    for seq in gone:
        open_roll = state.open.pop(seq)
        actions += [Send(s, protocol.error_frame(code, message, rid)) for s, rid in open_roll.acks]
    return actions


def reveal_seed(room: Room, state: FairState, session: Session, frame: protocol.Seed) -> list[Action]:
    if session.role != "gm":
        return _error(session, "forbidden", "Only a GM may reveal the room's dice seed.", frame.id)
    if state.open:
        message = "A witnessed roll is still open on this seed; reveal it in a moment."
        return _error(session, "conflict", message, frame.id)
    events = state.seeds.for_reveal(room.pending)
    if events is None:
        return _error(session, "conflict", SEED_NOT_READY, frame.id)
    if not events:
        return _error(session, "not_found", "The room has no dice seed open to reveal.", frame.id)
    records = seed_records(room, events, session.member)
    return [Append(room.append_records(records, (session, frame.id))), *prepare(room, state)]


def seed_records(room: Room, events: list[tuple[str, dict[str, Any]]], actor: Member) -> list[dict[str, Any]]:
    first = room.pending.seq + 1
    return [room.record(first + i, kind, actor, **fields) for i, (kind, fields) in enumerate(events)]


def prepare(room: Room, state: FairState) -> list[Action]:
    """The seeds to store ahead so the next roll and the next reveal can go on."""
    state.seeds.forget_revealed(room.pending)
    return [PrepareSeed(n) for n in state.seeds.missing(room.pending)]


def _asked(room: Room, state: FairState, session: Session, frame: protocol.Roll) -> tuple[str, ...]:
    """Who is asked to witness the roll (none: it is made at once, unwitnessed)."""
    sealed = frame.visibility in SEALED
    if not sealed and session.role != "gm":
        return ()
    members = room.pending.members
    players = [pid for pid in state.witnesses if pid in members and members[pid].role == "player"]
    if sealed:
        asked = set(players)
        if session.id in state.witnesses:
            asked.add(session.id)
    else:
        asked = {pid for pid in players if pid != session.id}
    return tuple(sorted(asked, key=str.encode)[:MAX_ASKED])


def _result(
    room: Room,
    session: Session,
    frame: protocol.Roll,
    n: int,
    secret: bytes,
    pending: int | None,
    nonce: bytes | None,
    values: Mapping[str, bytes],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A roll's ``fair`` map and result, from seed ``n`` and what was contributed to it."""
    witnessed = pending is not None
    roller_seed = None if witnessed else frame.seed
    roll_script = fairness.transcript(
        room=room.id,
        n=n,
        roller=session.id,
        visibility=frame.visibility,
        intent=protocol.event_values(frame.intent),
        label=frame.label,
        seed=roller_seed,
        pending=pending,
        nonce=nonce,
        witnesses=list(values.items()),
    )
    dice = fairness.dice(secret, roll_script)
    result = rules.resolve(frame.intent, rng=dice)
    return fairness.fair_map(roll_script, dice.draws), result
