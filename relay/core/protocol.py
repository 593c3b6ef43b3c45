"""The wire protocol (spec/protocol.md, version 1): validating client frames, encoding server frames.

Every client frame is one binary MessagePack map whose ``"t"`` names its type. ``parse`` turns raw bytes
into one of the frame dataclasses below or raises ``FrameError`` with the error code, a sentence for a
person and the frame's ``id`` when it could be read. Nothing here has side effects.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeGuard

import msgpack
import msgspec

from relay.core.canonical import holds_float
from relay.settings.config import Limits

VERSION = 1
VISIBILITIES = ("public", "gm", "blind", "self")
FORMATS = ("foundry", "roll20")
RESOURCES = ("fear", "hope")
RESOURCE_OPS = ("gain", "spend", "set")
ERROR_CODES = (
    "bad_frame",
    "bad_intent",
    "unauthorized",
    "forbidden",
    "not_found",
    "insufficient",
    "rate_limited",
    "conflict",
    "internal",
    "archived",
    "removed",
    "store_full",
)
MAX_NAME = 100
#: A roller seed's bounds in bytes (spec/fairness.md).
SEED_MIN = 16
SEED_MAX = 64
#: The GM's campaign-management frames (parsed here; relay.core.membership handles them).
MANAGE_TYPES = ("rename", "merge", "kick", "invites", "archive")
MAX_DEPTH = 16  # nesting allowed inside an intent; deeper structures are not a roll anyone means

# Close codes the server uses (1000-2999 are the standard's; 4000-4999 are ours).
CLOSE_UNAUTHORIZED = 4001  # first frame not a hello, or a hello/token the server refuses
CLOSE_SLOW = 4008  # the client fell behind its send queue; it may resume
CLOSE_FULL = 4029  # the room has as many connected sockets as its limit allows
CLOSE_POLICY = 1008  # persistent rate-limit abuse
CLOSE_GOING_AWAY = 1001  # server shutting down
CLOSE_REVOKED = 4003  # the GM removed this participant, or replaced this invite (relay.core.membership)
CLOSE_MERGED = 4010  # the GM merged this participant into another: reconnect as that one
CLOSE_TRY_LATER = 1013  # sockets per address at max_per_ip, or no hello within hello_timeout: try again


class FrameError(Exception):
    """A client frame that is refused: answered with ``{"t": "error", "id"?, "code", "message"}``."""

    def __init__(self, code: str, message: str, request_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


@dataclass(frozen=True)
class Resume:
    epoch: str
    seq: int


@dataclass(frozen=True)
class Hello:
    token: str
    name: str | None
    resume: Resume | None
    formats: frozenset[str]
    witness: bool = False  # the client answers witness requests (spec/fairness.md)


@dataclass(frozen=True)
class Roll:
    id: str
    intent: dict[str, Any]
    visibility: str
    label: str | None
    seed: bytes | None = None  # the roller's contribution to its dice (spec/fairness.md)


@dataclass(frozen=True)
class Witness:
    """A witness's random bytes for the open roll of pending event ``pending`` (spec/fairness.md)."""

    id: str
    pending: int
    value: bytes


@dataclass(frozen=True)
class Seed:
    """A GM's ``{"t": "seed", "id", "op": "reveal"}``: reveal the room's open dice seed now."""

    id: str
    op: str


@dataclass(frozen=True)
class Reveal:
    id: str
    seq: int


@dataclass(frozen=True)
class Resource:
    id: str
    name: str
    op: str
    n: int
    participant: str | None


@dataclass(frozen=True)
class Ping:
    id: str


# -- the GM's campaign-management frames (relay.core.membership handles them) --------------------------

#: The longest reason a GM may give for removing a participant.
MAX_REASON = 200


@dataclass(frozen=True)
class Rename:
    id: str
    participant: str
    name: str


@dataclass(frozen=True)
class Merge:
    id: str
    participant: str  # folded away
    into: str  # stays


@dataclass(frozen=True)
class Kick:
    id: str
    participant: str
    reason: str | None


@dataclass(frozen=True)
class Invites:
    id: str
    rotate: bool


@dataclass(frozen=True)
class Archive:
    id: str


ManageFrame = Rename | Merge | Kick | Invites | Archive


def _participant(raw: Mapping[str, Any], key: str, rid: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value or len(value) > MAX_NAME:
        raise FrameError("bad_frame", f"The frame's {key!r} must be a participant id string.", rid)
    return value


def _parse_manage(kind: str, raw: Mapping[str, Any], rid: str) -> ManageFrame:
    """One management frame (its ``id`` already checked), or ``FrameError``."""
    if kind == "rename":
        name = raw.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
            raise FrameError("bad_frame", f"A rename's 'name' must be 1 to {MAX_NAME} characters.", rid)
        return Rename(rid, _participant(raw, "participant", rid), name.strip())
    if kind == "merge":
        return Merge(rid, _participant(raw, "participant", rid), _participant(raw, "into", rid))
    if kind == "kick":
        reason = raw.get("reason")
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON):
            raise FrameError(
                "bad_frame", f"A kick's 'reason' must be a string of at most {MAX_REASON} characters.", rid
            )
        return Kick(rid, _participant(raw, "participant", rid), reason.strip() or None if reason else None)
    if kind == "invites":
        rotate = raw.get("rotate", False)
        if not isinstance(rotate, bool):
            raise FrameError("bad_frame", "An invites frame's 'rotate' must be true or false.", rid)
        return Invites(rid, rotate)
    return Archive(rid)


Frame: TypeAlias = "Hello | Roll | Reveal | Resource | Ping | Seed | Witness | ManageFrame"


# msgspec's compiled encoder writes the bytes ``msgpack.packb(frame, use_bin_type=True)`` does (keys in
# their order, shortest ints, str as str, bytes as bin) in a fifth of the time: packb sets up a packer on
# every call, and every ack, error and welcome passes here.
_encode = msgspec.msgpack.Encoder().encode


def encode(value: Any) -> bytes:
    """One server frame (or any value of one) as MessagePack, its maps' keys in their order (str as str,
    bytes as bin)."""
    return _encode(value)


def with_fields(encoded: bytes, count: int, fields: bytes) -> bytes:
    """The encoded map ``encoded`` with ``count`` more key/value pairs (``fields``, encoded) at its end:
    the same bytes as encoding the map with those keys added last, without encoding it again."""
    head = encoded[0]
    if 0x80 <= head <= 0x8F:
        size, start = head & 0x0F, 1
    elif head == 0xDE:
        size, start = int.from_bytes(encoded[1:3], "big"), 3
    elif head == 0xDF:
        size, start = int.from_bytes(encoded[1:5], "big"), 5
    else:
        raise ValueError("not an encoded MessagePack map")
    size += count
    if size < 16:
        header = bytes((0x80 | size,))
    elif size < 1 << 16:
        header = b"\xde" + size.to_bytes(2, "big")
    else:
        header = b"\xdf" + size.to_bytes(4, "big")
    return header + encoded[start:] + fields


def framed(payload: bytes) -> bytes:
    """``payload`` as one unmasked, unfragmented binary WebSocket frame (RFC 6455 §5.2), server to client.

    Framing once per encoded event lets every socket of an audience share the same frame bytes.
    """
    n = len(payload)
    if n < 126:
        header = bytes((0x82, n))
    elif n < 1 << 16:
        header = bytes((0x82, 126)) + n.to_bytes(2, "big")
    else:
        header = bytes((0x82, 127)) + n.to_bytes(8, "big")
    return header + payload


def event_values(value: Any) -> Any:
    """``value`` as an event may hold it (spec/signing.md): every float written as a decimal string, and
    anything canonical MessagePack cannot hold refused (``canonical.CanonicalError``): a map key that is not
    a string, a set, a date, any type but the ones it writes as themselves.

    The rules core keeps a fraction that ``/`` makes in a dice formula as a float (both VTTs keep it as
    a JavaScript number); on the wire it is the string JavaScript's ``String(n)`` would print, which
    ``Number(s)`` or ``float(s)`` reads back exactly. Returns ``value`` itself when it holds no float,
    which is almost every roll: it is looked through once, without copying, before anything is rebuilt.

    The room passes every roll's intent and result through here as it makes the record, before anything
    is stored, so a record is canonical from the start and signing each audience form of it needs no walk
    of its own (``signing.encode_canonical``); renderings for the VTTs pass here too.
    """
    return _rewritten(value) if holds_float(value) else value


def _rewritten(value: Any) -> Any:
    kind = type(value)
    if kind is float:
        return _js_decimal(value)
    if kind is dict:
        return {key: _rewritten(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [_rewritten(item) for item in value]
    return value


def _js_decimal(number: float) -> str:
    """JavaScript's ``String(number)``: Python's shortest repr, with JavaScript's switch to exponents."""
    if not math.isfinite(number):
        raise ValueError(f"a number that is not finite: {number!r}")
    text = repr(number)
    if "e" not in text:
        return text[:-2] if text.endswith(".0") else text
    mantissa, exponent = text.split("e")
    power = int(exponent)
    if -7 < power < 21:  # JavaScript writes these without an exponent
        return format(decimal.Decimal(text), "f")
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


def error_frame(code: str, message: str, request_id: str | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"t": "error", "code": code, "message": message}
    if request_id is not None:
        frame["id"] = request_id
    return frame


def _ext_refused(code: int, data: bytes) -> Any:  # noqa: ARG001 (msgpack's ext_hook signature)
    raise FrameError("bad_frame", "Frames may not hold MessagePack extension types.")


def decode(data: bytes | str) -> dict[str, Any]:
    """The frame's map, or ``FrameError`` for text frames, bad MessagePack and non-maps."""
    if isinstance(data, str):
        raise FrameError("bad_frame", "Frames must be binary MessagePack, not text.")
    try:
        value = msgpack.unpackb(data, raw=False, strict_map_key=True, ext_hook=_ext_refused, timestamp=0)
    except FrameError:
        raise
    except Exception as exc:
        raise FrameError("bad_frame", "The frame is not valid MessagePack.") from exc
    if not isinstance(value, dict):
        raise FrameError("bad_frame", "A frame must be a MessagePack map with a 't' field.")
    return value


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _plain(value: object, depth: int = 0) -> bool:
    """True for data an intent may hold: maps with string keys, lists, strings, numbers, booleans, nil."""
    if depth > MAX_DEPTH:
        return False
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list):
        return all(_plain(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


def _request_id(raw: Mapping[str, Any], limits: Limits) -> str:
    rid = raw.get("id")
    if not isinstance(rid, str) or not rid:
        raise FrameError("bad_frame", "The frame needs an 'id': a non-empty string naming this request.")
    if len(rid) > limits.max_request_id:
        # The id is too long to echo back whole; echo nothing rather than a truncated key.
        raise FrameError("bad_frame", f"The 'id' may be at most {limits.max_request_id} characters long.")
    return rid


def _parse_hello(raw: Mapping[str, Any]) -> Hello:
    v = raw.get("v")
    if not _is_int(v) or v != VERSION:
        raise FrameError("bad_frame", f"The hello must say 'v': {VERSION}, the protocol version.")
    token = raw.get("token")
    if not isinstance(token, str) or not token:
        raise FrameError("unauthorized", "The hello needs a 'token' string.")
    name = raw.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME):
        raise FrameError(
            "bad_frame", f"The hello's 'name' must be a non-empty string of at most {MAX_NAME} chars."
        )
    resume = raw.get("resume")
    parsed_resume = None
    if resume is not None:
        if not isinstance(resume, dict):
            raise FrameError("bad_frame", "The hello's 'resume' must be a map with 'epoch' and 'seq'.")
        epoch, seq = resume.get("epoch"), resume.get("seq")
        if not isinstance(epoch, str) or not _is_int(seq) or seq < 0:
            raise FrameError(
                "bad_frame", "The hello's 'resume' needs 'epoch' (a string) and 'seq' (an integer ≥ 0)."
            )
        parsed_resume = Resume(epoch, seq)
    formats = raw.get("formats")
    parsed_formats: frozenset[str] = frozenset()
    if formats is not None:
        if not isinstance(formats, list) or not all(f in FORMATS for f in formats):
            raise FrameError("bad_frame", f"The hello's 'formats' must be a list of: {', '.join(FORMATS)}.")
        parsed_formats = frozenset(formats)
    witness = raw.get("witness", False)
    if not isinstance(witness, bool):
        raise FrameError("bad_frame", "The hello's 'witness' must be true or false.")
    return Hello(
        token, name.strip() if isinstance(name, str) else None, parsed_resume, parsed_formats, witness
    )


def _parse_roll(raw: Mapping[str, Any], rid: str, limits: Limits) -> Roll:
    intent = raw.get("intent")
    if not isinstance(intent, dict):
        raise FrameError("bad_frame", "A roll needs an 'intent' map (see the rules contract).", rid)
    if not _plain(intent):
        raise FrameError(
            "bad_frame", "The roll's 'intent' may hold only maps, lists, strings, numbers and booleans.", rid
        )
    visibility = raw.get("visibility")
    if visibility not in VISIBILITIES:
        raise FrameError(
            "bad_frame", f"A roll's 'visibility' must be one of: {', '.join(VISIBILITIES)}.", rid
        )
    label = raw.get("label")
    if label is not None:
        if not isinstance(label, str):
            raise FrameError("bad_frame", "A roll's 'label' must be a string.", rid)
        if len(label) > limits.max_label:
            raise FrameError(
                "bad_frame", f"A roll's 'label' may be at most {limits.max_label} characters.", rid
            )
    seed = raw.get("seed")
    if seed is not None and not (isinstance(seed, bytes) and SEED_MIN <= len(seed) <= SEED_MAX):
        raise FrameError(
            "bad_frame", f"A roll's 'seed' must be {SEED_MIN} to {SEED_MAX} bytes (binary), if sent.", rid
        )
    return Roll(rid, intent, visibility, label, seed)


def _parse_reveal(raw: Mapping[str, Any], rid: str) -> Reveal:
    seq = raw.get("seq")
    if not _is_int(seq) or seq < 1:
        raise FrameError(
            "bad_frame", "A reveal needs 'seq': the positive sequence number of a sealed roll.", rid
        )
    return Reveal(rid, seq)


def _parse_resource(raw: Mapping[str, Any], rid: str) -> Resource:
    name = raw.get("name")
    if name not in RESOURCES:
        raise FrameError(
            "bad_frame", f"A resource frame's 'name' must be one of: {', '.join(RESOURCES)}.", rid
        )
    op = raw.get("op")
    if op not in RESOURCE_OPS:
        raise FrameError(
            "bad_frame", f"A resource frame's 'op' must be one of: {', '.join(RESOURCE_OPS)}.", rid
        )
    n = raw.get("n")
    if not _is_int(n) or n < 0:
        raise FrameError("bad_frame", "A resource frame's 'n' must be an integer ≥ 0.", rid)
    participant = raw.get("participant")
    if participant is not None and (not isinstance(participant, str) or not participant):
        raise FrameError(
            "bad_frame", "A resource frame's 'participant' must be a participant id string.", rid
        )
    if name == "fear" and participant is not None:
        raise FrameError("bad_frame", "Fear belongs to the room; leave 'participant' out for fear.", rid)
    return Resource(rid, name, op, n, participant)


def parse(data: bytes | str, limits: Limits) -> Frame:
    """Decode and validate one client frame."""
    raw = decode(data)
    kind = raw.get("t")
    if kind == "hello":
        return _parse_hello(raw)
    if kind not in ("roll", "reveal", "resource", "ping", "seed", "witness", *MANAGE_TYPES):
        rid = raw.get("id")
        known = isinstance(rid, str) and 0 < len(rid) <= limits.max_request_id
        shown = repr(kind)[:40] if isinstance(kind, str) else "missing"
        raise FrameError(
            "bad_frame",
            f"Unknown frame type {shown}; the types are hello, roll, reveal, resource, ping, seed, witness, "
            f"{', '.join(MANAGE_TYPES)}.",
            rid if known else None,
        )
    rid = _request_id(raw, limits)
    if kind == "roll":
        return _parse_roll(raw, rid, limits)
    if kind == "reveal":
        return _parse_reveal(raw, rid)
    if kind == "resource":
        return _parse_resource(raw, rid)
    if kind in MANAGE_TYPES:
        return _parse_manage(kind, raw, rid)
    if kind == "witness":
        pending, value = raw.get("pending"), raw.get("value")
        if not _is_int(pending) or pending < 1:
            raise FrameError("bad_frame", "A witness frame needs 'pending': the seq of a pending event.", rid)
        if not (isinstance(value, bytes) and SEED_MIN <= len(value) <= SEED_MAX):
            raise FrameError("bad_frame", f"A witness's 'value' must be {SEED_MIN} to {SEED_MAX} bytes.", rid)
        return Witness(rid, pending, value)
    if kind == "seed":
        if raw.get("op") != "reveal":
            raise FrameError("bad_frame", "A seed frame's 'op' must be \"reveal\".", rid)
        return Seed(rid, "reveal")
    return Ping(rid)
