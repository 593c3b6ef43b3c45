"""``EventLog.reveals`` on the NATS store: the interface's default (a read of the room from the roll on),
which a late reveal and a long resume use for hidden rolls out of a room's memory (relay.shell.old_rolls)."""

from __future__ import annotations

from typing import Any

from relay.storage.nats.log import NatsLog
from tests.cluster.natsd import NatsCluster


def event(seq: int, kind: str = "roll", **fields: Any) -> dict[str, Any]:
    actor = {"id": "a", "name": "A", "role": "gm"}
    return {"seq": seq, "ts": seq, "kind": kind, "epoch": "e", "actor": actor, "visibility": "gm", **fields}


async def test_reveals_are_found_by_the_roll_they_open(nats: NatsCluster) -> None:
    log = await NatsLog.connect(nats.store)
    try:
        room = (await log.create_room("reveals", fear_max=12, hope_max=6, max_rooms=100_000)).id
        records = [event(1), event(2), event(3, "reveal", of=2, blob=b"b", nonce=b"n")]
        records += [event(seq) for seq in range(4, 1500)]  # more than one read of REVEAL_SCAN records
        records.append(event(1500, "reveal", of=1, blob=b"b", nonce=b"n"))
        for start in range(0, len(records), 100):
            await log.append(room, records[start : start + 100], start)
        assert await log.reveals(room, 0, 1500) == {1: 1500, 2: 3}
        assert await log.reveals(room, 1, 2) == {2: 3}
        assert await log.reveals(room, 2, 1500) == {}
    finally:
        await log.close()
