"""Fair rolls in the room (spec/fairness.md), sans-I/O: which seed a roll uses, the roller's seed, and the
witnesses of GM and hidden rolls.

An unwitnessed roll is made at once from the open seed and the roller's seed. A witnessed one (a hidden
roll, or a GM's) first appends a public ``pending`` event that binds its intent and label to a secret nonce
and names the witnesses asked; each asked client answers with random bytes (a ``witness`` frame), and the
roll is made once all have answered or when the shell's timer says ``witness_wait_ms`` has passed. The
values the server could not foresee go into the roll's key, so its owner cannot steer the dice.

Nothing of an open roll lives only in memory: its nonce and frame are stored with its pending event
(``kept``, in ``Pending.kept``), each witness value before its ack (``KeepWitness``), so a restarted node, or
another node of the cluster, completes it (``recover``, ``complete`` with what was stored) with the values
that were stored. The roll is made once: the folded log says which pendings are open
(``RoomState.pendings``), and appends are conditional on the last seq.

What this module needs of the room is the narrow ``Room`` protocol below (``relay.core.room.Room`` is one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import rules
from relay.core import fairness, protocol
from relay.core.actions import (
    Action,
    Append,
    KeepWitness,
    Measure,
    Pending,
    PrepareSeed,
    RetireKept,
    Send,
    Session,
    WaitWitnesses,
)
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
    commit: str  # the pending event's
    opened: int  # the pending event's ts (ms)
    values: dict[str, bytes] = field(default_factory=dict)
    acks: list[tuple[Session, str]] = field(default_factory=list)
    storing: set[str] = field(default_factory=set)  # witnesses whose values are being stored
    made: int | None = None  # its roll's seq while that roll's append is in flight
    tries: int = 0  # appends of its roll that failed


#: Completed pendings remembered for telling a late witness value from a stray one.
RECENT = 64
#: How long after the wait a node that does not hold an open roll (another node's, or one a failure left
#: open) completes it from the store: the node that made it should have done so by then.
TAKEOVER_MS = 1000
#: How long to wait before trying again to complete a roll whose append failed.
RETRY_MS = 200
#: Tries after which the wait between them stops growing (RETRY_MS times this: 5 s), for a store that stays
#: full or out of reach: the roll is made once it can be stored.
BACKOFF = 25


class FairState:
    """A room's fair-dice state: its seeds, its open witnessed rolls, who can witness."""

    def __init__(self, seeds: RoomSeeds) -> None:
        self.seeds = seeds
        self.open: dict[int, OpenRoll] = {}  # by the pending event's seq
        self.witnesses: dict[str, int] = {}  # participant id -> its witness-capable sockets
        # Another relay node's run -> the witness-capable participants there (the cluster store; the shell
        # keeps it up to date): they are asked too, and answer through their own node.
        self.elsewhere: dict[str, set[str]] = {}
        # Completed pendings -> who was asked, and the seq of the roll that completed it (None: refused).
        self.recent: dict[int, tuple[tuple[str, ...], int | None]] = {}
        # Pendings that will get no roll: refused (what they held went another way), or nothing kept to make
        # it (a log written before secrets were kept). They hold neither the seed, their roller nor resources.
        self.refused: set[int] = set()

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

    def done(self, seq: int, asked: tuple[str, ...], roll: int | None = None) -> None:
        self.recent[seq] = (asked, roll)
        if len(self.recent) > RECENT:
            del self.recent[next(iter(self.recent))]


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
        *,
        intent: Any = None,
    ) -> list[Action]: ...

    def hold(self, result: Mapping[str, Any], roller: str) -> dict[str, int]: ...


def _error(session: Session, code: str, message: str, request_id: str | None) -> list[Action]:
    return [Send(session, protocol.error_frame(code, message, request_id))]


def roll(room: Room, state: FairState, session: Session, frame: protocol.Roll) -> list[Action]:
    """A roll frame in a fair room: made at once, or its pending event appended and its witnesses awaited."""
    for open_roll in state.open.values():
        if open_roll.roller.id == session.id and open_roll.frame.id == frame.id:
            open_roll.acks.append((session, frame.id))  # a retry while witnesses answer: the same roll
            return []
    pendings = room.pending.pendings  # usually none: no set made for them on every roll
    elsewhere = pendings.keys() - state.open.keys() - state.refused if pendings else ()
    if any(pendings[seq].roller == session.id for seq in elsewhere):
        # Its roll is held by another node (or by what a node left behind): this may be a retry of it, which
        # must not roll again; it is answered once that roll is stored.
        message = "Your last roll is still waiting for its witnesses; try again in a moment."
        return _error(session, "conflict", message, frame.id)
    busy = _holding(room, state)  # an open roll holds its seed: no reveal until it is made
    plan = state.seeds.for_roll(room.pending, room.now(), hold=busy)
    if plan is None:
        return _error(session, "conflict", SEED_NOT_READY, frame.id)
    events, n, secret = plan
    before = seed_records(room, events, session.member)
    asked = _asked(room, state, session, frame)
    if not asked:
        # A roll with no outside contribution at all still gets fresh dice: without a nonce of the server's,
        # the same intent on the same seed would come up the same every time (docs/fairness.md, where this
        # differs from the spec). It is never called fair: the server chose this nonce.
        nonce = room.draw_nonce() if frame.seed is None else None
        fair, result, intent = _result(room, session, frame, n, secret, None, nonce, {})
        made = room.make_roll(session, frame, result, fair, before, [(session, frame.id)], intent=intent)
        return made + prepare(room, state)
    # The intent is checked now, so a bad one is refused before anyone is asked to witness it; what its roll
    # will spend is held from the pending on (the event's ``holds``, folded), so that roll can always be made.
    holds = room.hold(rules.resolve(frame.intent, rng=KeyedDice(bytes(32))), session.id)
    nonce = room.draw_nonce()
    seq = room.pending.seq + 1 + len(before)
    commit = fairness.pending_commit(protocol.event_values(frame.intent), frame.label, nonce)
    pending = room.record(
        seq, "pending", session.member, roller=session.id, n=n, asked=list(asked), commit=commit
    )
    pending["visibility"] = frame.visibility
    if holds:
        pending["holds"] = holds
    open_roll = OpenRoll(
        seq, session, frame, n, nonce, asked, commit, pending["ts"], acks=[(session, frame.id)]
    )
    state.open[seq] = open_roll
    appended = room.append_records([*before, pending])
    appended.kept.append(kept(room.id, open_roll))
    wait = WaitWitnesses(seq, room.limits.witness_wait_ms)
    return [Append(appended), wait, *prepare(room, state)]


def witness(room: Room, state: FairState, session: Session, frame: protocol.Witness) -> list[Action]:
    """A witness's value for an open roll: stored first (``KeepWitness``; ``witness_kept`` takes it on)."""
    open_roll = state.open.get(frame.pending)
    if open_roll is not None:
        if open_roll.made is not None:
            return _late(session, frame.id)
        asked, commit = open_roll.asked, open_roll.commit
        if session.id in open_roll.values or session.id in open_roll.storing:
            return _error(session, "conflict", "You have already witnessed that roll.", frame.id)
    else:
        # Another node's open roll (the cluster store): its value is stored for whoever completes it.
        known = room.pending.pendings.get(frame.pending)
        if known is None:
            if session.id in state.recent.get(frame.pending, ((), None))[0]:
                return _late(session, frame.id)
            return _error(session, "not_found", "There is no open roll at that seq to witness.", frame.id)
        asked, commit = known.asked, known.commit
    if session.id not in asked:
        return _error(session, "forbidden", "You were not asked to witness that roll.", frame.id)
    if open_roll is not None:
        open_roll.storing.add(session.id)
    return [KeepWitness(frame.pending, commit, session.id, frame.value, session, frame.id)]


def witness_kept(room: Room, state: FairState, kept_value: KeepWitness, outcome: str) -> list[Action]:
    """What the store answered for a witness's value: ``stored``, ``twice`` (a value of this witness was
    stored before, perhaps through another node), ``closed`` or ``missing`` (the roll is being made or made:
    late), ``failed`` (the store could not be reached). The roll is made once every witness asked is in."""
    session, rid, seq = kept_value.session, kept_value.request, kept_value.pending
    open_roll = state.open.get(seq)
    if open_roll is not None and open_roll.commit != kept_value.commit:
        open_roll = None
    if open_roll is not None:
        open_roll.storing.discard(kept_value.participant)
    if outcome == "twice":
        return _error(session, "conflict", "You have already witnessed that roll.", rid)
    if open_roll is not None and open_roll.values.get(kept_value.participant) == kept_value.value:
        # Already in: the store's change reached this node first (``values_stored``).
        return [Send(session, {"t": "ack", "id": rid, "seq": seq})]
    if outcome in ("closed", "missing") or (open_roll is not None and open_roll.made is not None):
        return _late(session, rid)
    if outcome != "stored" and open_roll is None:
        return _error(session, "internal", "Your value could not be stored; send it again.", rid)
    # ``failed`` with the roll held here: the value counts unless this node stops before the roll is made.
    answered: list[Action] = [Send(session, {"t": "ack", "id": rid, "seq": seq})]
    if open_roll is None:
        return answered  # another node holds the roll and merges the stored values when it makes it
    open_roll.values[kept_value.participant] = kept_value.value
    if len(open_roll.values) < len(open_roll.asked):
        return answered
    return answered + complete(room, state, seq)


def values_stored(room: Room, state: FairState, stored: Mapping[str, Any]) -> list[Action]:
    """What the store keeps for a roll changed (a value stored through another node): an open roll held here
    takes the values in, and is made once every witness asked is in, as when they all answered here."""
    open_roll = state.open.get(stored.get("pending", 0))
    if open_roll is None or open_roll.commit != stored.get("commit") or open_roll.made is not None:
        return []
    _take_values(open_roll, stored)
    if len(open_roll.values) < len(open_roll.asked):
        return []
    return complete(room, state, open_roll.seq)


def complete(room: Room, state: FairState, seq: int, stored: Mapping[str, Any] | None = None) -> list[Action]:
    """Make the open roll of pending ``seq`` with the values it has and those ``stored`` (what the store
    holds for it, closed to later values; for a roll this node does not hold, everything it needs). The
    shell calls this when the wait is over; a roll already made, or being made, is not made again."""
    open_roll = state.open.get(seq)
    known = room.pending.pendings.get(seq)
    if open_roll is None:
        if stored is None or known is None or known.commit != stored.get("commit"):
            return []
        open_roll = state.open[seq] = restore(stored)
    if open_roll.made is not None or known is None:
        return []
    if stored is not None:
        _take_values(open_roll, stored)
    secret = state.seeds.secrets.get(open_roll.n)
    if secret is None:  # cannot happen while the open seed is held; refuse rather than roll unfairly
        return [Send(s, protocol.error_frame("internal", SEED_NOT_READY, rid)) for s, rid in open_roll.acks]
    frame, roller = open_roll.frame, open_roll.roller
    fair, result, intent = _result(
        room, roller, frame, open_roll.n, secret, seq, open_roll.nonce, open_roll.values
    )
    made = room.make_roll(roller, frame, result, fair, [], open_roll.acks, intent=intent)
    appends = [action.pending for action in made if isinstance(action, Append)]
    if not appends:  # refused: what it held went another way (its roller removed or merged): never made
        del state.open[seq]
        state.refused.add(seq)
        state.done(seq, open_roll.asked)
        return made + prepare(room, state)
    appends[0].completes = seq
    open_roll.made = next(r["seq"] for r in appends[0].records if r["kind"] == "roll")
    open_roll.acks = []
    waited = Measure("witness_wait_seconds", max(0, room.now() - open_roll.opened) / 1000)
    missing = Measure("witness_missing", len(open_roll.asked) - len(open_roll.values))
    return [*made, waited, missing, *prepare(room, state)]


def stored(
    state: FairState, records: list[dict[str, Any]], committed: RoomState, *, own: bool, limits: Limits
) -> list[Action]:
    """Records now stored (``own``: by this node's append, else by another node's; ``committed`` folds
    them): a roll naming a pending closes its open roll here, its waiting rollers acked with it, and what the
    store kept for it goes (this node's own roll); a pending another node made is completed here from the
    store should that node not make its roll."""
    actions: list[Action] = []
    completed = False
    for record in records:
        kind = record["kind"]
        if kind == "roll" and isinstance(record.get("fair"), dict):
            seq = record["fair"].get("pending")
            completed = completed or isinstance(seq, int)
            open_roll = state.open.pop(seq, None) if isinstance(seq, int) else None
            if open_roll is not None:
                state.done(open_roll.seq, open_roll.asked, record["seq"])
                actions += [
                    Send(s, {"t": "ack", "id": rid, "seq": record["seq"]}) for s, rid in open_roll.acks
                ]
        elif kind == "pending" and not own and record["seq"] not in state.open:
            actions.append(WaitWitnesses(record["seq"], limits.witness_wait_ms + TAKEOVER_MS))
    if own and completed:
        # Also what a lost race kept for a pending never stored: all up to here but the pendings still open.
        keep = tuple((seq, known.commit) for seq, known in committed.pendings.items())
        actions.append(RetireKept(committed.seq, keep))
    return actions


def retry(state: FairState, failed: Pending) -> list[Action]:
    """A roll completing a pending was not stored (another node's event took its seq, a store error): its
    rollers wait on, and the roll is made again shortly (from the store, so the values stay the same)."""
    if failed.completes is None:
        return []
    open_roll = state.open.get(failed.completes)
    if open_roll is None:  # another node's roll for it came first: the rollers are answered with that
        made = state.recent.get(failed.completes, ((), None))[1]
        acks, failed.acks = (failed.acks, []) if made is not None else ([], failed.acks)
        return [Send(s, {"t": "ack", "id": rid, "seq": made}) for s, rid in acks]
    if open_roll.made is None:
        return []
    open_roll.made, open_roll.tries = None, open_roll.tries + 1
    open_roll.acks, failed.acks = [*open_roll.acks, *failed.acks], []
    return [WaitWitnesses(open_roll.seq, RETRY_MS * min(open_roll.tries, BACKOFF))]


def recover(
    room: Room, state: FairState, kept_rolls: Sequence[Mapping[str, Any]], *, margin: int
) -> list[Action]:
    """A room just loaded: every pending its log holds without a roll is opened again from what was stored
    for it and completed once its wait is over (``margin`` ms later when another node may still hold it)."""
    by_key = {(k.get("pending"), k.get("commit")): k for k in kept_rolls}
    actions: list[Action] = []
    for seq, known in room.pending.pendings.items():
        found = by_key.get((seq, known.commit))
        if found is not None and seq not in state.open:
            state.open[seq] = restore(found)
        wait = known.ts + room.limits.witness_wait_ms - room.now()
        actions.append(WaitWitnesses(seq, max(0, wait) + margin))
    return actions


def kept(room: str, open_roll: OpenRoll) -> dict[str, Any]:
    """What is stored for an open roll, apart from the log, so it can be completed without this node."""
    frame = open_roll.frame
    return {
        "room": room,
        "pending": open_roll.seq,
        "commit": open_roll.commit,
        "n": open_roll.n,
        "nonce": open_roll.nonce,
        "roller": open_roll.roller.member.wire(),
        "id": frame.id,
        "intent": frame.intent,
        "label": frame.label,
        "visibility": frame.visibility,
        "seed": frame.seed,
        "asked": list(open_roll.asked),
        "opened": open_roll.opened,
        "values": {},
        "closed": False,
    }


def restore(stored: Mapping[str, Any]) -> OpenRoll:
    """An open roll from what ``kept`` stored (and the values stored since); its roller may be offline."""
    frame = protocol.Roll(
        stored["id"], dict(stored["intent"]), stored["visibility"], stored["label"], stored["seed"]
    )
    roller = Session(Member.from_wire(stored["roller"]))
    values = {str(p): bytes(v) for p, v in stored.get("values", {}).items()}
    asked = tuple(stored["asked"])
    return OpenRoll(
        stored["pending"],
        roller,
        frame,
        stored["n"],
        bytes(stored["nonce"]),
        asked,
        stored["commit"],
        stored["opened"],
        values=values,
    )


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
    if _holding(room, state):
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


def _take_values(open_roll: OpenRoll, stored: Mapping[str, Any]) -> None:
    """The values the store holds for ``open_roll`` from the witnesses it asked, beside those it has."""
    for participant, value in stored.get("values", {}).items():
        if participant in open_roll.asked:
            open_roll.values.setdefault(participant, bytes(value))


def _holding(room: Room, state: FairState) -> bool:
    """Whether a witnessed roll is open on the open seed (here, or another node's, as the log says)."""
    return bool(state.open) or any(seq not in state.refused for seq in room.pending.pendings)


def _late(session: Session, request_id: str) -> list[Action]:
    message = "That roll is already made; your value came too late."
    return [*_error(session, "not_found", message, request_id), Measure("witness_late")]


def _asked(room: Room, state: FairState, session: Session, frame: protocol.Roll) -> tuple[str, ...]:
    """Who is asked to witness the roll (none: it is made at once, unwitnessed)."""
    sealed = frame.visibility in SEALED
    if not sealed and session.role != "gm":
        return ()
    members = room.pending.members
    capable = set(state.witnesses).union(*state.elsewhere.values())
    players = [pid for pid in capable if pid in members and members[pid].role == "player"]
    if sealed:
        asked = set(players)
        if session.id in capable:
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
) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """A roll's ``fair`` map and result, from seed ``n`` and what was contributed to it, and its intent as
    an event holds it (the transcript's, which the roll's record takes as it is)."""
    witnessed = pending is not None
    roller_seed = None if witnessed else frame.seed
    intent = protocol.event_values(frame.intent)
    roll_script = fairness.transcript(
        room=room.id,
        n=n,
        roller=session.id,
        visibility=frame.visibility,
        intent=intent,
        label=frame.label,
        seed=roller_seed,
        pending=pending,
        nonce=nonce,
        witnesses=list(values.items()),
    )
    dice = fairness.dice(secret, roll_script, checked=True)  # every value in it checked as it was made
    result = rules.resolve(frame.intent, rng=dice)
    return fairness.fair_map(roll_script, dice.draws), result, intent
