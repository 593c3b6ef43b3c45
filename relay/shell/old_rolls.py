"""Hidden rolls that have left a loaded room's memory, read back from the log when they are needed.

A loaded room keeps a ``relay.core.state.Sealed`` entry only for the hidden rolls of its recent window (the
last ``Limits.history`` seqs, what a fresh welcome shows): ``relay.shell.upkeep`` removes older ones and
raises the states' ``floor`` past them, so a room's memory no longer grows with every hidden roll it ever had.
At or below the floor an absent entry means "ask the log". Two paths ask:

- **a reveal** of such a roll (``restore``): its record and its reveal, if any, are read and its entry
  put back in both states, then the reveal is handled exactly as for a recent roll (same authorization,
  a second reveal acked with the first's seq);
- **a history** reaching below the floor (a resume from further back, ``view``): the reveals of the
  hidden rolls it shows are read, so each renders as now (sealed for those outside its audience until
  revealed, a resource's ``cause`` named only once its roll is revealed).

Rendering stays safe when an entry is missing: ``relay.core.visibility.audience`` gives the sealed form to
anyone outside the audience unless an entry says the roll was revealed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from relay.core.actions import Session
from relay.core.room import Room
from relay.core.state import RoomState, Sealed
from relay.storage.base import EventLog

#: Reads of a roll for a late reveal while other reveals keep being stored in its room. Only another
#: node's reveal of this very roll could make the last read stale; the worst it does then is store a
#: second reveal of a roll whose values are already public.
RESTORE_TRIES = 3


def in_log(room: Room, session: Session, seq: int) -> bool:
    """True when a reveal of ``seq`` must read the roll from the log first (it may be an old hidden roll
    out of memory). A spectator's is refused without it."""
    pending = room.pending
    return session.role != "spectator" and seq <= pending.floor and seq not in pending.sealed


def _hidden_roll(record: Mapping[str, Any]) -> bool:
    return record["kind"] == "roll" and record.get("sealed") is not None


async def restore(log: EventLog, room: Room, seq: int) -> None:
    """Put hidden roll ``seq``'s entry back into both of the room's states, from its stored record and
    its stored reveal (if any). Nothing happens when ``seq`` is not a hidden roll (the reveal is then
    refused as for any seq) or when memory holds an entry again by the time the log has answered."""
    for _ in range(RESTORE_TRIES):
        reveals = room.committed.reveals  # a reveal stored meanwhile (another node's?) means reading again
        records = await log.read(room.id, seq - 1, 1)
        if not records or records[0]["seq"] != seq or not _hidden_roll(records[0]):
            return
        record = records[0]
        revealed = (await log.reveals(room.id, seq - 1, seq)).get(seq)
        if room.committed.reveals == reveals:
            break
    stored = record["sealed"]
    for state in (room.committed, room.pending):
        if seq in state.sealed:
            continue  # put back by another late reveal, perhaps with its reveal in flight
        roller = state.identity(record["actor"]["id"])  # a merged roller's rolls are its survivor's
        if revealed is None:
            state.sealed[seq] = Sealed(roller, record["visibility"], stored["blob"], stored["nonce"])
        else:
            state.sealed[seq] = Sealed(roller, record["visibility"], b"", b"", revealed)


async def view(
    log: EventLog, room_id: str, records: Sequence[Mapping[str, Any]], state: RoomState
) -> RoomState:
    """``state``, or a copy that also knows the hidden rolls among ``records`` (and the rolls their
    resource events name as ``cause``) that memory no longer holds, for rendering ``records`` now.

    Render with it before awaiting anything else: the upkeep may raise ``state.floor`` at any await,
    which is why this reads again when it moved while the log was being read.
    """
    while True:
        floor = state.floor
        extra = await _from_log(log, room_id, records, state)
        if state.floor == floor:
            break
    if not extra:
        return state
    return dataclasses.replace(state, sealed={**extra, **state.sealed})


async def _from_log(
    log: EventLog, room_id: str, records: Sequence[Mapping[str, Any]], state: RoomState
) -> dict[int, Sealed]:
    floor, memory = state.floor, state.sealed
    if not records or records[0]["seq"] > floor:
        return {}
    first = records[0]["seq"]
    rolls = {r["seq"]: r for r in records if r["seq"] <= floor and r["seq"] not in memory and _hidden_roll(r)}
    # A resource event's cause is the roll stored just before it, in the same append: outside
    # ``records`` only for the first few of them.
    causes = [
        r["cause"]
        for r in records
        if r["kind"] == "resource" and isinstance(r.get("cause"), int) and r["cause"] < first
    ]
    causes = [seq for seq in causes if seq <= floor and seq not in memory]
    if causes:
        start = min(causes)
        for record in await log.read(room_id, start - 1, first - start):
            if record["seq"] in causes and _hidden_roll(record):
                rolls[record["seq"]] = record
    if not rolls:
        return {}
    revealed = await log.reveals(room_id, min(rolls) - 1, max(rolls))
    return {
        seq: Sealed(state.identity(r["actor"]["id"]), r["visibility"], b"", b"", revealed.get(seq))
        for seq, r in rolls.items()
    }
