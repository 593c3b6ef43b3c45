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
tests/conftest.py (thousands of sequences; see docs/hardening.md). The rules and invariants are here; the
server's part and the checks of every frame a socket receives are in stateful_server.py, and the room's
settings and helpers in stateful_table.py.
"""

from __future__ import annotations

from typing import Any

import msgpack
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from relay.core import protocol
from relay.core.state import fold
from relay.trust import tokens
from tests.relay.core.stateful_server import ServerPart
from tests.relay.core.stateful_table import (
    FEAR_MAX,
    GM_SUBS,
    HOPE_MAX,
    INFO,
    LIMITS,
    NAMES,
    SECRET,
    VISIBILITIES,
    Conn,
    resolve,
)


class RoomMachine(ServerPart):
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
