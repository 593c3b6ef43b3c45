"""Growth: fan-out as members per room grow, and as rooms grow at a fixed total of members.

Both are fan-out runs (``bench.fanout.measure``) on other shapes; points the fan-out section already
measured (one room of 100, 1,000, 5,000) are reused rather than measured twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import fanout
from bench.servers import Calibration


async def measure(
    kinds: tuple[str, ...],
    run_dir: Path,
    calibration: Calibration,
    *,
    shapes: list[tuple[int, int]],
    deliveries: int,
    known: list[dict[str, Any]],
    repeats: int,
) -> list[dict[str, Any]]:
    """Fan-out for each (rooms, members per room) shape and kind, reusing ``known`` results."""
    out: list[dict[str, Any]] = []
    for rooms, per_room in shapes:
        for kind in kinds:
            done = next(
                (r for r in known if r["kind"] == kind and r["rooms"] == rooms and r["per_room"] == per_room),
                None,
            )
            if done is None:
                events = fanout.events_for(per_room, deliveries // rooms)
                done = await fanout.measure(
                    kind,
                    run_dir,
                    calibration,
                    rooms=rooms,
                    per_room=per_room,
                    events=events,
                    repeats=repeats,
                    tag="growth",
                )
            out.append(done)
    return out
