"""The fuzz targets: one input in, nothing out; an exception other than the expected refusal is a crash.

- ``frames``: a client frame as the server gets it, through ``relay.protocol.parse`` with the server's
  default ``Limits``; a frame that parses is then handled by a real ``Room`` as a GM or a player, stored,
  and rendered for every session (sealed and full, with Foundry and Roll20 renderings) and encoded.
  ``FrameError`` is the expected refusal; an error frame from the room must carry a known code other than
  ``internal``.
- ``foundry`` / ``roll20``: the input's text as a dice formula in that dialect, rolled with dice chosen by
  the input's own checksum (always the highest face, always 1, or seeded random), so a crash replays
  exactly. ``RulesError`` with ``bad_formula`` or ``limit`` is the expected refusal.

Each target also bounds one input's CPU time: a formula or frame that takes longer than ``SLOW_SECONDS``
is a hang, reported as a crash (libFuzzer's ``-timeout`` is the backstop for a real infinite loop).
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable
from typing import Any

import msgpack
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import rules
from relay import protocol, visibility
from relay.auth import Claims
from relay.config import Limits
from relay.fanout import Forms, Renderer
from relay.formats import rules_numbers
from relay.log.base import RoomInfo
from relay.room import Append, Broadcast, Pending, Room, Send, Session
from relay.signing import Keyring
from relay.state import RoomState
from rules.dice import evaluate
from rules.errors import RulesError
from rules.render import to_foundry_message, to_roll20

#: The server's limits: what ``tablerelay serve`` runs with when nothing is configured.
LIMITS = Limits()
#: CPU seconds one input may take (under coverage instrumentation, which slows Python several times).
SLOW_SECONDS = 2.0
INFO = RoomInfo(id="fuzz", name="Fuzz", epoch="e1", created=0, fear_max=12, hope_max=6)
#: Frames are signed as the server signs them, so the canonical encoder is fuzzed with everything else.
KEYRING = Keyring.of(Ed25519PrivateKey.generate())


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


class _Table:
    """A room with a GM, a player (asking for both renderings) and a spectator, and a log that stores
    every append; each sent frame and each rendering is encoded as the server would."""

    def __init__(self, seed: int) -> None:
        dice = FuzzDice(seed)
        nonces = iter(range(1, 1_000))
        self.room = Room(
            INFO,
            RoomState(),
            LIMITS,
            resolve=lambda intent: rules.resolve(intent, rng=dice),
            clock=lambda: 1_700_000_000_000,
            make_id=lambda: f"p{next(nonces)}",
            nonce=lambda: bytes(32),
        )
        self.forms = Forms(INFO.id, KEYRING, LIMITS.history)
        self.sessions: list[Session] = []
        self.gm = self.join("gm", "gm-1", frozenset(protocol.FORMATS))
        self.player = self.join("player", None, frozenset(protocol.FORMATS))
        self.join("spectator", None, frozenset())

    def join(self, role: str, sub: str | None, formats: frozenset[str]) -> Session:
        session, join = self.room.admit(Claims(INFO.id, role, sub, None, None), None, formats)
        self.sessions.append(session)
        if join is not None:
            self.store(join)
        return session

    def store(self, pending: Pending) -> None:
        self.carry_out(self.room.committed_append(pending))

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
            # import) from its record's, read back (relay.formats.rules_numbers): both.
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
    table = _Table(zlib.crc32(data))
    # The same frame from a GM and then from a player: two sets of permissions, one parse.
    table.carry_out(table.room.handle(table.gm, frame))
    table.carry_out(table.room.handle(table.player, frame))
    # Hidden rolls it made are revealed, so the reveal's rendering (the roll it opens) runs too.
    for seq in [s for s in table.room.committed.sealed if table.room.committed.is_hidden(s)]:
        table.carry_out(table.room.handle(table.gm, protocol.Reveal(f"reveal-{seq}", seq)))


def frames(data: bytes) -> None:
    _timed(data, lambda: _frames(data))


TARGETS: dict[str, Callable[[bytes], None]] = {"frames": frames, "foundry": foundry, "roll20": roll20}
