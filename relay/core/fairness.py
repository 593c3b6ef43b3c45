"""The fair dice derivation of spec/fairness.md, sans-I/O: seed and pending commitments, a roll's transcript,
its key, and the dice its key draws.

The room (``relay.core.room``) rolls with it; checking a room's rolls after the fact builds on it too
(``relay.trust.fairness``). Byte conventions are the spec's: ``canonical`` is the signing encoding
(``relay.core.canonical``), integers big-endian, ids UTF-8.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from relay.core.canonical import canonical, encode_canonical
from rules.rng import HmacSha256, KeyedDice

SEED_DOMAIN = b"tablerelay-seed-v1\x00"
PENDING_DOMAIN = b"tablerelay-pending-v1\x00"
FAIR_DOMAIN = b"tablerelay-fair-v1\x00"
#: A dice seed's length, and a roller seed's or witness value's bounds (bytes).
SEED_BYTES = 32
CONTRIBUTION_MIN = 16
CONTRIBUTION_MAX = 64


def seed_commit(room: str, n: int, seed: bytes) -> str:
    """A ``seed_commit`` event's ``commit``: hex SHA-256 of the domain, the room, ``u64be(n)``, the seed."""
    data = SEED_DOMAIN + room.encode() + b"\x00" + n.to_bytes(8, "big") + seed
    return hashlib.sha256(data).hexdigest()


def pending_commit(intent: Mapping[str, Any], label: str | None, nonce: bytes) -> str:
    """A ``pending`` event's ``commit``: binds the roll's intent and label before any witness answers."""
    data = PENDING_DOMAIN + canonical({"intent": intent, "label": label, "nonce": nonce})
    return hashlib.sha256(data).hexdigest()


def transcript(
    *,
    room: str,
    n: int,
    roller: str,
    visibility: str,
    intent: Mapping[str, Any],
    label: str | None,
    seed: bytes | None,
    pending: int | None,
    nonce: bytes | None,
    witnesses: Sequence[tuple[str, bytes]] | Sequence[list[Any]],
) -> dict[str, Any]:
    """The map a roll's key is derived from; ``witnesses`` in any order (``sorted_witnesses`` orders them)."""
    return {
        "room": room,
        "n": n,
        "roller": roller,
        "visibility": visibility,
        "intent": intent,
        "label": label,
        "seed": seed,
        "pending": pending,
        "nonce": nonce,
        # No witnesses (every unwitnessed roll): the empty list sorted_witnesses would make, without the walk.
        "witnesses": sorted_witnesses({str(pid): bytes(value) for pid, value in witnesses})
        if witnesses
        else [],
    }


def sorted_witnesses(values: Mapping[str, bytes]) -> list[list[Any]]:
    """``[[participant id, value], …]`` sorted by the ids' UTF-8 bytes, as a transcript and a fair map hold
    them."""
    return [[pid, values[pid]] for pid in sorted(values, key=lambda pid: pid.encode("utf-8"))]


def fair_map(roll: Mapping[str, Any], draws: Iterable[tuple[int, int]]) -> dict[str, Any]:
    """A roll's ``fair`` map (its full form) from its transcript and its dice's ``draws``."""
    return {
        "n": roll["n"],
        "seed": roll["seed"],
        "pending": roll["pending"],
        "nonce": roll["nonce"],
        "witnesses": [list(pair) for pair in roll["witnesses"]],
        "draws": [[faces, value] for faces, value in draws],
    }


def roll_key(seed: bytes, roll: Mapping[str, Any], *, checked: bool = False) -> bytes:
    """``K = HMAC(S_n, domain + canonical(transcript))``. ``checked``: the room's own transcript, whose
    values it checked as it made them (``protocol.event_values``), encoded without a second walk."""
    encoded = encode_canonical(roll) if checked else canonical(roll)
    return _seed_mac(bytes(seed)).digest(FAIR_DOMAIN + encoded)


# A seed serves up to ``seed_rolls`` rolls (250 by default): its HMAC pads are hashed once for them all, not
# once a roll. Only this process's memory holds them, as it holds the seeds themselves (the room's
# ``RoomSeeds``); the few seeds of rooms rolling now are kept, and the lot is dropped when it fills.
_SEED_MACS: dict[bytes, HmacSha256] = {}
_SEED_MACS_MAX = 256


def _seed_mac(seed: bytes) -> HmacSha256:
    mac = _SEED_MACS.get(seed)
    if mac is None:
        if len(_SEED_MACS) >= _SEED_MACS_MAX:
            _SEED_MACS.clear()
        mac = _SEED_MACS[seed] = HmacSha256(seed)
    return mac


def dice(seed: bytes, roll: Mapping[str, Any], *, checked: bool = False) -> KeyedDice:
    """The dice of the roll whose transcript is ``roll``, drawn from seed ``seed``'s stream."""
    return KeyedDice(roll_key(seed, roll, checked=checked))
