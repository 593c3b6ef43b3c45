"""Memory: resident memory per idle connection, at 10,000 connections.

For each server: start it, send 100 rolls into each of ten rooms (a table in play has a history, and the
relay's welcome carries the last 100 events), open one connection in each room (so rooms, code paths
and caches are loaded), read the server's VmRSS, open 10,000 more connections spread over the ten rooms
by several receiver processes, let the server settle, read VmRSS again.

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

from bench.tools import servers
from bench.tools.harness import BenchError, close_all, gather_expect, split, start_clients
from bench.tools.servers import Calibration

ROOMS = 10


async def measure(
    kind: str,
    run_dir: Path,
    calibration: Calibration,
    *,
    connections: int,
    history: int = 100,
    traced: Path | None = None,
) -> dict[str, Any]:
    """RSS per idle connection; with ``traced`` (relay only), also where the traced allocations grew."""
    tag = f"memory-{connections}" + ("-traced" if traced else "")
    server = await servers.start(kind, run_dir, calibration, tag, traced=traced)
    groups = []
    try:
        rooms = server.add_rooms(ROOMS)
        # A table in play has a history: the relay's welcome carries the last 100 events.
        driver = await start_clients(
            f"memory-{kind}-driver",
            run_dir,
            {
                "role": "driver",
                "kind": kind,
                "targets": server.targets("driver", rooms, 1),
                "intent": servers.INTENT,
                "label": servers.LABEL,
            },
        )
        groups.append(driver)
        await driver.expect("ready", 60)
        if history:
            driver.send(cmd="burst", n=history, timeout=60)
            await driver.expect("burst", 90)
        warm = await start_clients(
            f"memory-{kind}-warm",
            run_dir,
            {"role": "receive", "kind": kind, "targets": server.targets("receive", rooms, 1)},
        )
        groups.append(warm)
        await warm.expect("ready", 60)
        await asyncio.sleep(0.5)
        if traced is not None:
            await _snapshot(server.pid, None)
        before = server.process.rss_kib()
        per_room = connections // ROOMS
        parts = max(2, connections // 2500)
        chunks = split(server.targets("receive", rooms, per_room), parts)
        bulk = []
        for i, chunk in enumerate(chunks):
            config = {"role": "receive", "kind": kind, "targets": chunk, "concurrency": 32}
            bulk.append(await start_clients(f"memory-{kind}-{i}", run_dir, config))
            groups.append(bulk[-1])
        ready = await gather_expect(bulk, "ready", 240)
        opened = sum(r["conns"] for r in ready)
        connect_seconds = max(r["seconds"] for r in ready)
        await asyncio.sleep(1.0)
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
        "history": history,
        "trace": _per_connection(trace, opened) if trace is not None else None,
    }


async def _snapshot(pid: int, out: Path | None) -> dict[str, Any] | None:
    """Ask bench.tools.relay_traced for a snapshot; the second one writes ``out``."""
    if out is not None and out.exists():
        out.unlink()
    os.kill(pid, signal.SIGUSR1)
    for _ in range(1800):  # a snapshot of a big traced heap takes a while
        await asyncio.sleep(0.1)
        if out is None:
            return None
        if out.exists():
            with contextlib.suppress(ValueError):
                return dict(json.loads(out.read_text()))
    raise BenchError("the traced relay wrote no snapshot")


def _per_connection(trace: dict[str, Any], connections: int) -> dict[str, Any]:
    """Traced bytes per connection: in all, by allocating line and by file."""

    def rows(key: str, limit: int) -> list[dict[str, Any]]:
        return [
            {
                "where": row["where"],
                "bytes_per_connection": round(row["size_diff"] / connections, 1),
                "blocks_per_connection": round(row["count_diff"] / connections, 2),
            }
            for row in trace[key][:limit]
        ]

    return {
        "bytes_per_connection": trace["total_diff"] / connections,
        "lines": rows("lineno", 15),
        "files": rows("filename", 10),
    }
