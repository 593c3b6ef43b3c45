"""The server's part of the room state machine (test_room_stateful.py): hellos, frames, appends, fan-out
and welcomes as the server carries them out, with a queue for the log; and the checks of every frame a
socket receives, as it receives it. The rules that drive it and the invariants are the test's own."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import msgpack
from hypothesis.stateful import RuleBasedStateMachine

from relay.core import canonical, protocol, records
from relay.core.actions import Append, Broadcast, Pending, Refused, Send, Session
from relay.core.claims import Claims
from relay.core.membership import CloseParticipant, Retitle, SendInvites
from relay.core.room import Room
from relay.core.state import RoomState
from relay.shell import campaign_io, fanout
from relay.shell.fanout import Outbox
from relay.trust import signing, tokens
from relay.trust.forms import Forms
from rules.rng import Dice
from tests import spec_signing
from tests.pure_canonical import pure_canonical
from tests.relay.core.stateful_table import (
    CROSS_CHECKED,
    DESK,
    INFO,
    KEYRING,
    LIMITS,
    SEALED_KEYS,
    SECRET,
    Conn,
    CountingDice,
    Hidden,
    in_audience,
    resolve,
    split_frames,
)


class ServerPart(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ids = itertools.count(1)
        self.nonces = itertools.count(1)
        self.markers = itertools.count(1)
        self.room = Room(
            INFO,
            RoomState(),
            LIMITS,
            resolve=self._resolve,
            clock=lambda: 1_700_000_000_000,
            make_id=lambda: f"p{next(self.ids)}",
            nonce=self._nonce,
        )
        self.dice: Dice = CountingDice()
        # Every frame signed, as the server sends them: the invariants hold for the signed forms too.
        self.forms = Forms(INFO.id, KEYRING, LIMITS.history)
        self.stored: list[dict[str, Any]] = []
        self.queue: list[Pending] = []
        self.conns: list[Conn] = []
        self.subscribers: dict[Conn, Session] = {}
        self.by_session: dict[Session, Conn] = {}
        self.waiting: dict[Pending, Conn] = {}  # a join's append -> the socket whose welcome waits for it
        self.outgoing: list[dict[str, Any]] = []
        self.to_flush: dict[Outbox, None] = {}
        self.hidden: dict[int, Hidden] = {}  # seq -> a stored hidden roll's secrets
        self.labels: dict[str, tuple[bytes, ...]] = {}  # request id -> that roll's markers
        self.lost: set[tuple[Session, str]] = set()  # requests whose append the log failed to store
        # The machine's own reading of the stored log's campaign events (not the room's fold).
        self.kicked: set[str] = set()
        self.merged: dict[str, str] = {}  # gone -> into
        self.generation = 0  # the invite generation of the last stored rotation
        self.archived = False
        # (roller, roll id) -> the seq of the stored roll. Keyed by roller too: a device that resent
        # another participant's roll id while a merge of the two was in flight, the merge then lost,
        # rolls once as itself, and the other's retry once as the other (two participants, one roll each).
        self.rolled: dict[tuple[str, str], int] = {}
        self.roll_frames: dict[str, tuple[str, dict[str, Any]]] = {}  # roll id -> (sender, frame)
        self.invite_floor: dict[tuple[Conn, str], int] = {}  # an invites request -> stored generation then

    # -- the server's part ---------------------------------------------------------------------------------

    def _resolve(self, intent: Any) -> dict[str, Any]:
        import rules

        result: dict[str, Any] = rules.resolve(intent, rng=self.dice)
        return result

    def _nonce(self) -> bytes:
        return f"NONCE{next(self.nonces):06d}".encode().ljust(32, b"#")

    def execute(self, actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, Send):
                conn = self.by_session.get(action.session)
                if conn is not None:
                    self.send(conn, action.frame)
            elif isinstance(action, Append):
                self.queue.append(action.pending)
            elif isinstance(action, Broadcast):
                self.outgoing.append(action.record)
            else:
                self.carry_out(action)

    def carry_out(self, effect: Any) -> None:
        """What ``relay.shell.campaign_io.carry_out`` does once a management event is stored."""
        if isinstance(effect, CloseParticipant):
            for conn in [c for c in self.conns if c.session.id == effect.participant]:
                self.drop(conn)  # the server closes it; its handler then disconnects it from the room
        elif isinstance(effect, Retitle):
            for conn in self.conns:
                if conn.session.id == effect.member.id:
                    conn.session.member = effect.member
        elif isinstance(effect, SendInvites):
            asker = self.by_session.get(effect.session)
            if asker is not None:
                self.send(asker, campaign_io.invites_frame(DESK, INFO.id, effect))  # type: ignore[arg-type]
        else:
            raise AssertionError(f"unknown effect {effect!r}")

    def send(self, conn: Conn, frame: dict[str, Any]) -> None:
        assert conn.outbox.put(protocol.framed(protocol.encode(frame))), "a queue that is flushed never fills"

    def schedule(self, outbox: Outbox) -> None:
        self.to_flush[outbox] = None

    def tick(self) -> None:
        """What the server does once per loop iteration: broadcast committed events, flush outboxes."""
        records, self.outgoing = self.outgoing, []
        if records:
            fanout.broadcast(records, self.subscribers, self.room.committed, self.forms, self._overflow)
        outboxes, self.to_flush = self.to_flush, {}
        for outbox in outboxes:
            outbox.flush()
        for conn in self.conns:
            self.check_received(conn)

    def _overflow(self, conn: Conn) -> None:
        raise AssertionError(f"{conn.session.id}'s outbox overflowed, though it is flushed every step")

    def in_flight(self, *kinds: str) -> bool:
        return any(r["kind"] in kinds for pending in self.queue for r in pending.records)

    def expected_admission(self, claims: Claims) -> bool | None:
        """True: the hello must be taken; False: refused; None: either (a change that decides it is in
        flight). From the stored log as this machine read it; no hello here names a participant with
        another role, and the room is never full."""
        if claims.sub is not None:
            if claims.sub in self.kicked or resolve(self.merged, claims.sub) in self.kicked:
                return False  # a removal that is stored holds for every token naming them
            return None if self.in_flight("kick", "merge") else True
        if claims.invites < self.generation:
            return False  # replaced by a stored rotation (rotations only count up)
        if self.in_flight("invites"):
            return None
        return claims.invites == self.generation

    def admit(self, token: str, formats: frozenset[str], resume: protocol.Resume | None) -> None:
        claims = tokens.verify(SECRET, token, room=INFO.id)
        expected = self.expected_admission(claims)
        try:
            session, join = self.room.admit(claims, None, formats)
        except Refused as exc:
            refused: Refused | None = exc
        else:
            refused = None
        if refused is not None:
            assert expected is not True, f"the room refused a hello it should take: {refused.reason}"
            assert refused.code == protocol.CLOSE_REVOKED, refused.code
            return
        assert expected is not False, f"the room took {claims} (removed: {self.kicked}, g{self.generation})"
        if claims.sub is not None and not self.in_flight("merge"):
            assert session.id == resolve(self.merged, claims.sub), "a merged token joins as the survivor"
        conn = Conn(session, Outbox(LIMITS.send_queue, self.schedule), resume)
        self.conns.append(conn)
        self.subscribers[conn] = session
        self.by_session[session] = conn
        if join is None:
            self.welcome(conn)
        else:
            self.queue.append(join)
            self.waiting[join] = conn

    def welcome(self, conn: Conn) -> None:
        """The server's ``_welcome``: history from memory or the log, then the outbox starts after it."""
        room = self.room
        after, upto, recovered = room.history_range(conn.resume)
        state = room.committed.wire()
        records: Sequence[Mapping[str, Any]] | None = room.recent_between(after, upto)
        if records is None:
            records = self.stored[after:upto]
        assert [r["seq"] for r in records] == list(range(after + 1, upto + 1))
        history = fanout.history(records, conn.session, room.committed, self.forms)
        welcome = room.welcome(conn.session, "token", history, recovered)
        welcome["seq"], welcome["state"] = upto, state
        data = protocol.encode(welcome)
        if conn.resume is not None and recovered:
            assert after == conn.resume.seq, "a recovered resume starts right after the client's seq"
        conn.first_expected = after + 1
        self.check_frame(conn, data, msgpack.unpackb(data, raw=False))
        conn.welcomed = True
        conn.outbox.start(upto, conn.sink)

    def drop(self, conn: Conn) -> None:
        """The socket closed: out of the room (a leave when it was the participant's last)."""
        self.conns.remove(conn)
        self.subscribers.pop(conn, None)
        self.by_session.pop(conn.session, None)
        conn.outbox.close()
        leave = self.room.disconnect(conn.session)
        if leave is not None:
            self.queue.append(leave)

    def store(self, pending: Pending) -> None:
        """The log stores ``pending`` if it follows the last stored seq, else refuses it as a conflict."""
        if pending.expected != len(self.stored):
            self.settled(pending, self.room.failed_append(pending, conflict=True), ok=False)
            return
        seqs = [r["seq"] for r in pending.records]
        assert seqs == list(range(pending.expected + 1, pending.expected + 1 + len(seqs))), seqs
        self.stored.extend(pending.records)
        for record in pending.records:
            records.check(record)  # what the server writes, an import must take (relay.core.records)
            self.remember_hidden(record)
            self.read_campaign(record)
        self.settled(pending, self.room.committed_append(pending), ok=True)

    def settled(self, pending: Pending, actions: list[Any], ok: bool) -> None:
        self.execute(actions)
        conn = self.waiting.pop(pending, None)
        if conn is None or conn not in self.subscribers:
            return
        if ok:
            self.welcome(conn)
        else:
            self.drop(conn)  # the server refuses the socket: "could not store your arrival"

    def read_campaign(self, record: dict[str, Any]) -> None:
        kind = record["kind"]
        if kind == "roll":
            roller, rid = record["actor"]["id"], record["request"]
            me = resolve(self.merged, roller)
            assert all(resolve(self.merged, other) != me for other, r in self.rolled if r == rid), (
                "a roll id is stored once per participant, merges or not"
            )
            self.rolled[roller, rid] = record["seq"]
        elif kind == "kick":
            self.kicked.add(record["member"]["id"])
        elif kind == "merge":
            self.merged[record["merged"]["id"]] = record["into"]["id"]
        elif kind == "invites":
            assert record["generation"] == self.generation + 1, record
            self.generation = record["generation"]
        elif kind == "archive":
            self.archived = True

    def remember_hidden(self, record: dict[str, Any]) -> None:
        if record["kind"] == "roll" and record["visibility"] != "public":
            markers = self.labels.get(record["request"], ())
            self.hidden[record["seq"]] = Hidden(
                record["seq"], record["visibility"], record["actor"]["id"], markers, record["sealed"]["nonce"]
            )

    # -- what each socket got --------------------------------------------------------------------------

    def check_received(self, conn: Conn) -> None:
        data = bytes(conn.sink.data[conn.read :])
        conn.read = len(conn.sink.data)
        for payload in split_frames(data):
            self.check_frame(conn, payload, msgpack.unpackb(payload, raw=False))

    def check_frame(self, conn: Conn, data: bytes, frame: dict[str, Any]) -> None:
        """One frame as ``conn`` received it, judged with the room's committed state at delivery."""
        state = self.room.committed
        me, role = conn.session.id, conn.session.role
        for secret in self.hidden.values():
            if not state.is_hidden(secret.seq):
                continue
            assert secret.nonce not in data, f"seq {secret.seq}'s nonce reached {me} before its reveal"
            if not in_audience(secret.visibility, secret.roller, me, role, self.merged):
                for marker in secret.markers:
                    assert marker not in data, f"seq {secret.seq} ({secret.visibility}) leaked to {role} {me}"
        kind = frame["t"]
        if kind == "welcome":
            for event in frame["history"]:
                self.check_event(conn, event, state)
        elif kind == "event":
            self.check_event(conn, frame, state)
        elif kind in ("ack", "error", "pong", "invites"):
            self.check_answer(conn, frame)
        else:
            raise AssertionError(f"unexpected frame {kind!r}")

    def check_event(self, conn: Conn, event: dict[str, Any], state: RoomState) -> None:
        seq = event["seq"]
        assert signing.verify(event, INFO.id, KEYRING.jwks()), (
            f"event {seq} as {conn.session.id} got it verifies"
        )
        signed = signing.signed_part(event)
        data = canonical.canonical(signed)
        if data not in CROSS_CHECKED:  # each form once: a form reaches many sockets and welcomes
            assert data == spec_signing.encode(signed), "the spec-only encoder writes the same bytes"
            assert data == pure_canonical(signed), "and so does the pure encoder the server had before"
            CROSS_CHECKED.add(data)
        if not conn.seqs:
            assert seq == conn.first_expected, f"the first event is {seq}, not {conn.first_expected}"
        else:
            assert seq == conn.seqs[-1] + 1, f"{conn.session.id} got {seq} after {conn.seqs[-1]}"
        conn.seqs.append(seq)
        stored = self.stored[seq - 1]
        assert event["kind"] == stored["kind"]
        if event["kind"] == "roll" and stored["visibility"] != "public" and state.is_hidden(seq):
            full = in_audience(
                stored["visibility"], stored["actor"]["id"], conn.session.id, conn.session.role, self.merged
            )
            if full:
                assert event.get("label") == stored["label"]
                assert "sealed" not in event
            else:
                assert event.get("sealed") is True
                assert set(event) == SEALED_KEYS, sorted(event)
        if event["kind"] == "resource" and event["cause"] is not None:
            assert not state.is_hidden(event["cause"]), "a resource names a hidden roll as its cause"

    def check_answer(self, conn: Conn, frame: dict[str, Any]) -> None:
        rid = frame.get("id")
        if frame["t"] == "error" and rid is None:
            return  # a frame so broken it had no id (never sent by this machine's rules with an id)
        assert isinstance(rid, str)
        assert rid in conn.sent, f"an answer to a request never sent: {frame}"
        conn.answers[rid] = conn.answers.get(rid, 0) + 1
        assert conn.answers[rid] <= len(conn.sent[rid]), f"{rid} was answered more often than sent"
        if frame["t"] == "error":
            assert frame["code"] in protocol.ERROR_CODES, frame
            # "internal" only for a request whose own append the log failed to store.
            assert frame["code"] != "internal" or (conn.session, rid) in self.lost, frame
            return
        if frame["t"] == "pong":
            assert conn.sent[rid][0]["t"] == "ping"
            return
        request = conn.sent[rid][0]
        if frame["t"] == "invites":
            self.check_invites(conn, frame, request)
            if "seq" not in frame:
                return
        seq = frame["seq"]
        assert 1 <= seq <= len(self.stored), f"ack {frame} names no stored event"
        record = self.stored[seq - 1]
        if request["t"] == "reveal":
            assert record["kind"] == "reveal", (frame, record)
            assert record["of"] == request["seq"], (frame, record)
            return
        assert record["kind"] == request["t"], (frame, record)
        assert record["request"] == rid, (frame, record)
        if request["t"] == "roll":
            # Its own roll, or (a retry after a merge) one of a participant merged into this one.
            assert conn.session.id in (
                record["actor"]["id"],
                resolve(self.merges_known(), record["actor"]["id"]),
            )
            own = self.rolled.get((conn.session.id, rid))
            first = self.rolled[record["actor"]["id"], rid]
            assert seq == (first if own is None else own), "a retried roll is acked with its one stored roll"
            assert conn.acked.setdefault(rid, seq) == seq, "a retried roll was acked with another seq"
        else:
            assert record["actor"]["id"] == conn.session.id, (frame, record)

    def check_invites(self, conn: Conn, frame: dict[str, Any], request: dict[str, Any]) -> None:
        """An ``invites`` answer: real tokens of its generation, for the GM who asked, and no older one."""
        assert request["t"] == "invites", (frame, request)
        assert conn.session.role == "gm", "invite tokens reach only a GM"
        assert ("seq" in frame) == bool(request.get("rotate")), (frame, request)
        floor = self.invite_floor[(conn, frame["id"])]
        assert frame["generation"] >= floor, "an answer never hands out invites replaced when it was asked"
        for role in ("player", "spectator"):
            claims = tokens.verify(SECRET, frame[role], room=INFO.id)
            assert (claims.role, claims.sub, claims.invites) == (role, None, frame["generation"]), claims
        if "seq" in frame:
            record = self.stored[frame["seq"] - 1]
            assert (record["kind"], record["generation"]) == ("invites", frame["generation"]), record

    def merges_known(self) -> dict[str, str]:
        """Stored merges, and those in flight that the room already answers as if they were stored: not the
        appends queued behind a failure, which the log will refuse (their generation is over)."""
        merges = dict(self.merged)
        for pending in self.queue:
            if pending.generation != self.room.generation:
                continue
            for record in pending.records:
                if record["kind"] == "merge":
                    merges[record["merged"]["id"]] = record["into"]["id"]
        return merges
