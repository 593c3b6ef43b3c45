"""Fan-out: roll events delivered per second to every member of a room (or of several rooms).

One run: start the server, open the receivers (Node ``ws`` / ``socket.io-client`` processes, separate from
the server), connect a driver (the relay's GM; a plain client of each peer), send a short warm-up burst,
then a burst of E rolls per room as fast as the driver's socket takes them. The clock starts just before
the first roll is sent and stops when the last receiver has its last event, so what is measured is the
whole path: intent in, (relay: rules, storage, ack), broadcast out, frames read by every member.

    deliveries per second = E × members / elapsed

E is kept below the relay's per-socket send queue (1,024 frames) so the burst never trips its slow-client
guard; every receiver checks that each of its connections got exactly E events.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench import servers
from bench.harness import BenchError, Clients, close_all, cpu_seconds, gather_expect, split, start_clients
from bench.profile import Sampler
from bench.servers import Calibration, Server

QUEUE_SAFE = 900  # events per burst, under the relay's 1,024-frame send queue


def receiver_processes(members: int) -> int:
    """Enough Node processes that a receiver is not the bottleneck, few enough to leave the server a core."""
    return 1 if members <= 300 else 2 if members <= 6000 else 4


def events_for(members: int, deliveries: int, floor: int = 20) -> int:
    """Events per room so one burst makes about ``deliveries`` deliveries."""
    return max(floor, min(QUEUE_SAFE, deliveries // max(1, members)))


async def open_room_clients(
    server: Server, run_dir: Path, tag: str, rooms: int, per_room: int, procs: int | None = None
) -> tuple[Clients, list[Clients]]:
    """A driver (one socket per room) and the receivers (``per_room`` sockets in each room)."""
    made = server.add_rooms(rooms)
    driver = await start_clients(
        f"{tag}-driver",
        run_dir,
        {
            "role": "driver",
            "kind": server.kind,
            "targets": server.targets("driver", made, 1),
            "intent": servers.INTENT,
            "label": servers.LABEL,
        },
    )
    groups = [driver]
    try:
        await driver.expect("ready", 60)
        parts = procs or receiver_processes(rooms * per_room)
        chunks = split(server.targets("receive", made, per_room), parts)
        for i, chunk in enumerate(chunks):
            groups.append(
                await start_clients(
                    f"{tag}-recv{i}", run_dir, {"role": "receive", "kind": server.kind, "targets": chunk}
                )
            )
        await gather_expect(groups[1:], "ready", 180)
    except BaseException:
        await close_all(groups)
        raise
    return driver, groups[1:]


async def burst(
    server_pid: int,
    driver: Clients,
    receivers: list[Clients],
    events: int,
    *,
    on_start: Callable[[], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """One burst of ``events`` rolls per room; the deliveries and the time they took."""
    for group in receivers:
        group.send(cmd="go", expect=events, timeout=120)
    await gather_expect(receivers, "armed", 30)
    if on_start is not None:
        await on_start()
    pids = {"server": server_pid, "receivers": [g.proc.pid for g in receivers], "driver": [driver.proc.pid]}
    before = cpu_of(pids)
    driver.send(cmd="burst", n=events, timeout=120)
    sent = await driver.expect("burst", 150)
    done = await gather_expect(receivers, "done", 150)
    after = cpu_of(pids)
    received = sum(d["received"] for d in done)
    expected = sum(d["expected"] for d in done)
    last = max(d["last"] for d in done)
    elapsed = (last - sent["t0"]) / 1000
    return {
        "events": events,
        "received": received,
        "expected": expected,
        "complete": all(d["complete"] for d in done) and received == expected,
        "elapsed": elapsed,
        "rate": received / elapsed if elapsed > 0 else 0.0,
        "acked": sent.get("acked"),
        "driver_errors": sent.get("errors") or {},
        "closes": [d["closes"] for d in done if d["closes"]],
        "send_seconds": (sent["t_sent"] - sent["t0"]) / 1000,
        # CPU seconds each side spent during the burst: which one was busy says what bounds the figure.
        "cpu": {key: round(after[key] - before[key], 3) for key in before},
    }


def cpu_of(pids: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in pids.items():
        group = value if isinstance(value, list) else [value]
        total = 0.0
        for pid in group:
            with contextlib.suppress(OSError):
                total += cpu_seconds(pid)
        out[key] = total
    return out


async def measure(
    kind: str,
    run_dir: Path,
    calibration: Calibration,
    *,
    rooms: int,
    per_room: int,
    events: int,
    repeats: int = 1,
    tag: str = "fanout",
    profile: Path | None = None,
) -> dict[str, Any]:
    """Deliveries per second of roll events to ``rooms`` rooms of ``per_room`` members on a fresh server.

    The best of ``repeats`` bursts is kept: on a shared machine, interference only ever slows a burst.
    """
    server = await servers.start(kind, run_dir, calibration, f"{tag}-{rooms}x{per_room}")
    try:
        driver, receivers = await open_room_clients(
            server, run_dir, f"{tag}-{kind}-{rooms}x{per_room}", rooms, per_room
        )
        try:
            await burst(
                server.pid, driver, receivers, max(5, events // 10)
            )  # warm-up: imports, caches, JIT in Node
            runs = []
            for _ in range(repeats):
                runs.append(await burst(server.pid, driver, receivers, events))
                if not runs[-1]["complete"]:
                    break  # the sockets still hold the late events; another burst would count them
                await asyncio.sleep(0.2)
            profiled: dict[str, Any] | None = None
            if profile is not None:
                sampler = Sampler(server.pid, profile)
                async with sampler:
                    profiled = await burst(server.pid, driver, receivers, events)
                profiled = {"burst": profiled, **sampler.result}
        finally:
            await close_all([driver, *receivers])
    finally:
        await server.stop()
    complete = [r for r in runs if r["complete"]]
    if not complete:
        raise BenchError(f"fan-out {kind} {rooms}x{per_room}: no burst delivered every event: {runs}")
    best = max(complete, key=lambda r: r["rate"])
    return {
        "kind": kind,
        "rooms": rooms,
        "per_room": per_room,
        "members": rooms * per_room,
        "events": events,
        "rate": best["rate"],
        "elapsed": best["elapsed"],
        # CPU microseconds per delivery: the work each side did, whatever share of the machine it got.
        "server_cpu_us": 1e6 * best["cpu"]["server"] / best["received"],
        "receiver_cpu_us": 1e6 * best["cpu"]["receivers"] / best["received"],
        "server_busy": best["cpu"]["server"] / best["elapsed"],
        "runs": runs,
        "profile": profiled,
    }
