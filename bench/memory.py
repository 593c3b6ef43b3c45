"""Memory: resident memory per idle connection, at 10,000 connections.

For each server: start it, open one connection in each of ten rooms (so rooms, code paths and caches are
loaded), read the server's VmRSS, open 10,000 more connections spread over the ten rooms by several
receiver processes, let the server settle, read VmRSS again.

    KiB per connection = (RSS after − RSS before) / connections
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

from bench import servers
from bench.harness import BenchError, close_all, gather_expect, split, start_clients
from bench.servers import Calibration

ROOMS = 10


async def measure(
    kind: str, run_dir: Path, calibration: Calibration, *, connections: int, traced: Path | None = None
) -> dict[str, Any]:
    """RSS per idle connection; with ``traced`` (relay only), also where the traced allocations grew."""
    tag = f"memory-{connections}" + ("-traced" if traced else "")
    server = await servers.start(kind, run_dir, calibration, tag, traced=traced)
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
        if traced is not None:
            await _snapshot(server.pid, None)
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
        trace = await _snapshot(server.pid, traced) if traced is not None else None
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
        "trace": _per_connection(trace, opened) if trace is not None else None,
    }


async def _snapshot(pid: int, out: Path | None) -> dict[str, Any] | None:
    """Ask bench.relay_traced for a snapshot; the second one writes ``out``."""
    if out is not None and out.exists():
        out.unlink()
    os.kill(pid, signal.SIGUSR1)
    for _ in range(600):
        await asyncio.sleep(0.1)
        if out is None:
            return None
        if out.exists():
            with contextlib.suppress(ValueError):
                return dict(json.loads(out.read_text()))
    raise BenchError("the traced relay wrote no snapshot")


def _per_connection(trace: dict[str, Any], connections: int) -> dict[str, Any]:
    """Traced bytes per connection, total and by allocation site (innermost frame first)."""
    return {
        "bytes_per_connection": trace["total_diff"] / connections,
        "sites": [
            {
                "bytes_per_connection": round(row["size_diff"] / connections, 1),
                "blocks_per_connection": round(row["count_diff"] / connections, 2),
                "where": list(reversed(row["where"]))[:3],
            }
            for row in trace["top"][:15]
        ],
    }
