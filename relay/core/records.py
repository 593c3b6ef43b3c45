"""The shape of a stored record: what ``tablerelay room import`` holds each record of a file to.

The server trusts its own log. The fold, fan-out, the renderers and every welcome read a record's fields as
the room wrote them (``relay.core.room``, ``relay.core.membership``,
``relay.ops.campaign_parts.archive_record``). An imported room's records come from a file whose signatures
prove only that its header's key signed them, so before any of them is stored each is checked against what the
server itself writes: the fields of its kind, with their types, and for a hidden roll a seal that opens to the
roll itself. A record the server could not have written is refused with a sentence, instead of breaking the
room the first time someone joins it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgpack

from relay.core.claims import ROLES
from relay.core.fairness import SEED_BYTES
from relay.core.formats import RenderError, renderings
from relay.core.info import RoomInfo
from relay.core.protocol import FORMATS, VISIBILITIES
from relay.core.state import FoldError, RoomState
from relay.core.visibility import BODY_KEYS, NONCE_BYTES, verify

#: An imported roll must render in every format a client may ask for.
EVERY_FORMAT = frozenset(FORMATS)
#: SQLite's INTEGER is a signed 64-bit number; ``seq`` and ``ts`` are columns.
INT64 = 2**63


class RecordError(ValueError):
    """A record the server could not have written; the message says which field and why."""


Check = Callable[[Any], str | None]


def _int(value: Any) -> str | None:
    return None if type(value) is int and -INT64 <= value < INT64 else "is not a whole number"


def _count(value: Any) -> str | None:
    return None if type(value) is int and 0 <= value < INT64 else "is not a whole number from 0"


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) else "is not text"


def _id(value: Any) -> str | None:
    return None if isinstance(value, str) and value else "is empty or not text"


def _maybe(check: Check) -> Check:
    return lambda value: None if value is None else check(value)


def _one_of(*allowed: str) -> Check:
    return lambda value: None if value in allowed else f"is not one of {', '.join(allowed)}"


def _digest(value: Any) -> str | None:
    ok = isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    return None if ok else "is not a SHA-256 digest in lowercase hex"


def _seed(value: Any) -> str | None:
    return None if isinstance(value, bytes) and len(value) == SEED_BYTES else f"is not {SEED_BYTES} bytes"


def _ids(value: Any) -> str | None:
    ok = isinstance(value, list) and all(isinstance(v, str) and v for v in value)
    return None if ok else "is not a list of participant ids"


def _map(value: Any) -> str | None:
    return None if isinstance(value, dict) and all(isinstance(k, str) for k in value) else "is not a map"


def _holds(value: Any) -> str | None:
    ok = isinstance(value, dict) and all(
        k in ("fear", "hope") and _count(v) is None for k, v in value.items()
    )
    return None if ok else "is not a map of Fear and Hope to whole numbers"


def _member(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "is not a participant (a map of id, name and role)"
    for key, check in (("id", _id), ("name", _text), ("role", _one_of(*ROLES))):
        why = check(value.get(key))
        if why is not None:
            return f"has an {key} that {why}" if key == "id" else f"has a {key} that {why}"
    return None


#: Every record's fields (``relay.core.room.Room._record``); ``request`` is the client's request id, if any.
ENVELOPE: dict[str, Check] = {
    "seq": _count,
    "epoch": _text,
    "ts": _count,
    "kind": _text,
    "actor": _member,
    "visibility": _one_of(*VISIBILITIES),
}
OPTIONAL: dict[str, Check] = {"request": _maybe(_text)}
#: Each kind's own fields, as ``relay.core.room`` and ``relay.core.membership`` write them.
KINDS: dict[str, dict[str, Check]] = {
    "join": {"member": _member},
    "leave": {"member": _member},
    "roll": {"label": _maybe(_text), "intent": _map, "result": _map},
    "reveal": {"of": _count, "blob": lambda v: None if isinstance(v, bytes) else "is not bytes"},
    "resource": {
        "name": _one_of("fear", "hope"),
        "delta": _int,
        "value": _count,
        "cause": _maybe(_count),
    },
    "rename": {"member": _member, "was": _text},
    "merge": {"merged": _member, "into": _member, "hope": _maybe(_count)},
    "kick": {"member": _member, "reason": _maybe(_text)},
    "invites": {"generation": _count},
    "archive": {},
    # spec/fairness.md: a room's dice seeds, committed before use and revealed after, and a witnessed roll's
    # announcement (its ``visibility`` is the roll's: the event itself is public).
    "seed_commit": {"n": _count, "commit": _digest},
    "seed_reveal": {"n": _count, "seed": _seed},
    "pending": {"roller": _id, "n": _count, "asked": _ids, "commit": _digest},
}


#: A room's fields in an export's header (``relay.storage.exports.header``), as ``RoomInfo`` holds them.
ROOM: dict[str, Check] = {
    "id": _id,
    "name": _text,
    "epoch": _id,
    "created": _count,
    "fear_max": _count,
    "hope_max": _count,
}


def room_info(room: Mapping[str, Any]) -> RoomInfo:
    """The room an export's header names, or ``RecordError`` for a field missing or of another type."""
    for key, field_check in ROOM.items():
        _field(room, key, field_check)
    return RoomInfo(**{key: room[key] for key in ROOM})


def check(record: Mapping[str, Any]) -> None:
    """Raise ``RecordError`` unless ``record`` has the fields and types the server writes for its kind."""
    for key, field_check in ENVELOPE.items():
        _field(record, key, field_check)
    kind = record["kind"]
    fields = KINDS.get(kind)
    if fields is None:
        raise RecordError(f"its kind {kind!r} is not one of {', '.join(KINDS)}")
    for key, field_check in {**OPTIONAL, **fields}.items():
        _field(record, key, field_check, optional=key in OPTIONAL)
    if kind == "roll":
        _field(record, "fair", _map, optional=True)
        _seal(record)
    elif kind == "reveal":
        _field(record, "nonce", _nonce)
    elif kind == "resource" and record["name"] == "hope":
        _field(record, "participant", _id)
    elif kind == "pending":
        _field(record, "holds", _holds, optional=True)
    if kind not in ("roll", "pending") and record["visibility"] != "public":
        raise RecordError(f"a {kind} event is public, not {record['visibility']!r}")


def checked_fold(stored: Iterable[Mapping[str, Any]], render: bool = True) -> RoomState:
    """The room ``stored`` (all its records, in order) makes, folded as the server folds it, once each record
    passes ``check`` and agrees with those before it; ``RecordError`` with a sentence naming the event if not.

    Beyond ``check``: a reveal publishes the seal of the roll it names; epochs run in spans (a restore gives a
    room a new epoch, and the events before it keep theirs), never back to an earlier one; and with ``render``
    every roll has its Foundry and Roll20 renderings, which every client that asks gets.
    """
    state = RoomState()
    epochs: set[str] = set()
    epoch = None
    for record in stored:
        seq, kind = record.get("seq"), record.get("kind", "?")
        try:
            check(record)
        except RecordError as exc:
            raise RecordError(f"event {seq} ({kind}) is not one this server writes: {exc}") from exc
        if record["epoch"] != epoch:
            if record["epoch"] in epochs:
                raise RecordError(f"event {seq} goes back to the epoch of earlier events")
            epoch = record["epoch"]
            epochs.add(epoch)
        if kind == "reveal":
            opened = state.sealed.get(record["of"])
            if opened is not None and (opened.blob, opened.nonce) != (record["blob"], record["nonce"]):
                raise RecordError(f"event {seq} reveals another roll than the one at {record['of']}")
        try:
            state.apply(record)
        except FoldError as exc:
            raise RecordError(f"the events do not make a room: {exc}") from exc
        if kind == "roll" and render:
            try:
                renderings(record, EVERY_FORMAT, state.gm_ids(), strict=True)
            except RenderError as exc:
                raise RecordError(f"event {seq} (roll) is not one this server writes: {exc}") from exc
    return state


def _field(record: Mapping[str, Any], key: str, field_check: Check, optional: bool = False) -> None:
    if key not in record:
        if optional:
            return
        raise RecordError(f"it has no {key!r}")
    why = field_check(record[key])
    if why is not None:
        raise RecordError(f"its {key!r} {why}")


def _nonce(value: Any) -> str | None:
    if isinstance(value, bytes) and len(value) == NONCE_BYTES:
        return None
    return f"is not {NONCE_BYTES} bytes"


def _seal(record: Mapping[str, Any]) -> None:
    """A hidden roll's seal must open, by its commitment, to the roll's own body (what a reveal shows)."""
    sealed = record.get("sealed")
    if record["visibility"] == "public":
        if sealed is not None:
            raise RecordError("a public roll has a seal")
        return
    if not isinstance(sealed, dict):
        raise RecordError(f"a {record['visibility']} roll has no seal")
    blob, nonce, commitment = sealed.get("blob"), sealed.get("nonce"), sealed.get("commitment")
    if not isinstance(blob, bytes) or not isinstance(nonce, bytes) or not isinstance(commitment, str):
        raise RecordError("its seal is not a blob, a nonce and a commitment")
    if _nonce(nonce) is not None:
        raise RecordError(f"its seal's nonce is not {NONCE_BYTES} bytes")
    if not verify(nonce, blob, commitment):
        raise RecordError("its seal's commitment is not the hash of its nonce and blob")
    try:
        body = msgpack.unpackb(blob, raw=False)
    except Exception:  # msgpack raises a dozen kinds for bytes that are not MessagePack
        body = None
    if body != {key: record[key] for key in (*BODY_KEYS, "fair") if key in record}:
        raise RecordError("its seal does not hold the roll itself")
