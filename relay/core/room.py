"""The room state machine, sans-I/O: decoded frames in, records to store and frames to send out.

A ``Room`` holds two folds of the same log: ``committed`` (events known to be stored) and ``pending``
(committed plus appends in flight). Commands are checked against ``pending`` so appends can be pipelined
— a roll does not wait for the previous one's commit — while welcomes and renderings use ``committed``.
Every append names the seq it expects to follow; the log refuses it otherwise, so when an append fails
the appends queued behind it fail too and ``pending`` is rebuilt from ``committed``.

The server calls ``admit``/``handle``/``disconnect``, carries out the returned actions (``Send`` a frame
to one session, ``Append`` records to the log, ``Broadcast`` a committed record), and reports each append's
outcome back through ``committed``/``failed``.

The room also keeps its last ``Limits.history`` stored records, so a welcome (a fresh join, or a resume
from a short gap) is served from memory; when a whole table reconnects after a restart, the log is read
once for the room, not once per socket.
"""

from __future__ import annotations

import dataclasses
import itertools
import secrets
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import rules
from relay.core import fair, membership, protocol, visibility
from relay.core.actions import Action, Append, Broadcast, Pending, Refused, Send, Session
from relay.core.claims import Claims
from relay.core.info import RoomInfo
from relay.core.seeds import RoomSeeds
from relay.core.state import Member, RoomState, spending
from relay.settings.config import Limits
from rules.errors import RulesError

Resolver = Callable[[Mapping[str, Any]], dict[str, Any]]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_id() -> str:
    return secrets.token_hex(8)


def _error(session: Session, code: str, message: str, request_id: str | None) -> list[Action]:
    return [Send(session, protocol.error_frame(code, message, request_id))]


class Room:
    def __init__(
        self,
        info: RoomInfo,
        state: RoomState,
        limits: Limits,
        *,
        resolve: Resolver | None = None,
        clock: Callable[[], int] = now_ms,
        make_id: Callable[[], str] = new_id,
        nonce: Callable[[], bytes] | None = None,
        seeds: Mapping[int, bytes] | None = None,
    ) -> None:
        self.info = info
        self.limits = limits
        self.committed = state
        self.pending = state.copy()
        self.generation = 0
        # Appends handed to the log and not yet settled, in order. Keyed by identity, not by seq: after a
        # failure, an append it doomed and a new one ending at the same seq are in flight together.
        self.inflight: dict[Pending, None] = {}
        self.sockets: dict[str, int] = {}  # participant id -> connected sockets
        self.recent: deque[Mapping[str, Any]] = deque(maxlen=limits.history)  # stored, in seq order
        self._resolve: Resolver = resolve if resolve is not None else rules.resolve
        self._clock = clock
        self._make_id = make_id
        self._nonce = nonce
        # Fair dice (spec/fairness.md) when the shell hands the room its stored seeds; else SecureDice.
        self.fair = fair.FairState(RoomSeeds(info.id, seeds, limits)) if seeds is not None else None

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def connected(self) -> int:
        return sum(self.sockets.values())

    # -- building records --------------------------------------------------------------------------------

    def _record(self, seq: int, kind: str, actor: Member, **fields: Any) -> dict[str, Any]:
        record: dict[str, Any] = {
            "seq": seq,
            "epoch": self.info.epoch,
            "ts": self._clock(),
            "kind": kind,
            "actor": actor.wire(),
            "visibility": "public",
        }
        record.update(fields)
        return record

    def _append(
        self,
        records: list[dict[str, Any]],
        ack: tuple[Session, str] | None = None,
        *,
        ack_seq: int | None = None,
    ) -> Pending:
        """Apply ``records`` to ``pending`` and wrap them for the log; the ack names ``ack_seq`` (the first
        record's seq unless given: a roll's seed events come before it)."""
        pending = Pending(records=records, expected=self.pending.seq, generation=self.generation)
        for record in records:
            self.pending.apply(record)
        if ack is not None:
            pending.ack_seq = records[0]["seq"] if ack_seq is None else ack_seq
            pending.acks.append(ack)
        self.inflight[pending] = None
        return pending

    def _ack_later(self, seq: int, session: Session, request_id: str) -> list[Action]:
        """Ack ``seq`` now when it is stored, else when the append holding it commits."""
        if seq <= self.committed.seq:
            return [Send(session, {"t": "ack", "id": request_id, "seq": seq})]
        for pending in self.inflight:
            # ``seq`` came from ``pending`` state, which only the current generation's appends built; an
            # older append covering the same seq is void and will fail.
            if pending.generation == self.generation and pending.expected < seq <= pending.last:
                pending.acks.append((session, request_id))
                return []
        raise AssertionError(f"seq {seq} is neither committed nor in flight")

    # The builders relay.core.membership and relay.core.fair use for their events.
    record = _record
    append_records = _append

    def now(self) -> int:
        return self._clock()

    def draw_nonce(self) -> bytes:
        return self._nonce() if self._nonce is not None else secrets.token_bytes(visibility.NONCE_BYTES)

    # -- joining and leaving -----------------------------------------------------------------------------

    def admit(
        self, claims: Claims, name: str | None, formats: frozenset[str], *, witness: bool = False
    ) -> tuple[Session, Pending | None]:
        """A socket's hello with these (verified) token claims: its session, and the join to store if any."""
        if claims.room != self.id:
            raise Refused(protocol.CLOSE_UNAUTHORIZED, "The token is for a different room.")
        if self.connected >= self.limits.max_members:
            raise Refused(protocol.CLOSE_FULL, "The room is full; try again later.")
        state = self.pending
        if claims.invites or state.invites or state.revoked or state.aliases:
            refused = membership.refusal(state, claims.sub, claims.invites)
            if refused is not None:
                raise Refused(protocol.CLOSE_REVOKED, refused)
            if claims.sub is not None and claims.sub in state.aliases:
                claims = dataclasses.replace(claims, sub=state.identity(claims.sub))
        if claims.sub is not None:
            known = self.pending.participants.get(claims.sub)
            if known is not None and known.role != claims.role:
                raise Refused(
                    protocol.CLOSE_UNAUTHORIZED, "The token's role does not match this participant's."
                )
            pid = claims.sub
            display = known.name if known is not None else (claims.name or name)
        else:
            pid = self._make_id()
            display = claims.name or name
        if not display:
            role_name = {"gm": "GM", "player": "Player", "spectator": "Spectator"}[claims.role]
            # A token that names its participant (a GM token) is one person on every socket, so the role
            # alone is a name; invites make a participant per socket, and the id's start tells them apart.
            display = role_name if claims.sub is not None else f"{role_name} {pid[:4]}"
        member = Member(pid, display, claims.role)
        session = Session(member, formats, witness)
        if self.fair is not None:
            self.fair.joined(session, witness)
        count = self.sockets.get(pid, 0)
        self.sockets[pid] = count + 1
        join = None
        if count == 0 and pid not in self.pending.members and not self.pending.archived:
            join = self._append([self._record(self.pending.seq + 1, "join", member, member=member.wire())])
        return session, join

    def disconnect(self, session: Session, *, leave: bool = True) -> Pending | None:
        """A socket closed; the leave to store when it was the participant's last (and ``leave``)."""
        if self.fair is not None:
            self.fair.left(session, session.witness)
        count = self.sockets.get(session.id, 0) - 1
        if count > 0:
            self.sockets[session.id] = count
            return None
        self.sockets.pop(session.id, None)
        if session.id not in self.pending.members or not leave:
            return None
        member = session.member
        return self._append([self._record(self.pending.seq + 1, "leave", member, member=member.wire())])

    def sweep(self) -> Pending | None:
        """Leaves for members the log says are present but who have no socket (the server stopped)."""
        gone = [m for pid, m in self.pending.members.items() if self.sockets.get(pid, 0) == 0]
        if not gone:
            return None
        seq = self.pending.seq
        records = [self._record(seq + i, "leave", m, member=m.wire()) for i, m in enumerate(gone, 1)]
        return self._append(records)

    # -- commands ----------------------------------------------------------------------------------------

    def handle(self, session: Session, frame: protocol.Frame) -> list[Action]:
        if isinstance(frame, protocol.Ping):
            return [Send(session, {"t": "pong", "id": frame.id})]
        if self.pending.managed:  # someone was removed or merged, or the room archived: rare
            barred = membership.barred(self.pending, session, frame)
            if barred is not None:
                return barred
        if isinstance(frame, protocol.Roll):
            return self._roll(session, frame)
        if isinstance(frame, protocol.Reveal):
            return self._reveal(session, frame)
        if isinstance(frame, protocol.Resource):
            return self._resource(session, frame)
        if isinstance(frame, protocol.Seed | protocol.Witness):
            if self.fair is None:
                return _error(
                    session, "not_found", "This server does not roll from committed seeds.", frame.id
                )
            if isinstance(frame, protocol.Seed):
                return fair.reveal_seed(self, self.fair, session, frame)
            return fair.witness(self, self.fair, session, frame)
        if not isinstance(frame, protocol.Hello):
            return membership.handle(self, session, frame)
        return _error(session, "bad_frame", "This socket has already said hello.", None)

    def _roll(self, session: Session, frame: protocol.Roll) -> list[Action]:
        if session.role == "spectator":
            return _error(session, "forbidden", "Spectators may watch but not roll.", frame.id)
        seen = self.pending.roll_seq(session.id, frame.id)
        if seen is not None:
            return self._ack_later(seen, session, frame.id)
        try:
            if self.fair is not None:
                return fair.roll(self, self.fair, session, frame)
            result = self._resolve(frame.intent)
        except RulesError as exc:
            return _error(session, "bad_intent", exc.message, frame.id)
        except _Insufficient as exc:  # a witnessed roll that cannot hold what it will spend (``hold``)
            return _error(session, "insufficient", str(exc), frame.id)
        return self.make_roll(session, frame, result, None, [], [(session, frame.id)])

    def make_roll(
        self,
        session: Session,
        frame: protocol.Roll,
        result: dict[str, Any],
        fair_map: dict[str, Any] | None,
        before: list[dict[str, Any]],
        acks: list[tuple[Session, str]],
        *,
        intent: Any = None,
    ) -> list[Action]:
        """Store a resolved roll (after ``before``, the seed events a fair roll appends first) and its
        resource changes, acknowledged to ``acks`` once stored; or refuse it to them all. ``intent``: the
        frame's intent as an event holds it, when the caller made it already (a fair roll's transcript)."""
        seq = self.pending.seq + 1 + len(before)
        completes = fair_map.get("pending") if fair_map is not None else None
        try:
            changes = self._effects(result, session.id, completes)
        except _Insufficient as exc:
            return [Send(s, protocol.error_frame("insufficient", str(exc), rid)) for s, rid in acks]
        # Events hold no floats (spec/signing.md): a fraction from a dice formula becomes a decimal string,
        # and what canonical MessagePack cannot hold is refused here, before anything is stored.
        wire = protocol.event_values(result)
        record = self._record(
            seq,
            "roll",
            session.member,
            visibility=frame.visibility,
            label=frame.label,
            intent=protocol.event_values(frame.intent) if intent is None else intent,
            result=wire,
            request=frame.id,
        )
        if wire is not result:
            record["rules_result"] = result  # the numbers themselves, for the Foundry and Roll20 renderers
        if fair_map is not None:
            record["fair"] = fair_map
        if frame.visibility != "public":
            nonce = self._nonce() if self._nonce is not None else None
            record["sealed"] = visibility.seal(visibility.body_of(record), nonce)
        records = [*before, record]
        for offset, (name, participant, delta, value) in enumerate(changes, 1):
            fields: dict[str, Any] = {"name": name, "delta": delta, "value": value, "cause": seq}
            if participant is not None:
                fields["participant"] = participant
            records.append(self._record(seq + offset, "resource", session.member, **fields))
        appended = self._append(records, acks[0] if acks else None, ack_seq=seq)
        appended.acks.extend(acks[1:])
        return [Append(appended)]

    def witness_due(self, pending_seq: int, stored: Mapping[str, Any] | None = None) -> list[Action]:
        """The wait for a witnessed roll's witnesses is over (the shell's timer): make it with what it has
        and what the store holds for it (``stored``: relay.core.fair.complete)."""
        return [] if self.fair is None else fair.complete(self, self.fair, pending_seq, stored)

    def _effects(
        self, result: Mapping[str, Any], roller: str, completes: int | None = None
    ) -> list[tuple[str, str | None, int, int]]:
        """A result's resource changes, checked against ``pending``: (name, participant, delta, value).

        ``requires`` must be available before the roll; each effect then moves its resource, gains
        stopping at the room's maximum and a spend of more than is free (``_afford``; ``completes``: the
        pending this roll makes, whose hold is its own) refusing the whole roll.
        """
        values = {"fear": self.pending.fear, "hope": self.pending.hope.get(roller, 0)}
        maxima = {"fear": self.info.fear_max, "hope": self.info.hope_max}
        requires = result.get("requires") or {}
        for name, amount in requires.items():
            if name not in values:
                raise ValueError(f"the rules asked for an unknown resource {name!r}")
            self._afford(name, roller, amount, values[name], completes)
        changes: list[tuple[str, str | None, int, int]] = []
        for effect in result.get("effects") or ():
            name, delta = effect["resource"], effect["delta"]
            if name not in values:
                raise ValueError(f"the rules asked for an unknown resource {name!r}")
            before = values[name]
            if delta < 0:
                self._afford(name, roller, -delta, before, completes)
            after = min(maxima[name], before + delta)
            values[name] = after
            changes.append((name, roller if name == "hope" else None, after - before, after))
        return changes

    def hold(self, result: Mapping[str, Any], roller: str) -> dict[str, int]:
        """What a witnessed roll whose intent resolves to ``result`` holds while it waits for its witnesses
        (``relay.core.state.spending``); ``_Insufficient`` when that much is not free now: the roll is refused
        before its pending is stored, as an unwitnessed one would be."""
        holds = spending(result)
        for name, amount in holds.items():
            have = self.pending.fear if name == "fear" else self.pending.hope.get(roller, 0)
            self._afford(name, roller, amount, have)
        return holds

    def _afford(
        self, name: str, who: str | None, amount: int, have: int, completes: int | None = None
    ) -> None:
        """``_Insufficient`` unless ``amount`` of ``have`` (Fear, or ``who``'s Hope) is free: the open
        witnessed rolls hold what their rolls will spend (but ``completes``, the one this roll makes). The one
        place that decides whether a spend can be paid."""
        if amount <= 0 or self.fair is None or not self.pending.pendings:
            held = 0  # without fair dice no pending's roll is ever made, so none holds anything
        else:  # a refused pending (relay.core.fair.complete) gets no roll either: what it held is free
            held = self.pending.held(name, who, self.fair.refused, completes)
        if have - held < amount:
            raise _Insufficient(_shortfall(name, amount, max(0, have - held), held))

    def _reveal(self, session: Session, frame: protocol.Reveal) -> list[Action]:
        if session.role == "spectator":
            return _error(session, "forbidden", "Spectators may not reveal rolls.", frame.id)
        sealed = self.pending.sealed.get(frame.seq)
        if sealed is None:
            return _error(session, "not_found", f"There is no sealed roll at seq {frame.seq}.", frame.id)
        allowed = session.role == "gm" or (
            sealed.roller == session.id and sealed.visibility in ("gm", "self")
        )
        if not allowed:
            return _error(
                session,
                "forbidden",
                "Only a GM, or the roller of a gm or self roll, may reveal it.",
                frame.id,
            )
        if sealed.revealed is not None:
            return self._ack_later(sealed.revealed, session, frame.id)
        record = self._record(
            self.pending.seq + 1,
            "reveal",
            session.member,
            of=frame.seq,
            blob=sealed.blob,
            nonce=sealed.nonce,
            request=frame.id,
        )
        return [Append(self._append([record], (session, frame.id)))]

    def _resource(self, session: Session, frame: protocol.Resource) -> list[Action]:
        if session.role == "spectator":
            return _error(session, "forbidden", "Spectators may not change resources.", frame.id)
        participant = frame.participant
        if frame.name == "hope" and participant is None:
            if session.role != "player":
                return _error(session, "bad_frame", "Name the 'participant' whose Hope changes.", frame.id)
            participant = session.id
        if session.role != "gm":
            own = frame.name == "hope" and participant == session.id and frame.op == "spend"
            if not own:
                return _error(
                    session,
                    "forbidden",
                    "Players may only spend their own Hope; the GM does the rest.",
                    frame.id,
                )
        if frame.name == "fear":
            current, maximum, label = self.pending.fear, self.info.fear_max, "Fear"
        else:
            assert participant is not None
            if participant not in self.pending.participants:
                return _error(session, "not_found", "There is no such participant in this room.", frame.id)
            if participant in self.pending.revoked:
                name = self.pending.participants[participant].name
                return _error(session, "removed", f"{name} was removed from this room by the GM.", frame.id)
            current, maximum, label = self.pending.hope.get(participant, 0), self.info.hope_max, "Hope"
        if frame.op == "gain":
            value = min(maximum, current + frame.n)
        elif frame.op == "set" and frame.n > maximum:
            return _error(session, "bad_frame", f"{label} can be set from 0 to {maximum}.", frame.id)
        else:
            value = current - frame.n if frame.op == "spend" else frame.n
            try:  # a set lower spends the difference: neither may take what waiting rolls hold
                self._afford(frame.name, participant, current - value, current)
            except _Insufficient as exc:
                return _error(session, "insufficient", str(exc), frame.id)
        fields: dict[str, Any] = {"name": frame.name, "delta": value - current, "value": value, "cause": None}
        if participant is not None and frame.name == "hope":
            fields["participant"] = participant
        fields["request"] = frame.id
        record = self._record(self.pending.seq + 1, "resource", session.member, **fields)
        return [Append(self._append([record], (session, frame.id)))]

    # -- outcomes of appends -----------------------------------------------------------------------------

    def committed_append(self, pending: Pending) -> list[Action]:
        """``pending`` is stored: fold it into ``committed``, ack its requesters, broadcast its records."""
        self.inflight.pop(pending, None)
        actions: list[Action] = []
        if pending.ack_seq is not None:
            for session, request_id in pending.acks:
                actions.append(Send(session, {"t": "ack", "id": request_id, "seq": pending.ack_seq}))
        for record in pending.records:
            self.committed.apply(record)
            actions.append(Broadcast(record))
        self.recent.extend(pending.records)
        if pending.effects:
            actions.extend(pending.effects)
        if self.fair is not None:
            actions += fair.stored(self.fair, pending.records, self.committed, own=True, limits=self.limits)
        return actions

    def failed_append(self, pending: Pending, conflict: bool, *, full: bool = False) -> list[Action]:
        """``pending`` was not stored: answer its requesters and, once per failure, rebuild ``pending``.

        ``full``: the store had no room for it (a full disk, a stream at its byte limit)."""
        self.inflight.pop(pending, None)
        retried = fair.retry(self.fair, pending) if self.fair is not None else []  # a witnessed roll
        if conflict:
            code, message = "conflict", "The room changed while this was being stored; try again."
        elif full:
            code, message = "store_full", "The server's storage is full; nothing was stored. Try again later."
        else:
            code, message = "internal", "The server could not store this; try again."
        answers: list[Action] = [Send(s, protocol.error_frame(code, message, rid)) for s, rid in pending.acks]
        answers += retried
        if pending.generation == self.generation:
            # Everything applied after the committed state is void; queued appends behind this one will
            # fail their expected-seq check and be answered here too (with an older generation).
            self.generation += 1
            self.pending = self.committed.copy()
            if self.fair is not None:
                answers += fair.abandon(self.fair, self.committed.seq, code, message)
        return answers

    def remote(self, records: Sequence[dict[str, Any]]) -> list[Action]:
        """Records another relay node stored (the cluster store): fold them in and broadcast them.

        Any append of ours still in flight named a seq these now hold, so it will fail: ``pending``
        restarts from ``committed`` in a new generation, as after a failure.
        """
        for record in records:
            self.committed.apply(record)
        self.recent.extend(records)
        if self.inflight:
            self.generation += 1
            self.pending = self.committed.copy()
        else:
            for record in records:
                self.pending.apply(record)
        actions: list[Action] = [Broadcast(record) for record in records]
        for record in records:
            # What this node does with its own sockets, as the node that stored it did.
            actions.extend(membership.effects_of(record))
        if self.fair is not None:
            actions += fair.stored(self.fair, list(records), self.committed, own=False, limits=self.limits)
        return actions

    def settle_presence(self, members: Sequence[Member]) -> Pending | None:
        """Joins and leaves that make the log agree with this node's sockets for ``members`` (after a
        conflicting append in a cluster: another node may have stored the same join meanwhile)."""
        records: list[dict[str, Any]] = []
        for member in members:
            here = self.sockets.get(member.id, 0) > 0
            present = member.id in self.pending.members
            if here != present:
                kind = "join" if here else "leave"
                records.append(
                    self._record(self.pending.seq + 1 + len(records), kind, member, member=member.wire())
                )
        return self._append(records) if records else None

    # -- welcome -----------------------------------------------------------------------------------------

    def welcome(
        self, session: Session, token: str, history: list[dict[str, Any]], recovered: bool
    ) -> dict[str, Any]:
        """The welcome frame at the committed state; ``history`` are rendered event frames."""
        return {
            "t": "welcome",
            "room": {"id": self.info.id, "name": self.info.name},
            "you": session.member.wire(),
            "session": token,
            "epoch": self.info.epoch,
            "seq": self.committed.seq,
            "state": self.committed.wire(),
            "history": history,
            "recovered": recovered,
            "limits": {"fear": self.info.fear_max, "hope": self.info.hope_max},
            **self._seed_view(history),
            **self._manager_view(session),
        }

    def _seed_view(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        """The open dice seed's number and commitment (spec/fairness.md), when the room has one, and the
        commitments of every seed the history's rolls use (their ``seed_commit`` may be older than it)."""
        state = self.committed
        view: dict[str, Any] = {}
        if self.fair is not None:  # how long a pending waits for witnesses: a client's overdue alarm needs it
            view["witness_wait_ms"] = self.limits.witness_wait_ms
        if state.seed_open:
            view["seed"] = {"n": state.seed_n, "commit": state.seed_commit}
        used = [e["fair"]["n"] for e in history if isinstance(e.get("fair"), dict) and "n" in e["fair"]]
        if used:
            known = state.seed_commits
            view["seeds"] = [
                {"n": n, "commit": known[n]} for n in range(min(used), state.seed_n + 1) if n in known
            ]
        return view

    def _manager_view(self, session: Session) -> dict[str, Any]:
        """What only a GM's welcome carries: the roster to manage, and whether the room is archived."""
        state = self.committed
        view: dict[str, Any] = {"archived": True} if state.archived else {}
        if session.role == "gm":
            view["participants"] = membership.roster(state)
        return view

    def remember(self, records: Sequence[Mapping[str, Any]]) -> None:
        """The latest stored records, read from the log when the room is loaded (before any append)."""
        if records and records[-1]["seq"] == self.committed.seq and not self.recent:
            self.recent.extend(records)

    def recent_between(self, after: int, upto: int) -> list[Mapping[str, Any]] | None:
        """The stored records with ``after < seq <= upto`` if memory holds them all, else None."""
        if upto <= after:
            return []
        recent = self.recent
        if not recent or recent[-1]["seq"] < upto or recent[0]["seq"] > after + 1:
            return None
        start = after + 1 - recent[0]["seq"]
        return list(itertools.islice(recent, start, start + upto - after))

    def history_range(self, resume: protocol.Resume | None) -> tuple[int, int, bool]:
        """(after, upto, recovered): a welcome carries the stored seqs ``after < seq <= upto``."""
        upto = self.committed.seq
        if (
            resume is not None
            and resume.epoch == self.info.epoch
            and resume.seq <= upto
            and upto - resume.seq <= self.limits.resume_max
        ):
            return resume.seq, upto, True
        return max(0, upto - self.limits.history), upto, False


class _Insufficient(Exception):
    pass


def _shortfall(name: str, wanted: int, have: int, held: int = 0) -> str:
    label = "Fear" if name == "fear" else "Hope"
    message = f"This needs {wanted} {label} but only {have} is available."
    if held:
        message += f" ({held} more is held by rolls waiting for their witnesses.)"
    return message
