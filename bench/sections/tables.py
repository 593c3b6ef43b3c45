"""Many tables: a hosted relay's usual load, many small rooms with rolls landing on random ones.

1,000 rooms of 6 members (spectator sockets, spread over two receiver processes) and one roller socket per
room (the driver: the relay's GM there, a plain client of the bare server). The orchestrator draws the room
of every roll at random (fixed seed); the driver keeps a fixed window of rolls in flight and sends the next
whenever an event reaches it (it is a member of every room), whichever room that was. The bare
``websockets`` peer does the same per-room broadcasts, with the same receivers, which decode every frame
on both sides, as a real client does.

Per run: deliveries per second to the members, rolls per second (the relay's acked, the bare server's
broadcast), p50 / p99 from a roll's intent leaving the driver to the last member of its room receiving
the event, and the server's CPU per roll (the relay's nonce process counts as the server).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.sections.fanout import cpu_of, open_room_clients
from bench.sections.latency import percentile
from bench.tools import servers
from bench.tools.harness import BenchError, Clients, children, close_all, cpu_seconds, gather_expect
from bench.tools.profile import Sampler
from bench.tools.servers import Calibration

SEED = 14  # the same rooms, in the same order, for both servers


def order(rooms: int, rolls: int, seed: int) -> list[int]:
    rng = random.Random(seed)  # bench load only: which room a roll goes to, never a die
    return [rng.randrange(rooms) for _ in range(rolls)]


async def run_once(
    server_pid: int,
    driver: Clients,
    receivers: list[Clients],
    picks: list[int],
    per_room: int,
    window: int,
) -> dict[str, Any]:
    # Each receiver process holds the same share of every room's members (bench.tools.harness.split).
    parts = len(receivers)
    for i, group in enumerate(receivers):
        share = per_room // parts + (1 if i < per_room % parts else 0)
        group.send(cmd="go", goal=len(picks) * share, track=True, timeout=120)
    await gather_expect(receivers, "armed", 30)
    pids = {"server": [server_pid, *children(server_pid)], "receivers": [g.proc.pid for g in receivers]}
    before = cpu_of(pids)
    split0 = split_cpu(server_pid)
    driver.send(cmd="window", rooms=picks, window=window, timeout=120)
    sent = await driver.expect("window", 150)
    done = await gather_expect(receivers, "done", 150)
    after = cpu_of(pids)
    split1 = split_cpu(server_pid)
    received = sum(d["received"] for d in done)
    expected = sum(d["expected"] for d in done)
    elapsed = (max(d["last"] for d in done) - sent["t0"]) / 1000
    latencies = _latencies(sent["sends"], done)
    cpu = {key: after[key] - before[key] for key in before}
    rolls = len(picks)
    acked = sent.get("acked") or 0
    return {
        "rolls": rolls,
        "received": received,
        "expected": expected,
        "complete": received == expected and len(latencies) == rolls,
        "elapsed": elapsed,
        "rate": received / elapsed if elapsed > 0 else 0.0,
        # The bare server acknowledges nothing: its rolls count once broadcast to every member.
        "rolls_per_second": (acked if acked else rolls) / elapsed if elapsed > 0 else 0.0,
        "acked": acked,
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "server_cpu_us_per_roll": 1e6 * cpu["server"] / rolls,
        "receiver_cpu_us_per_delivery": 1e6 * cpu["receivers"] / max(1, received),
        "server_busy": cpu["server"] / elapsed if elapsed > 0 else 0.0,
        # Where the server's CPU per roll went: by thread name, and its child processes.
        "cpu_us_per_roll_by": {
            k: round(1e6 * (v - split0.get(k, 0.0)) / rolls, 1)
            for k, v in split1.items()
            if v > split0.get(k, 0.0)
        },
        "errors": sent.get("errors") or {},
        "latencies_ms": latencies,
    }


def split_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of the server's main thread (the event loop), of its other threads (the relay's
    SQLite writer and readers) and of its child processes (the relay's nonce process)."""
    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            name = "event loop thread" if int(task.name) == pid else "other threads"
            out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    for child in children(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            out["child processes"] = out.get("child processes", 0.0) + cpu_seconds(child)
    return out


def _latencies(sends: list[list[Any]], done: list[dict[str, Any]]) -> list[float]:
    """Per roll: the latest receipt of its event over every receiver process, minus its send time (ms)."""
    last: dict[tuple[int, int], float] = {}
    seen: Counter[tuple[int, int]] = Counter()
    for report in done:
        for target, pairs in enumerate(report["seqs"]):
            for seq, at in pairs:
                key = (target, int(seq))
                last[key] = max(last.get(key, 0.0), at)
                seen[key] += 1
    out = []
    for target, seq, at in sends:
        if seq is not None and seen[(target, int(seq))] == len(done):
            out.append(last[(target, int(seq))] - at)
    return out


async def measure(
    kinds: tuple[str, ...],
    run_dir: Path,
    calibration: Calibration,
    *,
    rooms: int,
    per_room: int,
    rolls: int,
    window: int,
    rounds: int,
    profile: Path | None = None,
    profile_seconds: float = 2.5,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One row per server kind; both servers stay up and take turns, so load falls on both alike.

    ``options`` adds ``servers.start`` arguments per kind: ``bench.studies.ab`` names relay variants
    ``relay-<name>`` and gives each its source tree and environment.
    """
    started = time.monotonic()
    up: dict[str, tuple[servers.Server, Clients, list[Clients]]] = {}
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    profiles: dict[str, Any] = {}
    try:
        for kind in kinds:
            # Variants of the relay, for experiments: "relay-unsigned" (signing off), "relay-uvloop".
            server = await servers.start(
                kind.split("-")[0],
                run_dir,
                calibration,
                f"tables-{kind}-{rooms}x{per_room}",
                signing=kind != "relay-unsigned",
                uvloop=kind == "relay-uvloop",
                **(options or {}).get(kind, {}),
            )
            try:
                driver, receivers = await open_room_clients(
                    server,
                    run_dir,
                    f"tables-{kind}",
                    rooms,
                    per_room,
                    procs=2,
                    receive_options={"decode": True},
                )
            except BaseException:
                await server.stop()
                raise
            up[kind] = (server, driver, receivers)
            # Warm-up: imports, caches and the receivers' JIT.
            await run_once(
                server.pid, driver, receivers, order(rooms, rolls // 4, SEED + 1), per_room, window
            )
        for i in range(rounds):
            for kind in kinds:
                server, driver, receivers = up[kind]
                picks = order(rooms, rolls, SEED + 10 + i)
                runs[kind].append(await run_once(server.pid, driver, receivers, picks, per_room, window))
                await asyncio.sleep(0.2)
        if profile is not None and "relay" in up:
            server, driver, receivers = up["relay"]
            sampler = Sampler(server.pid, profile)
            async with sampler:
                t0 = time.monotonic()
                while time.monotonic() - t0 < profile_seconds:
                    await run_once(server.pid, driver, receivers, order(rooms, rolls, SEED), per_room, window)
            profiles["relay"] = sampler.result
    finally:
        for server, driver, receivers in up.values():
            await close_all([driver, *receivers])
            await server.stop()
    out = []
    for kind, done in runs.items():
        complete = [r for r in done if r["complete"]]
        if not complete:
            raise BenchError(f"many tables {kind}: no run delivered every event: {[_brief(r) for r in done]}")
        best = max(complete, key=lambda r: r["rate"])
        # Latency pooled over every complete run, as the latency section does.
        pooled = [x for r in complete for x in r["latencies_ms"]]
        out.append(
            {
                "kind": kind,
                "rooms": rooms,
                "per_room": per_room,
                "window": window,
                "rolls": rolls,
                "rate": best["rate"],
                "rolls_per_second": best["rolls_per_second"],
                "p50_ms": percentile(pooled, 50),
                "p99_ms": percentile(pooled, 99),
                "server_cpu_us_per_roll": min(r["server_cpu_us_per_roll"] for r in complete),
                "server_busy": best["server_busy"],
                "cpu_us_per_roll_by": best["cpu_us_per_roll_by"],
                "receiver_cpu_us_per_delivery": best["receiver_cpu_us_per_delivery"],
                "runs": [_brief(r) for r in done],
                "wall_seconds": round(time.monotonic() - started, 1),
                **({"profile": profiles[kind]} if kind in profiles else {}),
            }
        )
    return out


def _brief(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k != "latencies_ms"}
