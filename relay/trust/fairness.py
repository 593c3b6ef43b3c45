"""Provably fair rolls (spec/fairness.md): the check of a room's log, on the derivation the room rolls with.

Pure: no I/O, no clock, no randomness of its own. The derivation (commits, transcript, key, dice) is the
core's (``relay.core.fairness``: the room, under this layer, rolls with it), re-exported here with what a
verifier adds: a roll's transcript read back from its event, its ``fair`` map, and ``verify_fair``, which
recomputes every roll of a room's export. ``tests/spec_fairness.py`` is a second implementation, written
from the spec alone, that the tests hold both to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from relay.core.canonical import CanonicalError, canonical
from relay.core.fairness import (
    CONTRIBUTION_MAX,
    CONTRIBUTION_MIN,
    FAIR_DOMAIN,
    PENDING_DOMAIN,
    SEED_BYTES,
    SEED_DOMAIN,
    dice,
    fair_map,
    pending_commit,
    roll_key,
    seed_commit,
    sorted_witnesses,
    transcript,
)
from relay.core.protocol import event_values
from relay.core.visibility import NONCE_BYTES, SEALED_FAIR_KEYS
from rules import resolve
from rules.rng import WORD_SPACE, KeyedDice

__all__ = [
    "AWAITING",
    "CONTRIBUTION_MAX",
    "CONTRIBUTION_MIN",
    "EXPORT_HEADER",
    "FAILED",
    "FAIR",
    "FAIR_DOMAIN",
    "FAIR_KEYS",
    "NONCE_BYTES",
    "PENDING_DOMAIN",
    "SEALED",
    "SEED_BYTES",
    "SEED_DOMAIN",
    "UNWITNESSED",
    "VERDICTS",
    "Verdict",
    "dice",
    "event_transcript",
    "fair_map",
    "outside_contribution",
    "pending_commit",
    "roll_key",
    "seed_commit",
    "sorted_witnesses",
    "transcript",
    "verify_fair",
]

#: The keys of a roll's ``fair`` map in its full form.
FAIR_KEYS = ("n", "seed", "pending", "nonce", "witnesses", "draws")

FAIR = "fair"
UNWITNESSED = "unwitnessed"
AWAITING = "awaiting seed"
SEALED = "sealed"
FAILED = "failed"
VERDICTS = (FAIR, UNWITNESSED, AWAITING, SEALED, FAILED)
#: An export's first entry says so (``relay.storage.exports.HEADER``, a layer above this one).
EXPORT_HEADER = "tablerelay-room-export"


# -- the derivation (the core's, which the room rolls with) and what a verifier adds to it ---------------


def event_transcript(room: str, event: Mapping[str, Any]) -> dict[str, Any]:
    """The transcript of a roll from its full event (its ``fair`` map holds the pending's seq and nonce,
    so the pending event itself adds nothing). ``KeyError`` or ``TypeError`` on an event that is not one."""
    fair = event["fair"]
    return transcript(
        room=room,
        n=fair["n"],
        roller=event["actor"]["id"],
        visibility=event["visibility"],
        intent=event["intent"],
        label=event.get("label"),
        seed=fair["seed"],
        pending=fair["pending"],
        nonce=fair["nonce"],
        witnesses=fair["witnesses"],
    )


def outside_contribution(fair: Mapping[str, Any], roller: str, roller_is_gm: bool) -> bool:
    """Whether someone other than the operator's side contributed: a roller seed or witness value from a
    roller who is not a GM, or a witness value from anyone but the roller. A GM's own seed never counts (the
    GM may be the operator)."""
    if fair.get("seed") is not None and not roller_is_gm:
        return True
    return any(pid != roller or not roller_is_gm for pid, _ in fair.get("witnesses") or ())


# -- verdicts ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """One roll's verdict (or a failure found at a pending or seed event): ``verdict`` is one of
    ``VERDICTS``; ``reason`` says why in a sentence; ``witnesses`` counts the witness values the roll
    carries."""

    seq: int
    verdict: str
    reason: str
    witnesses: int = 0

    @property
    def failed(self) -> bool:
        return self.verdict == FAILED

    @property
    def text(self) -> str:
        """``"12  fair (2 witnesses): …"``, one line for a table of verdicts."""
        head = self.verdict
        if self.verdict == FAIR and self.witnesses:
            head += f" ({self.witnesses} witness{'' if self.witnesses == 1 else 'es'})"
        return f"{self.seq}  {head}: {self.reason}" if self.reason else f"{self.seq}  {head}"


class _Failure(Exception):
    """A check that failed; its message is the verdict's reason."""


#: The reason of a roll from before the room rolled fair dice.
BEFORE_FAIR_DICE = "made before the room's first dice seed (fair dice were off): nothing to check"


@dataclass
class _Seeds:
    """Where each dice seed was committed and revealed in the log, and what each reveal showed."""

    committed: dict[int, int]  # n -> seq of its seed_commit
    revealed: dict[int, int]  # n -> seq of its seed_reveal
    seeds: dict[int, bytes]  # n -> the revealed seed, when it matches its commit
    bad_reveal: dict[int, str]  # n -> why its reveal does not count
    abandoned: dict[int, int]  # n -> seq of the next seed's commit, made while n was open (unrevealed)


def verify_fair(events: Iterable[Mapping[str, Any]], room_id: str | None = None) -> dict[int, Verdict]:
    """Every roll's verdict in a room's log, by seq, with a failure for each pending or seed event that
    breaks the contract (spec/fairness.md, "Verifying a roll").

    ``events`` are the room's events as an export holds them, in any order (a stored export's full forms;
    in a public one, a sealed roll not yet revealed is a placeholder and gets ``sealed``). Items that are
    not events are skipped; without ``room_id``, an export's header among them names the room (``ValueError``
    when none does). Never raises on what an event holds: a malformed one is a ``failed`` verdict.
    """
    items = [e for e in events if isinstance(e, Mapping)]
    if room_id is None:
        room_id = _room_of(items)
    log = sorted(
        (e for e in items if isinstance(e.get("seq"), int) and "kind" in e),
        key=lambda e: int(e["seq"]),
    )
    out: dict[int, Verdict] = {}
    seeds = _seed_events(log, room_id, out)
    pendings = {int(e["seq"]): e for e in log if e["kind"] == "pending"}
    used: dict[int, int] = {}  # pending seq -> the roll that named it
    for event in log:
        if event["kind"] != "roll":
            continue
        seq = int(event["seq"])
        if "fair" not in event and not any(at < seq for at in seeds.committed.values()):
            # A room that rolled before its server turned fair dice on: nothing of these rolls can be shown.
            out[seq] = Verdict(seq, UNWITNESSED, BEFORE_FAIR_DICE)
            continue
        try:
            out[seq] = _check_roll(event, room_id, seeds, pendings, used)
        except _Failure as exc:
            out[seq] = Verdict(seq, FAILED, str(exc), _count(event))
        except (CanonicalError, ArithmeticError, AttributeError, KeyError, TypeError, ValueError) as exc:
            # A file can hold anything (a float read from JSON, a map where a list belongs): a verdict.
            out[seq] = Verdict(
                seq, FAILED, f"the roll is malformed ({type(exc).__name__}: {exc})", _count(event)
            )
    named = {_named_pending(e) for e in log if e["kind"] == "roll"}
    for seq in pendings:
        # A pending that a failed roll names was followed by its roll: the roll's verdict says what is wrong.
        if seq not in named and seq not in out:
            out[seq] = Verdict(seq, FAILED, "this pending roll was never made (no roll names it)")
    return dict(sorted(out.items()))


def _room_of(items: Iterable[Mapping[str, Any]]) -> str:
    """The room id an export's header gives (``relay.storage.exports.header``)."""
    for item in items:
        room = item.get("room")
        name = room.get("id") if isinstance(room, Mapping) else None
        if item.get("t") == EXPORT_HEADER and isinstance(name, str):
            return name
    raise ValueError(
        "name the room: its id is hashed into every commit and key, and no export header gives it"
    )


def _named_pending(event: Mapping[str, Any]) -> int | None:
    fair = event.get("fair")
    named = fair.get("pending") if isinstance(fair, Mapping) else None
    return named if isinstance(named, int) else None  # a malformed one fails its roll's own check


def _count(event: Mapping[str, Any]) -> int:
    fair = event.get("fair")
    witnesses = fair.get("witnesses") if isinstance(fair, Mapping) else None
    return len(witnesses) if isinstance(witnesses, list) else 0


def _seed_events(log: Sequence[Mapping[str, Any]], room: str, out: dict[int, Verdict]) -> _Seeds:
    """Walk the seed events in order; a failure for each that breaks the sequence or its commit."""
    found = _Seeds({}, {}, {}, {}, {})
    commits: dict[int, str] = {}
    current, is_open = 0, False
    for event in log:
        kind, seq = event["kind"], int(event["seq"])
        if kind not in ("seed_commit", "seed_reveal"):
            continue
        n = event.get("n")
        if type(n) is not int or not 0 <= n < 1 << 64:
            out[seq] = Verdict(seq, FAILED, f"this {kind} names no seed number (a u64)")
            continue
        if kind == "seed_commit":
            commit = event.get("commit")
            if n != current + 1:
                why = f"seed {n} is committed out of turn (the seed before it was {current})"
                out[seq] = Verdict(seq, FAILED, why)
            elif is_open:
                # Seed n - 1 is abandoned unrevealed, as a relay that imported the room without its secret
                # must (docs/fairness.md, "Where this differs", (7)): its rolls stay awaiting their seed.
                found.abandoned[current] = seq
            if n in found.committed:
                continue  # the first commit of a number is the one that binds it
            found.committed[n], current, is_open = seq, n, True
            commits[n] = commit if isinstance(commit, str) else ""
            continue
        seed = event.get("seed")
        if n in found.revealed:
            out[seq] = Verdict(seq, FAILED, f"seed {n} was already revealed at seq {found.revealed[n]}")
            continue
        found.revealed[n] = seq
        if n not in commits:
            reason = f"seed {n} is revealed at seq {seq} but was never committed"
        elif not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
            reason = f"seed {n}'s reveal at seq {seq} does not hold a {SEED_BYTES}-byte seed"
        elif seed_commit(room, n, seed) != commits[n]:  # public values: no secret to time
            reason = f"seed {n}'s reveal at seq {seq} does not match its commit at seq {found.committed[n]}"
        else:
            found.seeds[n] = seed
            if n == current:
                is_open = False
            continue
        found.bad_reveal[n] = reason
        out[seq] = Verdict(seq, FAILED, reason)
        if n == current:
            is_open = False
    return found


def _bytes_between(value: Any, low: int, high: int) -> bool:
    return isinstance(value, bytes) and low <= len(value) <= high


def _fair_fields(event: Mapping[str, Any], full: bool) -> Mapping[str, Any]:
    """The roll's ``fair`` map, its shape checked (every key of the full form when ``full``)."""
    fair = event.get("fair")
    if not isinstance(fair, Mapping):
        raise _Failure("the roll carries no 'fair' map: its dice follow from no committed seed")
    for key in FAIR_KEYS if full else SEALED_FAIR_KEYS:
        if key not in fair:
            raise _Failure(f"its 'fair' map has no {key!r}")
    if type(fair["n"]) is not int or (fair["pending"] is not None and type(fair["pending"]) is not int):
        raise _Failure("its 'fair' map's 'n' or 'pending' is not a whole number")
    witnesses = fair["witnesses"]
    if not isinstance(witnesses, list) or not all(
        isinstance(w, list | tuple) and len(w) == 2 and isinstance(w[0], str) for w in witnesses
    ):
        raise _Failure("its witnesses are not a list of [participant id, value] pairs")
    ids = [w[0].encode("utf-8") for w in witnesses]
    if ids != sorted(set(ids)):
        raise _Failure("its witnesses are not sorted by participant id, or one is listed twice")
    if not all(_bytes_between(w[1], CONTRIBUTION_MIN, CONTRIBUTION_MAX) for w in witnesses):
        raise _Failure("a witness value is not 16 to 64 bytes")
    if not full:
        return fair
    if fair["seed"] is not None and not _bytes_between(fair["seed"], CONTRIBUTION_MIN, CONTRIBUTION_MAX):
        raise _Failure("its roller seed is not 16 to 64 bytes")
    draws = fair["draws"]
    if not isinstance(draws, list) or not all(
        isinstance(d, list | tuple)
        and len(d) == 2
        and type(d[0]) is int
        and type(d[1]) is int
        and 1 <= d[1] <= d[0] <= WORD_SPACE
        for d in draws
    ):
        raise _Failure("its draws are not a list of [faces, value] with 1 <= value <= faces <= 2**64")
    return fair


def _check_seed_in_use(n: int, seq: int, pending: int | None, seeds: _Seeds) -> None:
    committed = seeds.committed.get(n)
    if committed is None or committed > seq:
        raise _Failure(f"it uses seed {n}, which was not committed before it")
    revealed = seeds.revealed.get(n)
    if revealed is not None and revealed < seq:
        if pending is not None and pending < revealed:
            raise _Failure(
                f"seed {n} was revealed at seq {revealed} while its pending at seq {pending} was open"
            )
        raise _Failure(f"it uses seed {n} after that seed's reveal at seq {revealed}")
    abandoned = seeds.abandoned.get(n)
    if abandoned is not None and abandoned < seq:
        raise _Failure(f"it uses seed {n} after seed {n + 1} was committed at seq {abandoned}, abandoning it")
    if pending is not None and committed > pending:
        raise _Failure(f"its pending at seq {pending} came before seed {n} was committed")


def _check_pending(
    event: Mapping[str, Any],
    fair: Mapping[str, Any],
    pendings: Mapping[int, Mapping[str, Any]],
    used: dict[int, int],
    full: bool,
) -> None:
    seq, at = int(event["seq"]), fair["pending"]
    if at is None:
        if fair["witnesses"]:
            raise _Failure("it names no pending, yet carries witnesses")
        if full and fair["nonce"] is not None:
            # The server's own nonce of a roll that had nothing else to vary its dice (docs/fairness.md).
            if fair["seed"] is not None:
                raise _Failure("it names no pending and carries a roller seed, yet carries a nonce")
            if not isinstance(fair["nonce"], bytes) or len(fair["nonce"]) != NONCE_BYTES:
                raise _Failure(f"its nonce is not {NONCE_BYTES} bytes")
        return
    pending = pendings.get(at)
    if pending is None or at >= seq:
        raise _Failure(f"it names a pending at seq {at}, and there is no pending event there before it")
    if at in used:
        raise _Failure(f"the pending at seq {at} was already used by the roll at seq {used[at]}")
    used[at] = seq
    roller = event["actor"]["id"]
    if pending.get("roller") != roller or pending.get("visibility") != event.get("visibility"):
        raise _Failure(f"its pending at seq {at} is for another roller or visibility")
    if pending.get("n") != fair["n"]:
        raise _Failure(f"its pending at seq {at} names seed {pending.get('n')}, the roll seed {fair['n']}")
    asked = pending.get("asked")
    if not isinstance(asked, list) or any(pid not in asked for pid, _ in fair["witnesses"]):
        raise _Failure(f"a witness value comes from someone its pending at seq {at} did not ask")
    if not full:
        return
    if fair["seed"] is not None:
        raise _Failure("a witnessed roll carries a roller seed (its transcript's seed is nil)")
    nonce = fair["nonce"]
    if not isinstance(nonce, bytes) or len(nonce) != NONCE_BYTES:
        raise _Failure(f"a witnessed roll's nonce is not {NONCE_BYTES} bytes")
    expected = pending_commit(event["intent"], event.get("label"), nonce)
    commit = pending.get("commit")
    if commit != expected:
        raise _Failure(f"its pending's commit (seq {at}) does not match its intent, label and nonce")


def _check_result(event: Mapping[str, Any], draws: Sequence[Sequence[int]]) -> None:
    """The rules core, given exactly ``draws``, asks for those dice and gives the stored result."""
    # A value v on a die of f faces is the word v - 1 (always kept, since v - 1 < f <= its limit).
    replay = KeyedDice.from_words(value - 1 for _, value in draws)
    try:
        result = event_values(resolve(event["intent"], rng=replay))
    except Exception as exc:  # a verifier reads what anyone wrote: any refusal is a verdict, not a crash
        raise _Failure(f"the rules core cannot resolve its intent from its draws ({exc})") from exc
    if replay.draws != [(faces, value) for faces, value in draws]:
        wanted = len(replay.draws)
        raise _Failure(f"the rules core draws other dice for its intent ({wanted} of {len(draws)} match)")
    try:
        same = canonical(result) == canonical(event.get("result"))
    except CanonicalError:
        same = False
    if not same:
        raise _Failure("the rules core resolving its intent from its draws gives another result")


def _check_stream(event: Mapping[str, Any], room: str, seed: bytes, draws: Sequence[Sequence[int]]) -> None:
    try:
        stream = dice(seed, event_transcript(room, event))
    except CanonicalError as exc:
        raise _Failure(f"its transcript has no canonical encoding ({exc})") from exc
    for i, (faces, value) in enumerate(draws, 1):
        got = stream.roll(faces)
        if got != value:
            raise _Failure(f"draw {i} is {value} on a d{faces}; the seed and transcript give {got}")


def _unrevealed(n: int, seeds: _Seeds) -> str:
    abandoned = seeds.abandoned.get(n)
    if abandoned is None:
        return f"seed {n} is not revealed yet"
    return (
        f"seed {n} was abandoned unrevealed (seed {n + 1} was committed at seq {abandoned} without its "
        "reveal, as after a move without its secret): these dice cannot be checked"
    )


def _check_roll(
    event: Mapping[str, Any],
    room: str,
    seeds: _Seeds,
    pendings: Mapping[int, Mapping[str, Any]],
    used: dict[int, int],
) -> Verdict:
    seq = int(event["seq"])
    actor = event.get("actor")
    if not isinstance(actor, Mapping) or not isinstance(actor.get("id"), str):
        raise _Failure("the roll names no roller")
    # A public export keeps a hidden roll not yet revealed as a placeholder: only its fair map's public
    # part can be checked until the reveal.
    full = "result" in event
    fair = _fair_fields(event, full)
    n = fair["n"]
    _check_seed_in_use(n, seq, fair["pending"], seeds)
    _check_pending(event, fair, pendings, used, full)
    count = len(fair["witnesses"])
    if not full:
        return Verdict(seq, SEALED, "a hidden roll not yet revealed", count)
    draws = fair["draws"]
    _check_result(event, draws)
    if n in seeds.bad_reveal:
        raise _Failure(seeds.bad_reveal[n])
    seed = seeds.seeds.get(n)
    if seed is None:
        return Verdict(seq, AWAITING, _unrevealed(n, seeds), count)
    _check_stream(event, room, seed, draws)
    if outside_contribution(fair, actor["id"], actor.get("role") == "gm"):
        who = f"{count} witness value{'' if count == 1 else 's'}" if count else "the roller's seed"
        return Verdict(seq, FAIR, f"recomputed from seed {n} and {who}", count)
    return Verdict(
        seq, UNWITNESSED, f"recomputed from seed {n}; no contribution from outside the server", count
    )
