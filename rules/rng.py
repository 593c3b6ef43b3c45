"""Random sources for dice.

``SecureDice`` is the source for rolls made without a key: the operating system's CSPRNG, read in large
buffered chunks, with rejection sampling so every face is exactly equally likely. ``KeyedDice`` is the
provably fair source (spec/fairness.md): the same dice drawn from the HMAC word stream of a roll's key, so
anyone holding the key recomputes every face. ``Scripted`` hands out predetermined faces for tests and worked
examples.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections.abc import Iterable, Iterator
from typing import Protocol, runtime_checkable

from rules.errors import RulesError

_BUFFER_BYTES = 16384


@runtime_checkable
class Dice(Protocol):
    """Every random source: ``roll(faces)`` returns an int uniform in ``1..faces``."""

    def roll(self, faces: int) -> int: ...


class SecureDice:
    """Unbiased dice from ``os.urandom``.

    Reading the OS generator once per die costs a system call each; reading 16 KiB at a time and
    slicing it makes a die a few hundred nanoseconds. Faces up to 255 use one byte, larger dice two,
    four or more bytes; a draw that lands in the incomplete top block is thrown away (rejection
    sampling), never folded with a bare modulo, so no face is favoured. Pools of small dice are drawn
    in one pass with ``bytes.translate`` (byte -> face, rejected bytes deleted), which runs in C.
    """

    __slots__ = ("_buf", "_limits", "_pos", "_tables")

    def __init__(self) -> None:
        self._buf = b""
        self._pos = 0
        # faces -> (bytes per draw, exclusive acceptance limit)
        self._limits: dict[int, tuple[int, int]] = {}
        # faces (<= 255) -> (byte -> face table, bytes to reject)
        self._tables: dict[int, tuple[bytes, bytes]] = {}

    def _plan(self, faces: int) -> tuple[int, int]:
        if faces < 1:
            raise RulesError("out_of_range", f"A die needs at least 1 face; got {faces}.")
        width = max(1, (faces - 1).bit_length() + 7 >> 3)
        if width > 8:
            raise RulesError("out_of_range", f"A die may have at most 2**64 faces; got {faces}.")
        space = 1 << (8 * width)
        plan = (width, space - space % faces)
        if len(self._limits) < 4096:
            self._limits[faces] = plan
        return plan

    def _table(self, faces: int) -> tuple[bytes, bytes]:
        limit = 256 - 256 % faces
        table = (bytes(b % faces + 1 for b in range(limit)) + bytes(256 - limit), bytes(range(limit, 256)))
        self._tables[faces] = table
        return table

    def _take(self, width: int) -> int:
        pos = self._pos
        if pos + width > len(self._buf):
            self._buf = os.urandom(_BUFFER_BYTES)
            pos = 0
        self._pos = pos + width
        if width == 1:
            return self._buf[pos]
        return int.from_bytes(self._buf[pos : pos + width], "little")

    def roll(self, faces: int) -> int:
        entry = self._tables.get(faces)
        if entry is None:
            if faces > 255 or faces < 1:
                return self._roll_wide(faces)
            entry = self._table(faces)
        # One byte per draw: the table gives the face, or 0 for a byte in the rejected top block.
        table = entry[0]
        buf = self._buf
        pos = self._pos
        while True:
            if pos >= len(buf):
                buf = self._buf = os.urandom(_BUFFER_BYTES)
                pos = 0
            face = table[buf[pos]]
            pos += 1
            if face:
                self._pos = pos
                return face

    def _roll_wide(self, faces: int) -> int:
        plan = self._limits.get(faces)
        if plan is None:
            plan = self._plan(faces)
        width, limit = plan
        while True:
            draw = self._take(width)
            if draw < limit:
                return draw % faces + 1

    def rolls(self, faces: int, count: int) -> list[int]:
        """``count`` independent dice of ``faces`` faces, drawn in one pass where the die is small.

        The bytes are consumed in order exactly as ``count`` calls of ``roll`` would consume them (a
        rejected byte is skipped, never replaced by a later one), only translated in C a slice at a time.
        """
        entry = self._tables.get(faces)
        if entry is None:
            if faces > 255 or faces < 1:
                roll = self._roll_wide
                return [roll(faces) for _ in range(count)]
            entry = self._table(faces)
        table, reject = entry
        pos = self._pos
        end = pos + count
        if end <= len(self._buf):
            out = self._buf[pos:end].translate(table, reject)
            self._pos = end
            if len(out) == count:
                return list(out)
        else:
            out = b""
        while len(out) < count:
            buf = self._buf
            pos = self._pos
            if pos >= len(buf):
                buf = self._buf = os.urandom(_BUFFER_BYTES)
                pos = 0
            end = min(len(buf), pos + count - len(out))
            out += buf[pos:end].translate(table, reject)
            self._pos = end
        return list(out)


#: Every word of the fair stream is a 64-bit unsigned integer, so a die has at most this many faces.
WORD_SPACE = 1 << 64
_BLOCK_TAG = b"faces"
_WORDS = struct.Struct(">4Q")
#: The last block index u32be(j) can name.
_LAST_BLOCK = (1 << 32) - 1
# HMAC's pads (RFC 2104) as byte maps: ``key.translate(_IPAD)`` is the key XOR 0x36 in each byte, in C.
_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))
_SHA256_BLOCK = 64
# faces -> acceptance limit, for the dice a table rolls again and again (bounded: faces come from intents).
_LIMITS: dict[int, int] = {}


def keyed_words(key: bytes) -> Iterator[int]:
    """The word stream of spec/fairness.md: ``HMAC-SHA256(key, b"faces" + u32be(j))`` for j = 0, 1, 2, …,
    each block cut into four big-endian 64-bit words, in order."""
    digest, unpack = hmac.digest, _WORDS.unpack
    for j in range(1 << 32):
        yield from unpack(digest(key, _BLOCK_TAG + j.to_bytes(4, "big"), hashlib.sha256))
    # u32be(j) has no 2**32nd value; a roll of 2**34 dice is far past every limit of the rules core anyway.
    raise RulesError("limit", "A keyed dice stream ends after 2**34 words.")


class HmacSha256:
    """HMAC-SHA256 under one key for many messages (RFC 2104, the same bytes as ``hmac.digest``): the key's
    inner and outer pad blocks are hashed once, and each message continues copies of those two states.

    ``hmac.digest`` hashes both pad blocks again for every message and, on OpenSSL 3, looks its digest up
    again too: for a die stream's 41-byte messages that was most of a block's cost.
    """

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > _SHA256_BLOCK:
            key = hashlib.sha256(key).digest()
        key = key.ljust(_SHA256_BLOCK, b"\0")
        self._inner = hashlib.sha256(key.translate(_IPAD))
        self._outer = hashlib.sha256(key.translate(_OPAD))

    def digest(self, message: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """``hmac.digest(key, message, "sha256")`` as two plain hashes: for one
    message under a fresh key (a roll key's first block) a third cheaper than ``hmac.digest`` on OpenSSL 3,
    which sets up an HMAC context for each call."""
    if len(key) > _SHA256_BLOCK:
        key = hashlib.sha256(key).digest()
    pad = key.ljust(_SHA256_BLOCK, b"\0")
    inner = hashlib.sha256(pad.translate(_IPAD) + message).digest()
    return hashlib.sha256(pad.translate(_OPAD) + inner).digest()


def acceptance_limit(faces: int) -> int:
    """The exclusive bound below which a word is kept for a die of ``faces`` faces: ``2**64 - 2**64 mod f``
    (the largest multiple of ``faces`` that fits, so every face has the same number of words)."""
    if faces < 1:
        raise RulesError("out_of_range", f"A die needs at least 1 face; got {faces}.")
    if faces > WORD_SPACE:
        raise RulesError("out_of_range", f"A die may have at most 2**64 faces; got {faces}.")
    return WORD_SPACE - WORD_SPACE % faces


def _limit(faces: int) -> int:
    """``acceptance_limit``, remembered for the faces already seen."""
    limit = _LIMITS.get(faces)
    if limit is None:
        limit = acceptance_limit(faces)
        if len(_LIMITS) < 4096 and type(faces) is int:
            _LIMITS[faces] = limit
    return limit


class KeyedDice:
    """Dice drawn from a word stream, each recorded in ``draws`` as ``(faces, value)`` in draw order.

    ``KeyedDice(key)`` reads the stream of spec/fairness.md for the 32-byte roll key ``key``; a die of
    ``f`` faces takes the next word ``w``, discards it when ``w >= acceptance_limit(f)`` and takes the
    next, and shows ``1 + w % f``. Every die costs at least one word, a d1 included, so the verifier and
    the server stay in step whatever the rules core rolls. ``KeyedDice.from_words`` reads given words
    instead (tests drive the rejection path with them; a verifier replays stored draws with them).

    The words are the ones ``keyed_words`` yields, read a block at a time into ``_words``: a roll of up to
    four dice, the common one, makes one block, with two plain hashes and no generator; a roll that needs
    more blocks hashes the key's HMAC pads once for all of them.
    """

    __slots__ = ("_block", "_hmac", "_key", "_pos", "_source", "_words", "draws")

    def __init__(self, key: bytes | None = None, *, words: Iterable[int] | None = None) -> None:
        if (key is None) == (words is None):
            raise TypeError("KeyedDice takes a key or words, not both")
        self._key: bytes | None = None
        self._hmac: HmacSha256 | None = None  # made at the second block
        self._source: Iterator[int] | None = None
        if key is not None:
            if len(key) != 32:
                raise ValueError(f"a roll key is 32 bytes; got {len(key)}")
            self._key = bytes(key)
        else:
            assert words is not None
            self._source = _checked(words)
        self._block = 0  # the next block's index j
        self._words: tuple[int, ...] = ()
        self._pos = 0
        #: Every die drawn so far, ``(faces, value)``, in order: a roll's ``fair.draws``.
        self.draws: list[tuple[int, int]] = []

    @classmethod
    def from_words(cls, words: Iterable[int]) -> KeyedDice:
        """Dice from ``words`` (each ``0 <= w < 2**64``) instead of a key's stream; ``RulesError`` with
        code ``script_exhausted`` when they run out, so a replay never rolls what it was not given."""
        return cls(words=words)

    def _more(self, faces: int) -> tuple[int, ...]:
        """The next words: the key's next block, or the next given word; ``RulesError`` at the end."""
        key = self._key
        if key is not None:
            j = self._block
            if j > _LAST_BLOCK:
                raise RulesError("limit", "A keyed dice stream ends after 2**34 words.")
            self._block = j + 1
            message = _BLOCK_TAG + j.to_bytes(4, "big")
            if j == 0:
                block = hmac_sha256(key, message)
            else:
                if self._hmac is None:
                    self._hmac = HmacSha256(key)
                block = self._hmac.digest(message)
            words = _WORDS.unpack(block)
        else:
            assert self._source is not None
            word = next(self._source, None)
            if word is None:
                raise RulesError("script_exhausted", f"The dice words ran out while rolling a d{faces}.")
            words = (word,)
        self._words = words
        return words

    def roll(self, faces: int) -> int:
        limit = _limit(faces)
        words, pos = self._words, self._pos
        while True:
            if pos >= len(words):
                self._pos = pos
                words, pos = self._more(faces), 0
            word = words[pos]
            pos += 1
            if word < limit:
                self._pos = pos
                value = word % faces + 1
                self.draws.append((faces, value))
                return value

    def rolls(self, faces: int, count: int) -> list[int]:
        """``count`` dice of ``faces`` faces: the same words and draws as ``count`` calls of ``roll``."""
        if count <= 0:
            return []  # no die, so no check of its faces either (as ``count`` calls of ``roll``)
        limit = _limit(faces)
        words, pos = self._words, self._pos
        draws = self.draws
        out: list[int] = []
        while len(out) < count:
            if pos >= len(words):
                self._pos = pos
                words, pos = self._more(faces), 0
            word = words[pos]
            pos += 1
            if word < limit:
                value = word % faces + 1
                draws.append((faces, value))
                out.append(value)
        self._pos = pos
        return out


def _checked(words: Iterable[int]) -> Iterator[int]:
    for word in words:
        if not 0 <= word < WORD_SPACE:
            raise RulesError("out_of_range", f"A dice word is a 64-bit unsigned integer; got {word}.")
        yield word


class Scripted:
    """Hands out the given faces in order; for tests and worked examples.

    Raises ``RulesError`` (code ``script_exhausted``) when a value does not fit the die being rolled
    or when the script runs out, so a test can never silently roll something it did not script.
    """

    def __init__(self, values: Iterable[int]) -> None:
        self._values = list(values)
        self._pos = 0

    @property
    def remaining(self) -> int:
        return len(self._values) - self._pos

    def roll(self, faces: int) -> int:
        if self._pos >= len(self._values):
            raise RulesError(
                "script_exhausted",
                f"The scripted dice ran out after {len(self._values)} values while rolling a d{faces}.",
            )
        value = self._values[self._pos]
        if not 1 <= value <= faces:
            raise RulesError(
                "script_exhausted",
                f"Scripted value {value} (position {self._pos}) cannot be rolled on a d{faces}.",
            )
        self._pos += 1
        return value


def roll_many(rng: Dice, faces: int, count: int) -> list[int]:
    """Roll ``count`` dice, using the source's batch method when it has one."""
    batch = getattr(rng, "rolls", None)
    if batch is not None:
        result: list[int] = batch(faces, count)
        return result
    return [rng.roll(faces) for _ in range(count)]
