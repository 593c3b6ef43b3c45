"""A Hypothesis state machine drives the sans-I/O ``Room`` with arbitrary frames from GMs, players and
spectators, and checks the protocol's guarantees after every step.

The machine plays the server's part with the real pieces: hellos go through ``Room.admit`` (fresh invites,
rejoins by ``sub``, resumes), frames through ``protocol.parse`` and ``Room.handle``, and broadcasts through
``fanout.broadcast`` into each socket's real ``Outbox``, whose bytes land in an in-memory sink; welcomes are
built as the server builds them (``history_range``, ``recent_between``, ``fanout.history``). Only the log is
a stand-in: a queue of appends that the machine commits, fails or refuses as stale, in order, as SQLite would.

Invariants, written from spec/protocol.md rather than from the code:

- the stored log's seqs are dense (1, 2, 3 …) and its fold is the room's committed state;
- every socket receives every stored event once, in seq order, with no gap: history and live events
  together are one unbroken run that ends at the last stored seq;
- Fear stays within 0..``fear_max`` and each Hope within 0..``hope_max``, in the stored log, in the committed
  state and in the state appends are checked against;
- no frame that reaches a socket outside a hidden roll's audience, before that roll's reveal, holds the roll's
  label, intent, result or dice (each roll carries unique marker strings, searched for in the frame's bytes,
  and its sealed form may hold nothing but the envelope and the commitment), and no socket at all sees its
  nonce before the reveal; a resource event names a hidden roll as its ``cause`` only once it is revealed;
- every ack names a stored event that answers that request (a roll's ack the roll, a reveal's ack a reveal
  of that seq, a resource's ack that change, a management frame's ack its event, a rotation's ``invites``
  answer its event), retries of a roll are acked with the seq of the one stored roll with that id, from the
  socket that sent it or, after a merge, from the participant it was merged into; and once no append is in
  flight every request of a connected socket has had exactly one answer;
- the GM's frames (rename, merge, kick, invites, archive) from every role, with their effects carried out as
  the server does (``relay.shell.campaign_io``): a participant whose removal is stored is never admitted
  again, has no open socket, and no stored event after the ``kick`` names them; after a merge nothing names
  the merged one; once a rotation is stored an invite of an older generation is refused while the current one
  and every personal token (``sub``) of someone not removed are admitted; and nothing at all is stored after
  ``archive``. Invites and personal tokens are real tokens (``relay.trust.tokens``), verified at each hello.

Its default run takes a few seconds; ``HYPOTHESIS_PROFILE=long`` runs it with the "long" profile of
tests/conftest.py (thousands of sequences; see docs/hardening.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from relay.core import canonical, protocol, records
from relay.core.actions import Append, Broadcast, Pending, Refused, Send, Session
from relay.core.claims import Claims
from relay.core.info import RoomInfo
from relay.core.membership import CloseParticipant, Retitle, SendInvites
from relay.core.room import Room
from relay.core.state import RoomState, fold
from relay.settings.config import Limits
from relay.shell import campaign_io, fanout
from relay.shell.fanout import Outbox
from relay.trust import signing, tokens
from relay.trust.forms import Forms
from rules.rng import Dice
from tests import spec_signing
from tests.pure_canonical import pure_canonical

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


class RoomMachine(RuleBasedStateMachine):
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

    # -- rules: people -----------------------------------------------------------------------------------

    @initialize(players=st.integers(0, 2))
    def table_opens(self, players: int) -> None:
        """Most tables start with their GM (gm-1) and a player or two; everything else is up to the rules."""
        self.admit(tokens.issue(SECRET, INFO.id, "gm", sub=GM_SUBS[0]), frozenset(), None)
        for _ in range(players):
            self.admit(tokens.issue(SECRET, INFO.id, "player"), frozenset(), None)
        self.commit(len(self.queue))

    @rule(
        role=st.sampled_from(["gm", "player", "player", "spectator"]),
        formats=st.sampled_from([frozenset(), frozenset(protocol.FORMATS)]),
        gm=st.sampled_from(GM_SUBS),
        generation=st.sampled_from([0, 0, 0, -1, 1]),
    )
    def hello_with_invite(self, role: str, formats: frozenset[str], gm: str, generation: int) -> None:
        # GM tokens name their participant; player and spectator invites make a new one per socket. An
        # invite is of the stored generation, of the one before (replaced) or of the next (not yet valid).
        if role == "gm":
            token = tokens.issue(SECRET, INFO.id, "gm", sub=gm)
        else:
            token = tokens.issue(SECRET, INFO.id, role, invites=max(0, self.generation + generation))
        self.admit(token, formats, None)

    @precondition(lambda self: bool(self.room.pending.participants))
    @rule(data=st.data(), resume=st.sampled_from(["none", "last", "old", "other-epoch"]))
    def hello_again(self, data: st.DataObject, resume: str) -> None:
        """A rejoin with a personal token (``sub``): the same participant, maybe resuming; or one since
        removed (refused), or merged into another (joins as that one)."""
        state = self.room.pending
        pid = data.draw(st.sampled_from(sorted(state.participants) + sorted(state.aliases)))
        role = state.participants[state.identity(pid)].role
        seq = self.room.committed.seq
        where = {
            "none": None,
            "last": protocol.Resume(INFO.epoch, seq),
            "old": protocol.Resume(INFO.epoch, max(0, seq - data.draw(st.integers(0, 20)))),
            "other-epoch": protocol.Resume("epoch-0", seq),
        }[resume]
        self.admit(tokens.issue(SECRET, INFO.id, role, sub=pid), frozenset(), where)

    @precondition(lambda self: bool(self.conns))
    @rule(data=st.data())
    def disconnect(self, data: st.DataObject) -> None:
        self.drop(data.draw(st.sampled_from(self.conns)))

    # -- rules: frames -----------------------------------------------------------------------------------

    def request(self, conn: Conn, frame: dict[str, Any]) -> None:
        """Send ``frame`` as the socket would: decoded and validated by ``protocol.parse``, then handled."""
        conn.sent.setdefault(frame["id"], []).append(frame)
        if frame["t"] == "invites":
            self.invite_floor[(conn, frame["id"])] = self.generation
        try:
            parsed = protocol.parse(msgpack.packb(frame, use_bin_type=True), LIMITS)
        except protocol.FrameError as exc:
            self.send(conn, protocol.error_frame(exc.code, exc.message, exc.request_id))
            return
        self.execute(self.room.handle(conn.session, parsed))

    def welcomed(self) -> list[Conn]:
        return [c for c in self.conns if c.welcomed]

    def rid(self) -> str:
        return f"r{next(self.ids)}"

    @precondition(lambda self: any(c.welcomed for c in self.conns))
    @rule(
        data=st.data(),
        visibility=st.sampled_from(VISIBILITIES),
        shape=st.sampled_from(
            ["dice", "duality", "duality-hope", "attack", "attack-fear", "power", "pool", "nexus", "bad"]
        ),
        bonus=st.integers(-2, 3),
        labelled=st.booleans(),
    )
    def roll(self, data: st.DataObject, visibility: str, shape: str, bonus: int, labelled: bool) -> None:
        conn = data.draw(st.sampled_from(self.welcomed()))
        n = next(self.markers)
        label, tag = f"Lbl{n:05d}Q", f"Tag{n:05d}Q"  # unique strings, found by a byte search if they leak
        target = [{"name": tag, "evasion": 12}]
        intents: dict[str, dict[str, Any]] = {
            "dice": {"system": "dice", "formula": f"2d6[{tag}] + {bonus}"},
            "duality": {"system": "daggerheart.duality", "modifier": bonus},
            "duality-hope": {"system": "daggerheart.duality", "experience": 2, "spend_hope": True},
            "attack": {"system": "daggerheart.attack", "modifier": bonus, "targets": target},
            "attack-fear": {
                "system": "daggerheart.attack",
                "modifier": bonus,
                "experience": 1,
                "spend_fear": True,
                "targets": target,
            },
            "power": {"system": "drawsteel.power", "characteristic": bonus, "edges": 1},
            "pool": {"system": "honors_edge.roll", "pool": "3k2", "tn": 15},
            "nexus": {"system": "nexus.test", "attribute_die": "d8", "skill_rank": 1},
            "bad": {"system": "dice", "formula": f"2d6[{tag}] +"},
        }
        intent = intents[shape]
        frame: dict[str, Any] = {"t": "roll", "id": self.rid(), "intent": intent, "visibility": visibility}
        if labelled:
            frame["label"] = label
        markers = [label.encode()] if labelled else []
        if shape in ("dice", "attack", "attack-fear", "bad"):
            markers.append(tag.encode())
        self.labels[frame["id"]] = tuple(markers)
        self.roll_frames[frame["id"]] = (conn.session.id, frame)
        self.request(conn, frame)

    def retries(self, conn: Conn) -> list[str]:
        """The roll ids ``conn`` may resend: its participant's, and (after a merge, from the device that
        reconnected as the survivor) those of the participants merged into it."""
        merges = self.merges_known()
        me = conn.session.id
        return sorted(
            r for r, (sender, _) in self.roll_frames.items() if me in (sender, resolve(merges, sender))
        )

    def rollers(self) -> list[Conn]:
        return [c for c in self.welcomed() if self.retries(c)]

    @precondition(lambda self: bool(self.rollers()))
    @rule(data=st.data(), inherited=st.booleans())
    def retry_roll(self, data: st.DataObject, inherited: bool) -> None:
        """The same roll frame again (a client that lost the ack): one roll, one seq, merges or not. Often
        one the socket's participant inherited by a merge: the merged device, reconnected as the other."""
        conns = self.rollers()
        heirs = [c for c in conns if any(self.roll_frames[r][0] != c.session.id for r in self.retries(c))]
        conn = data.draw(st.sampled_from(heirs if heirs and inherited else conns))
        rids = self.retries(conn)
        theirs = [r for r in rids if self.roll_frames[r][0] != conn.session.id]
        rid = data.draw(st.sampled_from(theirs if theirs and inherited else rids))
        self.request(conn, self.roll_frames[rid][1])

    @precondition(lambda self: any(c.welcomed for c in self.conns))
    @rule(data=st.data(), pick=st.integers(0, 3))
    def reveal(self, data: st.DataObject, pick: int) -> None:
        conn = data.draw(st.sampled_from(self.welcomed()))
        sealed = sorted(self.room.pending.sealed)
        if sealed and pick:
            seq = data.draw(st.sampled_from(sealed))
        else:
            seq = data.draw(st.integers(1, self.room.pending.seq + 2))  # anything: a public roll, a join …
        self.request(conn, {"t": "reveal", "id": self.rid(), "seq": seq})

    @precondition(lambda self: any(c.welcomed for c in self.conns))
    @rule(
        data=st.data(),
        name=st.sampled_from(["fear", "hope"]),
        op=st.sampled_from(["gain", "spend", "set"]),
        n=st.integers(0, 7),
        whose=st.sampled_from(["own", "other", "none", "unknown"]),
    )
    def resource(self, data: st.DataObject, name: str, op: str, n: int, whose: str) -> None:
        conn = data.draw(st.sampled_from(self.welcomed()))
        frame: dict[str, Any] = {"t": "resource", "id": self.rid(), "name": name, "op": op, "n": n}
        if name == "hope" and whose != "none":
            others = sorted(self.room.pending.participants) + sorted(self.room.pending.aliases)
            frame["participant"] = {
                "own": conn.session.id,
                "other": data.draw(st.sampled_from(others)) if others else conn.session.id,
                "unknown": "nobody",
            }[whose]
        self.request(conn, frame)

    @precondition(lambda self: any(c.welcomed for c in self.conns))
    @rule(data=st.data(), junk=st.sampled_from(["ping", "bad-visibility", "negative", "unknown-type"]))
    def other_frame(self, data: st.DataObject, junk: str) -> None:
        conn = data.draw(st.sampled_from(self.welcomed()))
        rid = self.rid()
        frames: dict[str, dict[str, Any]] = {
            "ping": {"t": "ping", "id": rid},
            "bad-visibility": {"t": "roll", "id": rid, "intent": {"system": "dice"}, "visibility": "all"},
            "negative": {"t": "resource", "id": rid, "name": "fear", "op": "gain", "n": -1},
            "unknown-type": {"t": "shout", "id": rid},
        }
        self.request(conn, frames[junk])

    def manager(self, data: st.DataObject, by_gm: int) -> Conn:
        """Mostly a GM's socket; now and then anyone's, whose management frames are refused."""
        gms = [c for c in self.welcomed() if c.session.role == "gm"]
        return data.draw(st.sampled_from(gms if gms and by_gm else self.welcomed()))

    def someone(self, data: st.DataObject, role: str | None = None, besides: str = "") -> str:
        """A participant id to name: anyone who joined and is not removed but ``besides`` (often one who
        rolled); or one removed, one merged away (its id is followed), nobody, or ``besides``."""
        state = self.room.pending
        if besides and data.draw(st.integers(0, 9)) == 0:
            return besides  # yourself, or the same one twice: refused
        known = sorted(
            p
            for p, m in state.participants.items()
            if role in (None, m.role) and p != besides and p not in state.revoked
        )
        rollers = sorted({sender for sender, _ in self.roll_frames.values()} & set(known))
        odd = [sorted(state.revoked), sorted(state.aliases), ["nobody"]]
        pool = data.draw(st.sampled_from([rollers, rollers, rollers, known, known, known, *odd]))
        return data.draw(st.sampled_from(pool or known or ["nobody"]))

    @precondition(lambda self: any(c.welcomed for c in self.conns))
    @rule(
        data=st.data(),
        kind=st.sampled_from(["rename", "invites", "rotate", "rotate", "archive"]),
        by_gm=st.integers(0, 4),
    )
    def manage(self, data: st.DataObject, kind: str, by_gm: int) -> None:
        conn = self.manager(data, by_gm)
        frame: dict[str, Any] = {"t": kind, "id": self.rid()}
        if kind == "archive" and len(self.stored) < 12:
            frame["t"] = "invites"  # late in a run, so most runs see plenty before it
        elif kind == "rename":
            frame.update(participant=self.someone(data), name=data.draw(st.sampled_from(NAMES)))
        elif kind == "rotate":
            frame.update(t="invites", rotate=True)
        self.request(conn, frame)

    @precondition(lambda self: any(c.welcomed for c in self.conns))
    @rule(data=st.data(), by_gm=st.integers(0, 4), role=st.sampled_from(["player", "player", "gm", None]))
    def merge(self, data: st.DataObject, by_gm: int, role: str | None) -> None:
        """Two participants, mostly of one role (players, or the two GMs), folded into one."""
        conn = self.manager(data, by_gm)
        gone = self.someone(data, role, besides=conn.session.id)
        into = self.someone(data, role, besides=gone)
        self.request(conn, {"t": "merge", "id": self.rid(), "participant": gone, "into": into})

    def duplicates(self) -> list[tuple[str, str]]:
        """(one who rolled, a player here): the stale duplicate and the one a GM folds it into."""
        state = self.room.pending
        here = {c.session.id for c in self.welcomed() if c.session.role == "player"}
        rollers = {sender for sender, _ in self.roll_frames.values()}
        return sorted(
            (gone, into)
            for gone in rollers
            if gone in state.participants and gone not in state.revoked
            for into in here
            if into != gone and state.participants[gone].role == "player"
        )

    @precondition(
        lambda self: bool(self.duplicates()) and any(c.session.role == "gm" for c in self.welcomed())
    )
    @rule(data=st.data())
    def merge_a_duplicate(self, data: st.DataObject) -> None:
        """The case merges are for: a stale "Aria" who rolled, folded into the Aria at the table, whose
        sockets then resend the stale one's rolls (see ``retry_roll``)."""
        conn = data.draw(st.sampled_from([c for c in self.welcomed() if c.session.role == "gm"]))
        gone, into = data.draw(st.sampled_from(self.duplicates()))
        self.request(conn, {"t": "merge", "id": self.rid(), "participant": gone, "into": into})

    @precondition(lambda self: any(c.welcomed for c in self.conns))
    @rule(data=st.data(), by_gm=st.integers(0, 4), reason=st.sampled_from([None, "", "Left the group."]))
    def kick(self, data: st.DataObject, by_gm: int, reason: str | None) -> None:
        conn = self.manager(data, by_gm)
        frame: dict[str, Any] = {
            "t": "kick",
            "id": self.rid(),
            "participant": self.someone(data, besides=conn.session.id),
        }
        if reason is not None:
            frame["reason"] = reason
        self.request(conn, frame)

    # -- rules: the log ----------------------------------------------------------------------------------

    @precondition(lambda self: bool(self.queue))
    @rule(count=st.integers(1, 4))
    def commit(self, count: int) -> None:
        for _ in range(min(count, len(self.queue))):
            self.store(self.queue.pop(0))

    @precondition(lambda self: bool(self.queue))
    @rule(conflict=st.booleans())
    def fail_next(self, conflict: bool) -> None:
        """The log could not store the next append (a full disk; or, as a conflict, another writer)."""
        pending = self.queue.pop(0)
        if not conflict:
            self.lost.update(pending.acks)
        self.settled(pending, self.room.failed_append(pending, conflict=conflict), ok=False)

    # -- invariants --------------------------------------------------------------------------------------

    @invariant()
    def after_every_step(self) -> None:
        # The server's tick first: its deliveries are checked frame by frame as they arrive (check_frame),
        # against the state at that moment; then the checks of the room and the log as they stand.
        self.tick()
        self.log_is_dense_and_folds_to_the_room()
        self.fear_and_hope_within_their_caps()
        self.every_socket_has_every_stored_event()
        self.every_request_is_answered_once_nothing_is_in_flight()
        self.campaign_changes_hold_in_the_log()
        self.no_socket_of_someone_removed_or_merged()

    def log_is_dense_and_folds_to_the_room(self) -> None:
        assert [r["seq"] for r in self.stored] == list(range(1, len(self.stored) + 1))
        folded = fold(self.stored)
        committed = self.room.committed
        assert (folded.seq, folded.fear, folded.hope) == (committed.seq, committed.fear, committed.hope)
        assert folded.members == committed.members
        assert {s: x.revealed for s, x in folded.sealed.items()} == {
            s: x.revealed for s, x in committed.sealed.items()
        }
        assert (folded.revoked, folded.aliases, folded.invites, folded.archived) == (
            committed.revoked,
            committed.aliases,
            committed.invites,
            committed.archived,
        )
        aliases = {gone: resolve(self.merged, gone) for gone in self.merged}  # a chain a→b→c points a at c
        assert (folded.revoked, folded.aliases) == (self.kicked, aliases), "the room reads the log as we do"
        assert (folded.invites, folded.archived) == (self.generation, self.archived)
        assert folded.participants == committed.participants
        # Roll ids, the merged ones' inherited: a restarted server answers retries as this one does.
        assert folded.rolls == committed.rolls

    def fear_and_hope_within_their_caps(self) -> None:
        for state in (self.room.committed, self.room.pending):
            assert 0 <= state.fear <= FEAR_MAX, state.fear
            assert all(0 <= v <= HOPE_MAX for v in state.hope.values()), state.hope
        for record in self.stored:
            if record["kind"] == "resource":
                cap = FEAR_MAX if record["name"] == "fear" else HOPE_MAX
                assert 0 <= record["value"] <= cap, record
            elif record["kind"] == "merge" and record["hope"] is not None:
                assert 0 <= record["hope"] <= HOPE_MAX, record

    def every_socket_has_every_stored_event(self) -> None:
        last = self.room.committed.seq
        for conn in self.welcomed():
            if conn.seqs:
                assert conn.seqs[-1] == last, f"{conn.session.id} is at {conn.seqs[-1]}, the log at {last}"
            else:
                assert conn.first_expected == last + 1, "a socket that got no event has nothing to get"

    def campaign_changes_hold_in_the_log(self) -> None:
        """Read in seq order: nothing after ``archive``; after a ``kick`` or a ``merge`` no event names the
        one removed or merged away (as actor, member, merged, into or Hope's participant)."""
        gone: dict[str, int] = {}  # participant -> the seq of their kick or merge
        for record in self.stored:
            assert record["kind"] != "archive" or record is self.stored[-1], "an event stored after archive"
            named = {record["actor"]["id"], record.get("participant")}
            named.update(record[k]["id"] for k in ("member", "merged", "into") if k in record)
            for pid in named & gone.keys():
                raise AssertionError(f"seq {record['seq']} names {pid}, gone at {gone[pid]}: {record}")
            if record["kind"] == "kick":
                gone[record["member"]["id"]] = record["seq"]
            elif record["kind"] == "merge":
                gone[record["merged"]["id"]] = record["seq"]

    def no_socket_of_someone_removed_or_merged(self) -> None:
        for conn in self.conns:
            assert conn.session.id not in self.kicked, f"{conn.session.id} was removed but is still here"
            assert conn.session.id not in self.merged, f"{conn.session.id} was merged but is still here"

    def every_request_is_answered_once_nothing_is_in_flight(self) -> None:
        if self.queue:
            return
        for conn in self.welcomed():
            for rid, frames in conn.sent.items():
                assert conn.answers.get(rid, 0) == len(frames), f"{rid} sent {len(frames)}×, answered fewer"


# The default run, and the "long" profile's (tests/conftest.py) when it is the one loaded.
LONG = settings.get_profile("long")
_default = settings.default
if _default is None or _default.max_examples < LONG.max_examples:
    RoomMachine.TestCase.settings = settings(
        _default,
        max_examples=100,
        stateful_step_count=100,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
else:
    RoomMachine.TestCase.settings = settings(_default, suppress_health_check=[HealthCheck.too_slow])

TestRoomMachine = RoomMachine.TestCase
