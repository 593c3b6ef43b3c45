"""Memory: resident memory per idle connection, at 10,000 connections.

For each server: start it, open one connection in each of ten rooms (so rooms, code paths and caches are
loaded), read the server's VmRSS, open 10,000 more connections spread over the ten rooms by several
receiver processes, let the server settle, read VmRSS again.

    KiB per connection = (RSS after − RSS before) / connections
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bench import servers
from bench.harness import close_all, gather_expect, split, start_clients
from bench.servers import Calibration

ROOMS = 10


async def measure(kind: str, run_dir: Path, calibration: Calibration, *, connections: int) -> dict[str, Any]:
    server = await servers.start(kind, run_dir, calibration, f"memory-{connections}")
    groups = []
    try:
        rooms = server.add_rooms(ROOMS)
        warm = await start_clients(
            f"memory-{kind}-warm",
            run_dir,
            {"role": "receive", "kind": kind, "targets": server.targets("receive", rooms, 1)},
        )
        groups.append(warm)
        await warm.expect("ready", 60)
        await asyncio.sleep(1.0)
        before = server.process.rss_kib()
        per_room = connections // ROOMS
        parts = max(2, connections // 2500)
        chunks = split(server.targets("receive", rooms, per_room), parts)
        for i, chunk in enumerate(chunks):
            groups.append(
                await start_clients(
                    f"memory-{kind}-{i}",
                    run_dir,
                    {"role": "receive", "kind": kind, "targets": chunk, "concurrency": 32},
                )
            )
        ready = await gather_expect(groups[1:], "ready", 240)
        opened = sum(r["conns"] for r in ready)
        connect_seconds = max(r["seconds"] for r in ready)
        await asyncio.sleep(2.0)
        after = server.process.rss_kib()
    finally:
        await close_all(groups)
        await server.stop()
    return {
        "kind": kind,
        "connections": opened,
        "rss_before_kib": before,
        "rss_after_kib": after,
        "kib_per_connection": (after - before) / opened,
        "connect_seconds": connect_seconds,
    }
