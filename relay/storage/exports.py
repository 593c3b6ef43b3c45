"""Room exports and their offline check: ``tablerelay room export`` and ``tablerelay verify``.

An export is a header, then the room's events in seq order, each signed in the form anyone outside every
hidden roll's audience may see now (a spectator's view: hidden rolls not yet revealed stay sealed, so an
export can be published without giving away a secret roll). The header names the room and carries the
key set the events were signed with.

Two encodings of the same objects:

- ``jsonl``: one JSON object per line. JSON has no bytes, so a bytes value is written ``{"$bin": BASE64}``
  and a map key that starts with ``$`` gets one more ``$`` in front (``"$x"`` is written ``"$$x"``), which
  keeps any map a client put in an intent apart from encoded bytes.
- ``msgpack``: the objects as a stream of MessagePack maps, bytes as bin.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import msgpack

from relay.core.info import RoomInfo
from relay.core.state import RoomState
from relay.core.visibility import audience
from relay.trust.forms import Forms
from relay.trust.signing import Keyring, SigningKeyError, check, public_keys

FORMATS = ("jsonl", "msgpack")
HEADER = "tablerelay-room-export"
VERSION = 1


class ExportError(Exception):
    """An export file that cannot be read; the message says where and why."""


#: What an export's events are: ``public`` (as anyone outside every hidden roll sees them now) or
#: ``stored`` (every event as the log holds it, hidden rolls and their nonces included: a GM's backup,
#: and what ``tablerelay room import`` takes).
FORMS = ("public", "stored")
#: Stored fields an export leaves out: the rules core's own numbers, kept beside ``result`` only when a
#: dice formula made a fraction, are floats, which no signed event may hold (spec/signing.md).
UNEXPORTED = ("rules_result",)
#: How deep an entry's maps and lists may nest. The deepest event the server writes is a dice roll of groups
#: nested as deep as a formula may (32 levels), about 130; what reads an entry (the checks, the canonical
#: encoding, JSON's own decoder) recurses, and Python's stack is about 1,000 calls deep.
MAX_NESTING = 256


@dataclass(frozen=True)
class Export:
    room: dict[str, Any]
    keys: list[dict[str, Any]]
    events: list[dict[str, Any]]
    form: str = "public"
    #: The room's last seq as the header gives it; ``None`` in exports written before the header had it.
    last_seq: int | None = None
    #: What a stored export made ``--with-secrets`` carries beside the events (``relay.ops.room_move``):
    #: the room's dice seeds and its open witnessed rolls' secrets. ``None`` in every other export.
    secrets: dict[str, Any] | None = None


def header(
    info: RoomInfo,
    keyring: Keyring,
    last_seq: int,
    form: str = "public",
    secrets: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The export's first entry. ``seq`` is the room's last seq the export runs to: without it, a file cut
    short at an entry's end (a full disk, a copy stopped part way) would read as a shorter room.
    ``secrets`` (a stored export's only) are the room's secrets a move carries, unsigned: the import holds
    each to what the signed events commit to."""
    head: dict[str, Any] = {
        "t": HEADER,
        "v": VERSION,
        "seq": last_seq,
        "room": {
            "id": info.id,
            "name": info.name,
            "epoch": info.epoch,
            "created": info.created,
            "fear_max": info.fear_max,
            "hope_max": info.hope_max,
        },
        "keys": keyring.jwks()["keys"],
    }
    if form != "public":
        head["form"] = form
    if secrets is not None:
        if form != "stored":
            raise ValueError("only a stored export carries the room's secrets")
        head["secrets"] = dict(secrets)
    return head


def stored_events(
    records: Iterable[Mapping[str, Any]], info: RoomInfo, keyring: Keyring
) -> Iterator[dict[str, Any]]:
    """Every record as stored (less ``UNEXPORTED``), each signed with the current key like an event."""
    for record in records:
        event = {key: value for key, value in record.items() if key not in UNEXPORTED}
        yield {**event, "kid": keyring.kid, "sig": keyring.sign(event, info.id)}


def public_events(
    records: Sequence[Mapping[str, Any]], info: RoomInfo, keyring: Keyring
) -> Iterator[dict[str, Any]]:
    """The stored ``records`` (all of a room's, in order) as a spectator would see them now, signed."""
    state = RoomState()
    for record in records:
        state.apply(record)
    forms = Forms(info.id, keyring, capacity=1)
    for record in records:
        yield forms.frame(record, audience(record, state, "", "spectator"), state)


# -- encodings -----------------------------------------------------------------------------------------


def _to_json(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$bin": base64.b64encode(value).decode()}
    if isinstance(value, Mapping):
        return {("$" + k if k.startswith("$") else k): _to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get("$bin"), str):
            try:
                return base64.b64decode(value["$bin"], validate=True)
            except ValueError as exc:
                raise ExportError("a '$bin' value is not base64") from exc
        return {(k[1:] if k.startswith("$") else k): _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def write(out: IO[bytes], fmt: str, head: Mapping[str, Any], events: Iterable[Mapping[str, Any]]) -> int:
    """Write ``head`` and ``events`` in ``fmt``; the number of events written."""
    count = 0
    for i, item in enumerate((head, *events)):
        if fmt == "jsonl":
            out.write(json.dumps(_to_json(item), ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
        else:
            out.write(msgpack.packb(item, use_bin_type=True))
        count = i
    return count


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether maps and lists in ``value`` nest more than ``limit`` deep, found without recursing."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _too_deep(where: str) -> ExportError:
    # Said alike whether this module's walk, JSON's decoder or MessagePack's found it (both go far deeper).
    return ExportError(f"{where} nests deeper than {MAX_NESTING} levels: no event does")


def read(data: bytes) -> Export:
    """Parse an export in either encoding (told apart by its first byte: ``{`` starts JSON)."""
    items: list[Any]
    if data.lstrip()[:1] == b"{":
        items = []
        lines = data.splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                parsed = json.loads(line)
            except RecursionError as exc:
                raise _too_deep(f"line {number}") from exc
            except ValueError as exc:
                if number == len(lines) and not data.endswith(b"\n"):
                    # The export ends every line with a newline: a last line without one was cut.
                    raise ExportError(f"line {number} ends part way: the file was cut short") from exc
                raise ExportError(f"line {number} is not JSON: {exc}") from exc
            if _nests_deeper(parsed, MAX_NESTING):
                raise _too_deep(f"line {number}")
            items.append(_from_json(parsed))
    else:
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=True, timestamp=0)
        unpacker.feed(data)
        items = []
        try:
            items.extend(unpacker)
        except msgpack.StackError as exc:  # MessagePack's own limit, far past MAX_NESTING
            raise _too_deep(f"entry {len(items) + 1}") from exc
        except Exception as exc:
            raise ExportError(f"the file is neither JSON Lines nor a MessagePack stream: {exc}") from exc
        # The unpacker stops quietly at an entry it has only part of: the last one, when the file was cut.
        if unpacker.tell() != len(data):
            raise ExportError(
                f"the file ends inside entry {len(items) + 1}, at byte {len(data):,}: it was cut short"
            )
        for number, item in enumerate(items, 1):
            if _nests_deeper(item, MAX_NESTING):
                raise _too_deep(f"entry {number}")
    if not items:
        raise ExportError("the file is empty")
    head = items[0]
    if not isinstance(head, dict) or head.get("t") != HEADER:
        raise ExportError(f"the file does not start with a '{HEADER}' header")
    room = head.get("room")
    if not isinstance(room, dict) or not isinstance(room.get("id"), str):
        raise ExportError("the header names no room id")
    keys = head.get("keys")
    if not isinstance(keys, list):
        raise ExportError("the header has no key list")
    events = items[1:]
    for i, event in enumerate(events, 2):
        if not isinstance(event, dict) or not isinstance(event.get("seq"), int):
            raise ExportError(f"entry {i} is not an event (a map with a seq)")
    last_seq = head.get("seq")
    if last_seq is not None and (type(last_seq) is not int or last_seq < 0):
        raise ExportError(f"the header's seq {last_seq!r} is not a count of events")
    form = head.get("form", "public")
    if form not in FORMS:
        raise ExportError(f"the header's form {form!r} is not one of {', '.join(FORMS)}")
    secrets = head.get("secrets")
    if secrets is not None and (form != "stored" or not isinstance(secrets, dict)):
        raise ExportError("the header's secrets are not a map in a stored export")
    return Export(room, keys, events, form, last_seq, secrets)


# -- checking ------------------------------------------------------------------------------------------


def _events(first: int, last: int) -> str:
    return f"event {first} is" if first == last else f"events {first}–{last} are"


def revealed_bodies(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``events`` with each revealed roll's placeholder replaced by its full event, from the blob its reveal
    published (a public export shows a hidden roll only so); a blob that does not decode leaves the
    placeholder as it was (``failures`` says why)."""
    bodies: dict[int, dict[str, Any]] = {}
    for event in events:
        if event.get("kind") == "reveal" and isinstance(event.get("blob"), bytes):
            try:
                body = msgpack.unpackb(event["blob"], raw=False, strict_map_key=False)
            except (ValueError, msgpack.UnpackException):
                continue
            if isinstance(body, dict) and isinstance(event.get("of"), int):
                bodies[event["of"]] = body
    out = []
    for event in events:
        seq = event.get("seq")
        body = bodies.get(seq) if isinstance(seq, int) and event.get("sealed") else None
        out.append({**event, **body} if body is not None else dict(event))
    return out


def failures(export: Export, keys: Any = None) -> list[str]:
    """A sentence for every event that does not verify and every hole in the seqs (at the start, between
    events, and at the end the header names); empty when all is well.

    ``keys`` is the key set to trust (the server's JWK Set); by default the header's own.
    """
    try:
        table = public_keys(export.keys if keys is None else keys)
    except SigningKeyError as exc:
        raise ExportError(str(exc)) from exc
    room_id = export.room["id"]
    out: list[str] = []
    expected = 1
    for event in export.events:
        seq = event["seq"]
        if seq != expected:
            out.append(
                f"{_events(expected, seq - 1)} missing"
                if seq > expected
                else f"event {seq} comes again, or out of order, after {expected - 1}"
            )
        expected = seq + 1
        reason = check(event, room_id, table)
        if reason is not None:
            out.append(f"event {seq} ({event.get('kind', '?')}) does not verify: {reason}")
    last = export.events[-1]["seq"] if export.events else 0
    if export.last_seq is not None and last < export.last_seq:
        ran = "has no events" if not export.events else f"ends at seq {last}"
        out.append(
            f"the file {ran}, but its header says the room ran to seq {export.last_seq}: "
            f"{_events(last + 1, export.last_seq)} cut off"
        )
    elif export.last_seq is not None and last > export.last_seq:
        out.append(f"the file runs to seq {last}, past the seq {export.last_seq} its header says it ends at")
    return out
