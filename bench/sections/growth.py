"""Growth: fan-out as members per room grow, and as rooms grow at a fixed total of members.

Both are fan-out runs (``bench.sections.fanout.measure``) on other shapes; points the fan-out section already
measured (one room of 100, 1,000, 5,000) are reused rather than measured twice.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from bench.sections import fanout
from bench.tools.servers import Calibration


async def measure(
    kinds: tuple[str, ...],
    reuse: tuple[str, ...],
    run_dir: Path,
    calibration: Calibration,
    *,
    shapes: list[tuple[int, int]],
    deliveries: int,
    known: list[dict[str, Any]],
    repeats: int,
    problems: list[str],
) -> list[dict[str, Any]]:
    """Fan-out for each (rooms, members per room) shape: ``kinds`` are measured where ``known`` lacks them,
    ``reuse`` kinds only shown where ``known`` has them."""
    out: list[dict[str, Any]] = []
    for rooms, per_room in shapes:
        for kind in (*kinds, *reuse):
            done = next(
                (r for r in known if r["kind"] == kind and r["rooms"] == rooms and r["per_room"] == per_room),
                None,
            )
            if done is None and kind in reuse:
                continue
            if done is None:
                events = fanout.events_for(per_room, deliveries // rooms)
                try:
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
                except Exception as exc:  # one shape failing must not cost the others
                    traceback.print_exception(exc)
                    problems.append(
                        f"growth {kind} {rooms}x{per_room}: {type(exc).__name__}: {str(exc)[:300]}"
                    )
                    continue
            out.append(done)
    return out
