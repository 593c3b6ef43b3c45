"""A second implementation of spec/fairness.md, written from the spec alone, for cross-checking the relay.

Nothing here imports the server or the rules core: the canonical encoding is the spec-only one of
``tests/spec_signing.py``, and the rest is stdlib ``hashlib`` and ``hmac`` as the spec words it. It cannot
run the rules core, so it checks everything of a roll but that its result follows from its draws: the
commits, the seed's place in the log, the pending, and every draw recomputed from the seed and transcript.
It holds the relay to the spec and to the relay's two documented differences from it that a verifier sees
(docs/fairness.md): the server's nonce of a roll with nothing else to vary it, and a seed abandoned unrevealed
when the next one is committed while it is open (a room moved without its secret).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from tests.spec_signing import encode as canonical

TWO_64 = 2**64


def seed_commit(room: str, n: int, seed: bytes) -> str:
    return hashlib.sha256(
        b"tablerelay-seed-v1\x00" + room.encode() + b"\x00" + struct.pack(">Q", n) + seed
    ).hexdigest()


def pending_commit(intent: Any, label: Any, nonce: bytes) -> str:
    body = canonical({"intent": intent, "label": label, "nonce": nonce})
    return hashlib.sha256(b"tablerelay-pending-v1\x00" + body).hexdigest()


def transcript(room: str, event: Mapping[str, Any]) -> dict[str, Any]:
    """The transcript map of a roll, from its full event."""
    fair = event["fair"]
    return {
        "room": room,
        "n": fair["n"],
        "roller": event["actor"]["id"],
        "visibility": event["visibility"],
        "intent": event["intent"],
        "label": event.get("label"),
        "seed": fair["seed"],
        "pending": fair["pending"],
        "nonce": fair["nonce"],
        "witnesses": fair["witnesses"],
    }


def key(seed: bytes, script: Mapping[str, Any]) -> bytes:
    return hmac.new(seed, b"tablerelay-fair-v1\x00" + canonical(script), hashlib.sha256).digest()


def words(k: bytes) -> Iterator[int]:
    j = 0
    while True:
        block = hmac.new(k, b"faces" + struct.pack(">I", j), hashlib.sha256).digest()
        yield from struct.unpack(">QQQQ", block)
        j += 1


def die(stream: Iterator[int], faces: int) -> int:
    assert 1 <= faces <= TWO_64
    while True:
        w = next(stream)
        if w < TWO_64 - (TWO_64 % faces):
            return 1 + (w % faces)


def recompute(seed: bytes, script: Mapping[str, Any], faces: Iterable[int]) -> list[list[int]]:
    """``[[faces, value], …]``: the dice of those faces, in that order, that seed and transcript give."""
    stream = words(key(seed, script))
    return [[f, die(stream, f)] for f in faces]


def draws_match(seed: bytes, room: str, event: Mapping[str, Any]) -> bool:
    draws = event["fair"]["draws"]
    return recompute(seed, transcript(room, event), [f for f, _ in draws]) == [list(d) for d in draws]


def verdicts(events: Iterable[Mapping[str, Any]], room: str) -> dict[int, str]:
    """Each roll's verdict (``fair``, ``unwitnessed``, ``awaiting seed``, ``sealed``, ``failed``) by seq,
    and ``failed`` for a pending no roll names or a seed event out of order or not matching its commit."""
    log = sorted((e for e in events if "kind" in e and "seq" in e), key=lambda e: e["seq"])
    by_seq = {e["seq"]: e for e in log}
    out: dict[int, str] = {}
    commit_at: dict[int, int] = {}
    reveal_at: dict[int, int] = {}
    abandoned_at: dict[int, int] = {}  # n -> the next seed's commit, made while n was open
    good_seed: dict[int, bytes] = {}
    last, open_ = 0, False
    for e in log:
        if e["kind"] == "seed_commit":
            if e["n"] != last + 1 or e["n"] in commit_at:
                out[e["seq"]] = "failed"
            elif open_:
                abandoned_at[last] = e["seq"]  # docs/fairness.md, difference (7): its rolls await it for good
            if e["n"] not in commit_at:
                commit_at[e["n"]], last, open_ = e["seq"], e["n"], True
        elif e["kind"] == "seed_reveal":
            n = e["n"]
            if n in reveal_at:
                out[e["seq"]] = "failed"
                continue
            reveal_at[n] = e["seq"]
            if n == last:
                open_ = False
            ok = n in commit_at and isinstance(e["seed"], bytes) and len(e["seed"]) == 32
            if ok and seed_commit(room, n, e["seed"]) == by_seq[commit_at[n]]["commit"]:
                good_seed[n] = e["seed"]
            else:
                out[e["seq"]] = "failed"
    used: set[int] = set()
    for e in log:
        if e["kind"] == "roll":
            out[e["seq"]] = _roll(e, room, by_seq, (commit_at, reveal_at, abandoned_at), good_seed, used)
    named = {
        e["fair"].get("pending") for e in log if e["kind"] == "roll" and isinstance(e.get("fair"), Mapping)
    }
    for e in log:
        if e["kind"] == "pending" and e["seq"] not in named:  # every pending is followed by a roll naming it
            out[e["seq"]] = "failed"
    return out


def _contribution_ok(value: Any) -> bool:
    return isinstance(value, bytes) and 16 <= len(value) <= 64


def _roll(
    e: Mapping[str, Any],
    room: str,
    by_seq: Mapping[int, Mapping[str, Any]],
    seed_events: tuple[Mapping[int, int], Mapping[int, int], Mapping[int, int]],
    good_seed: Mapping[int, bytes],
    used: set[int],
) -> str:
    commit_at, reveal_at, abandoned_at = seed_events
    fair = e.get("fair")
    if fair is None and "fair" not in e and not any(at < e["seq"] for at in commit_at.values()):
        return "unwitnessed"  # a roll from before the room's first seed: docs/fairness.md, difference (6)
    if not isinstance(fair, Mapping):
        return "failed"
    seq, n, p, roller = e["seq"], fair["n"], fair["pending"], e["actor"]["id"]
    # The seed open when the roll was made: committed before it, neither revealed nor abandoned before it.
    if commit_at.get(n, seq + 1) > seq or min(reveal_at.get(n, seq + 1), abandoned_at.get(n, seq + 1)) < seq:
        return "failed"
    witnesses = fair["witnesses"]
    ids = [pid.encode() for pid, _ in witnesses]
    if ids != sorted(set(ids)) or not all(_contribution_ok(v) for _, v in witnesses):
        return "failed"
    full = "result" in e
    if p is None:
        if witnesses:
            return "failed"
        # The one addition to the spec (docs/fairness.md): a roll with no pending and no roller seed carries
        # a 32-byte nonce of the server's, so the same intent on the same seed does not repeat its dice.
        nonce = fair["nonce"] if full else None
        if nonce is not None and (fair["seed"] is not None or not _nonce_ok(nonce)):
            return "failed"
    else:
        pending = by_seq.get(p)
        if pending is None or pending["kind"] != "pending" or p >= seq or p in used:
            return "failed"
        used.add(p)
        if (pending["roller"], pending["visibility"], pending["n"]) != (roller, e["visibility"], n):
            return "failed"
        if commit_at[n] > p or any(pid not in pending["asked"] for pid, _ in witnesses):
            return "failed"
        if full:
            nonce = fair["nonce"]
            if fair["seed"] is not None or not _nonce_ok(nonce):
                return "failed"
            if pending_commit(e["intent"], e.get("label"), nonce) != pending["commit"]:
                return "failed"
    if not full:
        return "sealed"
    if fair["seed"] is not None and not _contribution_ok(fair["seed"]):
        return "failed"
    if n in reveal_at and n not in good_seed:
        return "failed"
    if n not in good_seed:
        return "awaiting seed"
    if not draws_match(good_seed[n], room, e):
        return "failed"
    gm = e["actor"].get("role") == "gm"
    outside = (fair["seed"] is not None and not gm) or any(pid != roller or not gm for pid, _ in witnesses)
    return "fair" if outside else "unwitnessed"


def _nonce_ok(nonce: Any) -> bool:
    return isinstance(nonce, bytes) and len(nonce) == 32
