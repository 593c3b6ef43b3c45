"""What a room's move between relays carries beside its events (``room export --stored --with-secrets``,
``room import``), and what an import does when the file does not carry it.

A room's open dice seed is in no event and no ordinary export before its reveal (spec/fairness.md), and a
room that has rolled always has one open. A stored export made ``--with-secrets`` carries, in its header,
what ``store copy`` carries between stores: every dice seed the store holds for the room and what its open
witnessed rolls keep (their nonces and frames). The import holds each to its commitment in the signed events
and stores it, so the room rolls on from the same seed and that seed's reveal matches.

Without them the open seed's secret stays behind for good. The importing relay does not draw a secret of its
own under the other relay's commitment (that seed's reveal would then fail it and every roll on it): it
abandons the seed, committing to the next one in an event appended at import, with a secret drawn and stored
now. The abandoned seed's rolls stay "awaiting seed"; every later roll verifies once its seed is revealed
(docs/fairness.md, "Where this differs", (7)).
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from relay.core.canonical import CanonicalError
from relay.core.info import RoomInfo
from relay.core.state import RoomState
from relay.ops.campaign_parts import OPERATOR
from relay.storage import stores
from relay.storage.base import EventLog, Record
from relay.storage.sqlite.db import READ_CHUNK, get_room_sync, kept_rolls_sync, read_sync, seeds_sync
from relay.trust.fairness import NONCE_BYTES, SEED_BYTES, pending_commit, seed_commit

#: What a kept roll holds (``relay.core.fair.kept``) beside what its pending event says, and of what type.
KEPT_TYPES: dict[str, type | tuple[type, ...]] = {
    "id": str,
    "intent": dict,
    "label": (str, type(None)),
    "seed": (bytes, type(None)),
    "nonce": bytes,
    "roller": dict,
    "asked": list,
    "opened": int,
    "values": dict,
    "closed": bool,
}


class ImportRefused(Exception):
    """An export that cannot be imported; the message is a sentence for the operator."""


# -- export ------------------------------------------------------------------------------------------------


def header_secrets(seeds: Mapping[int, bytes], kept: Sequence[Record], last_seq: int) -> dict[str, Any]:
    """The export header's ``secrets``: the seeds as ``[n, secret]`` pairs (an export's map keys are text),
    and what is kept for the pendings among the exported events."""
    return {
        "seeds": [[n, seeds[n]] for n in sorted(seeds)],
        "kept": sorted((k for k in kept if k["pending"] <= last_seq), key=lambda k: int(k["pending"])),
    }


def whole_room_sync(
    conn: sqlite3.Connection, room: str, with_secrets: bool
) -> tuple[RoomInfo, list[Record], dict[str, Any] | None] | None:
    """A room of the SQLite store, every record it holds and (``with_secrets``) its secrets, all read in one
    transaction, so they are of one moment while a server goes on writing; None: no such room."""
    conn.execute("BEGIN")
    try:
        info = get_room_sync(conn, room)
        if info is None:
            return None
        records: list[Record] = []
        while True:
            chunk = read_sync(conn, info.id, len(records), READ_CHUNK)
            records.extend(chunk)
            if len(chunk) < READ_CHUNK:
                break
        if not with_secrets:
            return info, records, None
        last = records[-1]["seq"] if records else 0
        return info, records, header_secrets(seeds_sync(conn, room, 1), kept_rolls_sync(conn, room), last)
    finally:
        conn.execute("COMMIT")


async def whole_room(
    log: EventLog, room: str, with_secrets: bool
) -> tuple[RoomInfo, list[Record], dict[str, Any] | None] | None:
    """As ``whole_room_sync``, from any store. The NATS store reads nothing in one moment: what is kept is
    read before and after the events, so a pending stored meanwhile is carried, its values as late as read."""
    before = await log.kept_rolls(room) if with_secrets else []
    found = await stores.whole_room(log, room)
    if found is None:
        return None
    info, records = found
    if not with_secrets:
        return info, records, None
    kept = {(k["pending"], k["commit"]): k for k in [*before, *await log.kept_rolls(room)]}
    last = records[-1]["seq"] if records else 0
    return info, records, header_secrets(await log.seeds(room), list(kept.values()), last)


# -- import ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Move:
    """What an import stores beside the file's events: the secrets it carried, checked, or the abandonment
    of the open seed whose secret it did not carry."""

    info: RoomInfo
    state: RoomState  # the file's events folded
    seeds: dict[int, bytes] = field(default_factory=dict)  # what the file carried (made --with-secrets)
    kept: list[Record] = field(default_factory=list)
    abandoned: int | None = None  # the open seed whose secret is not in the file
    rolls: int = 0  # the rolls made on it
    unmade: tuple[int, ...] = ()  # pendings no roll names, which can never be made here

    def seeds_to_store(self) -> dict[int, bytes]:
        """The file's seeds and, after an abandoned seed, a fresh secret for the next one."""
        chosen = dict(self.seeds)
        if self.abandoned is not None and not self.state.archived:
            chosen.setdefault(self.abandoned + 1, secrets.token_bytes(SEED_BYTES))
        return chosen

    def records(self, seeds: Mapping[int, bytes]) -> list[Record]:
        """The event to append after the file's: the next seed's commitment, which abandons the open one
        (none for an archived room, which rolls no more and takes no event)."""
        if self.abandoned is None or self.state.archived:
            return []
        n = self.abandoned + 1
        commit = {
            "seq": self.state.seq + 1,
            "epoch": self.info.epoch,
            "ts": time.time_ns() // 1_000_000,
            "kind": "seed_commit",
            "actor": dict(OPERATOR),
            "visibility": "public",
        }
        return [{**commit, "n": n, "commit": seed_commit(self.info.id, n, seeds[n])}]

    def said(self) -> str | None:
        """What the import says of the room's secrets beyond its closing sentence; None when nothing."""
        if self.abandoned is not None:
            n, rolls = self.abandoned, f"{self.rolls} roll{'' if self.rolls == 1 else 's'}"
            then = f"seed {n + 1} is committed now for the rolls to come"
            if self.state.archived:
                then = "and no seed follows it: the room is archived"
            unmade = ", ".join(str(seq) for seq in self.unmade)
            return (
                f"Dice seed {n} was open and its secret is not in the file (it stayed on the relay the room "
                f"came from), so seed {n} is abandoned here: its {rolls} stay 'awaiting seed' for good, "
                f"{then}"
                + (f", and the witnessed rolls announced at seq {unmade} can never be made" if unmade else "")
                + "; to move a room with its open seed, export it with --stored --with-secrets or use "
                "'tablerelay store copy'."
            )
        if not self.seeds:
            return None
        seeds, kept = len(self.seeds), len(self.kept)
        opened = f", with the secrets of {kept} open witnessed roll{'' if kept == 1 else 's'}" if kept else ""
        plural = "" if seeds == 1 else "s"
        return f"Its {seeds} dice seed{plural} came with it{opened}: it rolls on from its open seed."


def planned(info: RoomInfo, records: Sequence[Record], state: RoomState, carried: Any) -> Move:
    """What to store beside ``records`` (checked and folded into ``state``) for the file's header secrets
    (``carried``; None when it has none); ``ImportRefused`` when one does not match what the events commit to.
    """
    if carried is None:
        return _abandoning(Move(info, state), records)
    if not isinstance(carried, Mapping) or not isinstance(carried.get("seeds", []), list):
        raise ImportRefused("the file's secrets are not a map of seeds and kept rolls")
    seeds = _seeds(info, state, carried.get("seeds", []))
    pendings = {int(r["seq"]): r for r in records if r["kind"] == "pending"}
    kept_items = carried.get("kept", [])
    if not isinstance(kept_items, list):
        raise ImportRefused("the file's kept rolls are not a list")
    kept = [_kept(info.id, item, pendings) for item in kept_items]
    move = Move(info, state, seeds, kept)
    return move if not state.seed_open or state.seed_n in seeds else _abandoning(move, records)


def _abandoning(move: Move, records: Sequence[Record]) -> Move:
    state = move.state
    if not state.seed_open:
        return move
    n = state.seed_n
    rolls = sum(1 for r in records if r["kind"] == "roll" and (r.get("fair") or {}).get("n") == n)
    # An open roll needs its seed: with that seed abandoned, no roll can name its pending any more.
    unmade = tuple(sorted(state.pendings))
    return Move(move.info, state, move.seeds, [], n, rolls, unmade)


def _seeds(info: RoomInfo, state: RoomState, pairs: list[Any]) -> dict[int, bytes]:
    seeds: dict[int, bytes] = {}
    for pair in pairs:
        ok = isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int and pair[0] >= 1
        if not ok or not isinstance(pair[1], bytes) or len(pair[1]) != SEED_BYTES or pair[0] in seeds:
            raise ImportRefused(f"the file's dice seeds are not [n, {SEED_BYTES} bytes] pairs, each n once")
        n, secret = pair
        commit = state.seed_commits.get(n)
        if commit is not None and seed_commit(info.id, n, secret) != commit:
            raise ImportRefused(f"the file's dice seed {n} does not match its commitment in the events")
        seeds[n] = secret
    return seeds


def _kept(room: str, item: Any, pendings: Mapping[int, Record]) -> Record:
    """A kept roll of the file, once it is the secret of a pending event of the file."""
    at = item.get("pending") if isinstance(item, dict) else None
    pending = pendings.get(at) if type(at) is int else None
    if pending is None:
        raise ImportRefused(f"the file's secrets name a pending roll at seq {at!r} that its events lack")
    assert isinstance(item, dict)
    shaped = all(isinstance(item.get(key), kind) for key, kind in KEPT_TYPES.items())
    same = shaped and (
        item.get("room") == room
        and all(item.get(key) == pending[key] for key in ("commit", "n", "visibility"))
        and item["roller"].get("id") == pending["roller"]
        and sorted(map(str, item["asked"])) == sorted(pending["asked"])
        and len(item["nonce"]) == NONCE_BYTES
        and all(isinstance(p, str) and isinstance(v, bytes) for p, v in item["values"].items())
    )
    try:
        same = same and pending_commit(item["intent"], item["label"], item["nonce"]) == pending["commit"]
    except CanonicalError:
        same = False
    if not same:
        raise ImportRefused(f"the file's secrets of the pending roll at seq {at} do not match that roll")
    return dict(item)
