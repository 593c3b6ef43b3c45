"""Campaign management on the wire, sans-I/O: the GM renames, merges and removes participants, rotates the
room's invites and archives the room.

Each command is one client frame (``rename``, ``merge``, ``kick``, ``invites``, ``archive``), GM only, and
each change is one event in the room's log (kinds in ``relay.core.state.CAMPAIGN_FIELDS``), folded like every
other event: a removal or a rotation holds across restarts and on every node that reads the same log,
and it is signed and exported with the rest. What the I/O shell must do once such an event is stored
(close a removed participant's sockets, give the GM the new invite tokens) rides on the append as
``effects`` and is carried out by ``relay.shell.campaign_io``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from relay.core import protocol
from relay.core.actions import Action, Append, Effect, Pending, Send, Session
from relay.core.info import RoomInfo
from relay.core.protocol import Archive, Invites, Kick, ManageFrame, Merge, Rename
from relay.core.state import Member, RoomState


class Room(Protocol):
    """What campaign management needs of a room (``relay.core.room.Room`` is one): its facts, its state with
    the appends in flight, and the builders of its records and appends."""

    @property
    def info(self) -> RoomInfo: ...

    @property
    def pending(self) -> RoomState: ...

    def record(self, seq: int, kind: str, actor: Member, **fields: Any) -> dict[str, Any]: ...

    def append_records(
        self, records: list[dict[str, Any]], ack: tuple[Session, str] | None = None
    ) -> Pending: ...


# -- what the I/O shell does once an event is stored -------------------------------------------------------


@dataclass(frozen=True)
class CloseParticipant(Effect):
    """Close every socket of ``participant`` with ``code`` and ``reason``."""

    participant: str
    code: int
    reason: str


@dataclass(frozen=True)
class Retitle(Effect):
    """The sessions of ``member.id`` act under this member (its new name) from now on."""

    member: Member


@dataclass(frozen=True)
class SendInvites(Effect):
    """Answer ``request_id`` with the room's current invite tokens (made with the server's secret)."""

    session: Session
    request_id: str
    generation: int
    seq: int | None  # the rotation's event, if this request made one


def effects_of(record: Mapping[str, Any]) -> tuple[Effect, ...]:
    """What every node must do with its own sockets once ``record`` is stored.

    One place for it, so a node that learns of the event from another (the cluster store) does the same
    as the node that stored it: close a removed or merged participant's sockets, retitle a renamed one's.
    """
    kind = record["kind"]
    if kind == "kick":
        reason = "The GM removed you from this room." + (f" {record['reason']}" if record["reason"] else "")
        return (CloseParticipant(record["member"]["id"], protocol.CLOSE_REVOKED, reason),)
    if kind == "merge":
        # The merged one's sockets reconnect: its session token now admits it as ``into``.
        reason = f"You are now {record['into']['name']}: the GM merged you. Reconnect."
        return (CloseParticipant(record["merged"]["id"], protocol.CLOSE_MERGED, reason),)
    if kind == "rename":
        return (Retitle(Member.from_wire(record["member"])),)
    return ()


# -- handling ----------------------------------------------------------------------------------------------


def _error(session: Session, code: str, message: str, rid: str | None) -> list[Action]:
    return [Send(session, protocol.error_frame(code, message, rid))]


def barred(state: RoomState, session: Session, frame: protocol.Frame) -> list[Action] | None:
    """The answer to any command (a ping aside) that ``state`` no longer takes from ``session``, or None.

    Asked by ``Room.handle`` once a room was managed (``state.managed``). A removed or merged participant's
    sockets stay open from the moment the change is appended until it is stored and they are closed; what
    they send meanwhile must not land in the log after the change (a roll by someone removed, Hope for
    someone merged away).
    """
    rid = None if isinstance(frame, protocol.Hello) else frame.id
    if state.archived:
        return _error(session, "archived", "This room is archived: it is read-only.", rid)
    if session.id in state.revoked:
        return _error(session, "removed", "The GM removed you from this room.", rid)
    into = state.aliases.get(session.id)
    if into is not None:
        name = state.participants[into].name
        return _error(session, "removed", f"The GM merged you into {name}: reconnect to go on as them.", rid)
    return None


def handle(room: Room, session: Session, frame: ManageFrame) -> list[Action]:
    if session.role != "gm":
        return _error(
            session, "forbidden", "Only the GM manages the table's participants and invites.", frame.id
        )
    state = room.pending
    if state.archived:  # Room.handle answered already; kept so this module stands on its own
        return _error(session, "archived", "This room is archived: it is read-only.", frame.id)
    if isinstance(frame, Invites):
        return _invites(room, session, frame)
    if isinstance(frame, Archive):
        record = room.record(state.seq + 1, "archive", session.member, request=frame.id)
        return [Append(room.append_records([record], (session, frame.id)))]
    target = state.participants.get(state.identity(frame.participant))
    if target is None:
        return _error(session, "not_found", "There is no such participant in this room.", frame.id)
    if target.id in state.revoked:
        # Nothing is done to or with a removed participant: they stay in the roster as removed, for good.
        return _error(session, "removed", f"{target.name} was removed from this room by the GM.", frame.id)
    if isinstance(frame, Rename):
        return _rename(room, session, frame, target)
    if isinstance(frame, Merge):
        return _merge(room, session, frame, target)
    return _kick(room, session, frame, target)


def _rename(room: Room, session: Session, frame: Rename, target: Member) -> list[Action]:
    if frame.name == target.name:
        return _error(session, "bad_frame", f"{target.name} already has that name.", frame.id)
    member = Member(target.id, frame.name, target.role)
    record = room.record(
        room.pending.seq + 1,
        "rename",
        session.member,
        member=member.wire(),
        was=target.name,
        request=frame.id,
    )
    pending = room.append_records([record], (session, frame.id))
    pending.effects = effects_of(record)
    return [Append(pending)]


def _merge(room: Room, session: Session, frame: Merge, gone: Member) -> list[Action]:
    state = room.pending
    into = state.participants.get(state.identity(frame.into))
    if into is None:
        return _error(session, "not_found", "There is no participant to merge into with that id.", frame.id)
    if into.id in state.revoked:
        return _error(session, "removed", f"{into.name} was removed from this room by the GM.", frame.id)
    if into.id == gone.id:
        return _error(session, "bad_frame", "A participant cannot be merged into itself.", frame.id)
    if into.role != gone.role:
        return _error(
            session,
            "bad_frame",
            f"Only participants of the same role merge: {gone.role} and {into.role}.",
            frame.id,
        )
    if gone.id == session.id:
        return _error(session, "forbidden", "Merge another GM into you, not you into another.", frame.id)
    hope = None
    if gone.id in state.hope or into.id in state.hope:
        # Hope adds up, and stops at the room's cap as any gain does (spec/rules.md: Hope is capped at 6).
        hope = min(room.info.hope_max, state.hope.get(gone.id, 0) + state.hope.get(into.id, 0))
    record = room.record(
        state.seq + 1,
        "merge",
        session.member,
        merged=gone.wire(),
        into=into.wire(),
        hope=hope,
        request=frame.id,
    )
    pending = room.append_records([record], (session, frame.id))
    pending.effects = effects_of(record)
    return [Append(pending)]


def _kick(room: Room, session: Session, frame: Kick, target: Member) -> list[Action]:
    if target.id == session.id:
        return _error(session, "forbidden", "You cannot remove yourself from the room.", frame.id)
    record = room.record(
        room.pending.seq + 1,
        "kick",
        session.member,
        member=target.wire(),
        reason=frame.reason,
        request=frame.id,
    )
    pending = room.append_records([record], (session, frame.id))
    pending.effects = effects_of(record)
    return [Append(pending)]


def _invites(room: Room, session: Session, frame: Invites) -> list[Action]:
    state = room.pending
    if not frame.rotate:
        # ``pending`` counts a rotation still being stored: its tokens are the ones about to be valid.
        return [SendInvites(session, frame.id, state.invites, None)]
    generation = state.invites + 1
    record = room.record(state.seq + 1, "invites", session.member, generation=generation, request=frame.id)
    pending = room.append_records([record], None)
    # Answered by the ``invites`` frame once stored (no ack: ``ack_seq`` stays None); listed among the
    # acks so that, if the log fails to store it, the GM is told so like any other request.
    pending.acks.append((session, frame.id))
    pending.effects = (SendInvites(session, frame.id, generation, record["seq"]),)
    return [Append(pending)]


# -- admission ---------------------------------------------------------------------------------------------


def refusal(state: RoomState, sub: str | None, invites: int) -> str | None:
    """Why a hello with a token of this ``sub`` (None: an invite of generation ``invites``) is refused."""
    if sub is None:
        if invites != state.invites:
            return "This invite was replaced by the GM; ask for the new link."
        return None
    if sub in state.revoked or state.identity(sub) in state.revoked:
        return "The GM removed this participant from the room; this link no longer works."
    return None


def roster(state: RoomState) -> list[dict[str, Any]]:
    """The GMs and players who ever joined (merged ones excepted), for the GM's welcome.

    Spectators are left out: each invite-opened page without storage is a new one, and the GM has
    nothing to manage about them.
    """
    return [
        {**member.wire(), "present": pid in state.members, "removed": pid in state.revoked}
        for pid, member in state.participants.items()
        if member.role != "spectator"
    ]
