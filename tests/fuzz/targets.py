"""The fuzz targets: one input in, nothing out; an exception other than the expected refusal is a crash.

- ``frames``: a client frame as the server gets it, through ``relay.core.protocol.parse`` with the server's
  default ``Limits``; a frame that parses is then handled by a real ``Room`` as a GM or a player, stored,
  and rendered for every session (sealed and full, with Foundry and Roll20 renderings) and encoded.
  ``FrameError`` is the expected refusal; an error frame from the room must carry a known code other than
  ``internal``.
- ``foundry`` / ``roll20``: the input's text as a dice formula in that dialect, rolled with dice chosen by
  the input's own checksum (always the highest face, always 1, or seeded random), so a crash replays
  exactly. ``RulesError`` with ``bad_formula`` or ``limit`` is the expected refusal.

- ``imports``: a room export file, through ``relay.storage.exports.read`` and the offline check (what
  ``tablerelay verify`` runs); its events are then signed again with the target's own key (a fuzzer forges
  no signature, and a GM's own export of a strange room is signed), checked as ``tablerelay room import``
  checks them, stored in SQLite, and the room served: loaded from the stored rows as the server loads it,
  a welcome for a GM, a player and a spectator, every hidden roll revealed, a roll and a Fear spend.
  ``ExportError`` and ``ImportRefused`` are the expected refusals; each needs a sentence.

Each target also bounds one input's CPU time: a formula or frame that takes longer than ``SLOW_SECONDS``
is a hang, reported as a crash (libFuzzer's ``-timeout`` is the backstop for a real infinite loop).
"""

from __future__ import annotations

import dataclasses
import random
import time
import zlib
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import msgpack
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import rules
from relay.core import protocol, records, visibility
from relay.core.actions import Append, Broadcast, Pending, Refused, Send, Session
from relay.core.canonical import CanonicalError
from relay.core.claims import Claims
from relay.core.formats import rules_numbers
from relay.core.info import RoomInfo
from relay.core.room import Room
from relay.core.state import RoomState
from relay.ops.campaign import ImportRefused, checked_records
from relay.settings.config import Limits
from relay.shell.fanout import Renderer
from relay.storage import exports
from relay.storage.sqlite.db import connect, import_room_sync, read_sync
from relay.trust.forms import Forms
from relay.trust.signing import Keyring
from rules.dice import evaluate
from rules.errors import RulesError
from rules.render import to_foundry_message, to_roll20

#: The server's limits: what ``tablerelay serve`` runs with when nothing is configured.
LIMITS = Limits()
#: CPU seconds one input may take (under coverage instrumentation, which slows Python several times).
SLOW_SECONDS = 2.0
INFO = RoomInfo(id="fuzz", name="Fuzz", epoch="e1", created=0, fear_max=12, hope_max=6)
#: Frames are signed as the server signs them, so the canonical encoder is fuzzed with everything else.
#: A fixed test key, so the exports ``seeds`` writes come out the same each time.
KEYRING = Keyring.of(Ed25519PrivateKey.from_private_bytes(bytes(range(32))))


class Hang(AssertionError):
    """One input took longer than ``SLOW_SECONDS`` of CPU time."""


class FuzzDice:
    """Dice for one input: mode 0 always rolls the highest face (most explosions), 1 always rolls 1
    (most rerolls of low faces), else a ``random.Random`` seeded from the input (test dice, never a
    player's)."""

    def __init__(self, seed: int) -> None:
        self._mode = seed % 4
        self._random = random.Random(seed)

    def roll(self, faces: int) -> int:
        if faces < 1:
            raise RulesError("out_of_range", f"A die needs at least 1 face; got {faces}.")
        if self._mode == 0:
            return faces
        if self._mode == 1:
            return 1
        return self._random.randint(1, faces)


def _timed(data: bytes, work: Callable[[], None]) -> None:
    started = time.process_time()
    work()
    spent = time.process_time() - started
    if spent > SLOW_SECONDS:
        raise Hang(f"one input took {spent:.2f} s of CPU: {data[:200]!r}")


# -- dice ----------------------------------------------------------------------------------------------


def _dice(data: bytes, dialect: str) -> None:
    formula = data.decode("utf-8", "replace")
    rng = FuzzDice(zlib.crc32(data))
    try:
        ev = evaluate(formula, rng, dialect)
    except RulesError as exc:
        if exc.code not in ("bad_formula", "limit"):
            raise AssertionError(f"unexpected refusal code {exc.code!r}: {exc.message}") from exc
        if not exc.message or "Traceback" in exc.message:
            raise AssertionError(f"a refusal needs a sentence: {exc.message!r}") from exc
        return
    total = ev.total
    if not (isinstance(total, int) or (isinstance(total, float) and not total.is_integer())):
        raise AssertionError(f"total {total!r} is neither an int nor a fraction")
    if not ev.text.endswith(f"= {total}"):
        raise AssertionError(f"text {ev.text!r} does not end with the total {total!r}")
    for die in ev.dice:
        if not {"faces", "value", "kept"} <= die.keys():
            raise AssertionError(f"die {die!r} lacks faces, value or kept")
    # A result travels as MessagePack: it must encode.
    msgpack.packb([ev.total, ev.text, ev.formula, ev.dice], use_bin_type=True)


def foundry(data: bytes) -> None:
    _timed(data, lambda: _dice(data, "foundry"))


def roll20(data: bytes) -> None:
    _timed(data, lambda: _dice(data, "roll20"))


# -- frames ----------------------------------------------------------------------------------------------


def _check_refusal(exc: protocol.FrameError) -> None:
    if exc.code not in protocol.ERROR_CODES or exc.code == "internal":
        raise AssertionError(f"a refused frame got the code {exc.code!r}")
    if not exc.message or not exc.message.endswith("."):
        raise AssertionError(f"a refused frame needs a sentence: {exc.message!r}")
    rid = exc.request_id
    if rid is not None and (not isinstance(rid, str) or len(rid) > LIMITS.max_request_id):
        raise AssertionError(f"a refusal echoes an id it should not: {rid!r}")
    protocol.encode(protocol.error_frame(exc.code, exc.message, rid))


class Table:
    """A room with a GM, a player (asking for both renderings) and a spectator, and a log that stores
    every append; each sent frame and each rendering is encoded as the server would."""

    def __init__(self, seed: int, info: RoomInfo = INFO, stored: list[dict[str, Any]] | None = None) -> None:
        """A fresh room, or the room ``stored`` (all its records) makes, loaded as the server loads it."""
        dice = FuzzDice(seed)
        nonces = iter(range(1, 1_000))
        self.stored: list[dict[str, Any]] = []
        state = RoomState()
        for record in stored or ():
            state.apply(record)
        self.room = Room(
            info,
            state,
            LIMITS,
            resolve=lambda intent: rules.resolve(intent, rng=dice),
            clock=lambda: 1_700_000_000_000,
            make_id=lambda: f"p{next(nonces)}",
            nonce=lambda: bytes(32),
        )
        if stored:
            self.room.remember(stored[-LIMITS.history :])
        self.forms = Forms(info.id, KEYRING, LIMITS.history)
        self.sessions: list[Session] = []
        self.gm = self.join("gm", "gm-1", frozenset(protocol.FORMATS))
        self.player = self.join("player", None, frozenset(protocol.FORMATS))
        self.join("spectator", None, frozenset())

    def join(self, role: str, sub: str | None, formats: frozenset[str]) -> Session | None:
        """A socket's hello and its welcome; None when the room refuses it (an imported room may have
        removed ``gm-1``, or know it as a player)."""
        room = self.room
        try:
            session, join = room.admit(Claims(room.id, role, sub, None, None), None, formats)
        except Refused as exc:
            if not exc.reason.endswith("."):
                raise AssertionError(f"a refused hello needs a sentence: {exc.reason!r}") from exc
            return None
        self.sessions.append(session)
        if join is not None:
            self.store(join)
        # The welcome as the server builds it from the room's memory (``Relay._welcome``); encoded.
        after, upto, _ = room.history_range(None)
        shown = room.recent_between(after, upto)
        assert shown is not None, "the room's memory holds what a fresh welcome shows"
        history = [Renderer(r, room.committed, self.forms).frame(session) for r in shown]
        welcome = room.welcome(session, "token", history, False)
        protocol.encode(welcome)
        return session

    def store(self, pending: Pending) -> None:
        for record in pending.records:
            records.check(record)  # what the server writes, an import must take
        self.stored.extend(pending.records)
        self.carry_out(self.room.committed_append(pending))

    def reveal_all(self) -> None:
        """The GM reveals every hidden roll still sealed, so each reveal's rendering runs too."""
        state = self.room.committed
        if self.gm is None:
            return
        for seq in [s for s in state.sealed if state.is_hidden(s)]:
            self.carry_out(self.room.handle(self.gm, protocol.Reveal(f"reveal-{seq}", seq)))

    def carry_out(self, actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, Send):
                frame = action.frame
                if frame["t"] == "error" and (
                    frame["code"] not in protocol.ERROR_CODES or frame["code"] == "internal"
                ):
                    raise AssertionError(f"the room answered with {frame!r}")
                protocol.encode(frame)
            elif isinstance(action, Append):
                self.store(action.pending)
            elif isinstance(action, Broadcast):
                self.render(action.record)

    def render(self, record: dict[str, Any]) -> None:
        renderer = Renderer(record, self.room.committed, self.forms)
        for session in self.sessions:
            key = renderer.key(session)
            renderer.encoded_for(key)
        if record["kind"] == "roll":
            # The server swallows and logs a renderer's exception (a card is optional); here it is a crash.
            # It renders a fresh roll from the rules core's numbers, and one without them (a reveal's blob, an
            # import) from its record's, read back (relay.core.formats.rules_numbers): both.
            gm_ids = self.room.committed.gm_ids()
            for result in (record.get("rules_result", record["result"]), rules_numbers(record["result"])):
                to_foundry_message(
                    result, record["visibility"], gm_ids, record["actor"]["id"], label=record["label"]
                )
                to_roll20(result, label=record["label"])
            if record["visibility"] != "public":
                sealed = record["sealed"]
                if not visibility.verify(sealed["nonce"], sealed["blob"], sealed["commitment"]):
                    raise AssertionError("a sealed roll's commitment does not match its blob")


def _frames(data: bytes) -> None:
    if len(data) > LIMITS.max_frame:
        return  # the socket closes with 1009 before a frame this size is parsed
    try:
        frame = protocol.parse(data, LIMITS)
    except protocol.FrameError as exc:
        _check_refusal(exc)
        return
    if isinstance(frame, protocol.Hello):
        return  # what a hello carries is checked by its token, not here
    table = Table(zlib.crc32(data))
    assert table.gm is not None, "a fresh room admits its GM"
    assert table.player is not None, "a fresh room admits a player"
    # The same frame from a GM and then from a player: two sets of permissions, one parse.
    table.carry_out(table.room.handle(table.gm, frame))
    table.carry_out(table.room.handle(table.player, frame))
    table.reveal_all()


def frames(data: bytes) -> None:
    _timed(data, lambda: _frames(data))


# -- imports -------------------------------------------------------------------------------------------

#: What a served imported room is asked to do after its welcomes.
AFTER_IMPORT: tuple[protocol.Frame, ...] = tuple(
    protocol.parse(msgpack.packb(frame), LIMITS)
    for frame in (
        {"t": "roll", "id": "r", "intent": {"system": "dice", "formula": "2d6"}, "visibility": "gm"},
        {"t": "resource", "id": "f", "name": "fear", "op": "spend", "n": 1},
    )
)


def _check_sentence(exc: Exception) -> None:
    if not str(exc).strip():
        raise AssertionError(f"a refused export needs a sentence: {exc!r}") from exc


def signed_again(export: exports.Export) -> exports.Export:
    """``export`` as its events would read had the target's key signed them, as a stored export."""
    room_id = export.room["id"]
    events = []
    for event in export.events:
        bare = {k: v for k, v in event.items() if k not in ("kid", "sig")}
        try:
            events.append({**bare, "kid": KEYRING.kid, "sig": KEYRING.sign(bare, room_id)})
        except CanonicalError:
            events.append(event)  # what no server could have signed stays as it came, and fails the check
    return dataclasses.replace(export, keys=KEYRING.jwks()["keys"], events=events, form="stored")


def _imports(data: bytes) -> None:
    try:
        export = exports.read(data)
        exports.failures(export)
    except exports.ExportError as exc:
        _check_sentence(exc)
        return
    try:
        info, imported = checked_records(signed_again(export))
    except (ImportRefused, exports.ExportError) as exc:
        _check_sentence(exc)
        return
    with closing(connect(Path(":memory:"))) as conn:
        import_room_sync(conn, info, imported, max_rooms=LIMITS.max_rooms)
        stored = read_sync(conn, info.id, 0, len(imported) + 1)
    if stored != imported:
        raise AssertionError("the stored rows do not read back as the imported records")
    # Served: loaded as ``Relay._load`` loads a room (its state folded from the rows, its last ones in
    # memory); each join gets a welcome, the GM reveals every hidden roll and rolls, and Fear is spent.
    table = Table(zlib.crc32(data), info, stored)
    for session in (table.gm, table.player):
        if session is not None:
            for frame in AFTER_IMPORT:
                table.carry_out(table.room.handle(session, frame))
    table.reveal_all()


def imports(data: bytes) -> None:
    _timed(data, lambda: _imports(data))


TARGETS: dict[str, Callable[[bytes], None]] = {
    "frames": frames,
    "foundry": foundry,
    "imports": imports,
    "roll20": roll20,
}
