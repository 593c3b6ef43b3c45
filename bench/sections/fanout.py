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
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from bench.tools import servers
from bench.tools.harness import (
    BenchError,
    Clients,
    children,
    close_all,
    cpu_seconds,
    gather_expect,
    split,
    start_clients,
    turn_order,
)
from bench.tools.profile import Sampler
from bench.tools.servers import Calibration, Server

QUEUE_SAFE = 900  # events per burst, under the relay's 1,024-frame send queue


def receiver_processes(members: int) -> int:
    """Enough Node processes that a receiver is not the bottleneck, few enough to leave the server a core."""
    return 1 if members <= 300 else 2 if members <= 6000 else 4


def events_for(members: int, deliveries: int, floor: int = 10) -> int:
    """Events per room so one burst makes about ``deliveries`` deliveries."""
    return max(floor, min(QUEUE_SAFE, deliveries // max(1, members)))


async def open_room_clients(
    server: Server,
    run_dir: Path,
    tag: str,
    rooms: int,
    per_room: int,
    procs: int | None = None,
    receive_options: dict[str, Any] | None = None,
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
                    f"{tag}-recv{i}",
                    run_dir,
                    {"role": "receive", "kind": server.kind, "targets": chunk, **(receive_options or {})},
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
    mode: str = "burst",
    on_start: Callable[[], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """``events`` rolls per room and the time every member took to get them.

    ``mode`` "burst": sent as fast as the driver's socket takes them; "chain": one roll in flight per
    room, the next sent once the driver (a member too) has the previous one's event.
    """
    for group in receivers:
        group.send(cmd="go", expect=events, timeout=120)
    await gather_expect(receivers, "armed", 30)
    if on_start is not None:
        await on_start()
    # The server's child processes (the relay's signer) count as the server.
    server = [server_pid, *children(server_pid)]
    pids = {"server": server, "receivers": [g.proc.pid for g in receivers], "driver": [driver.proc.pid]}
    before = cpu_of(pids)
    driver.send(cmd=mode, n=events, timeout=120)
    sent = await driver.expect(mode, 150)
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
        "complete": all(d["complete"] and d["min_conn"] == d["max_conn"] == events for d in done)
        and received == expected,
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
    chain_events: int | None = None,
    repeats: int = 1,
    tag: str = "fanout",
    profile: Path | None = None,
    profile_seconds: float = 2.5,
    signing: bool = True,
    **start: Any,
) -> dict[str, Any]:
    """Deliveries per second of roll events to ``rooms`` rooms of ``per_room`` members on a fresh server.

    Bursts of ``events`` rolls per room, then (if ``chain_events``) chains of that many rolls, one in
    flight per room. The best of ``repeats`` is kept for each: on a shared machine, interference only
    ever slows a run down. ``profile`` adds py-spy samples of further bursts and chains (not counted).
    ``start`` adds ``servers.start`` arguments (``bench.studies.ab``'s variants).
    """
    started = time.monotonic()
    server = await servers.start(
        kind, run_dir, calibration, f"{tag}-{rooms}x{per_room}", signing=signing, **start
    )
    profiles: dict[str, Any] = {}
    chains: list[dict[str, Any]] = []
    try:
        opening = time.monotonic()
        driver, receivers = await open_room_clients(
            server, run_dir, f"{tag}-{kind}-{rooms}x{per_room}", rooms, per_room
        )
        connect_seconds = time.monotonic() - opening
        try:
            # Warm-up: imports and caches in the server, the JIT in the Node receivers.
            await burst(server.pid, driver, receivers, max(3, events // 10))
            runs = await _repeat(server.pid, driver, receivers, events, repeats, "burst")
            if chain_events:
                # A chain is short and, one roll in flight, sensitive to every scheduling delay: one more try.
                chains = await _repeat(server.pid, driver, receivers, chain_events, repeats + 1, "chain")
            if profile is not None:
                for mode, n in (("burst", events), ("chain", chain_events)):
                    if not n:
                        continue
                    sampler = Sampler(server.pid, profile.with_suffix(f".{mode}.raw"))
                    async with sampler:
                        t0 = time.monotonic()
                        while time.monotonic() - t0 < profile_seconds:
                            await burst(server.pid, driver, receivers, n, mode=mode)
                    profiles[mode] = sampler.result
        finally:
            await close_all([driver, *receivers])
    finally:
        await server.stop()
    best = _best(runs, f"fan-out {kind} {rooms}x{per_room}")
    out = {
        "kind": kind,
        "rooms": rooms,
        "per_room": per_room,
        "members": rooms * per_room,
        "events": events,
        "signing": signing,
        **_figures(best, ""),
        "runs": runs,
        "connect_seconds": round(connect_seconds, 1),
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    if chains:
        out.update(_figures(_best(chains, f"fan-out chain {kind} {rooms}x{per_room}"), "chain_"))
        out["chain_events"] = chain_events
        out["chain_runs"] = chains
    if profiles:
        out["profile"] = profiles
    return out


async def paired(
    run_dir: Path,
    calibration: Calibration,
    setups: Mapping[str, Mapping[str, Any]],
    *,
    rooms: int,
    per_room: int,
    events: int,
    chain_events: int,
    rounds: int,
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Bursts and chains of several servers (``setups``: name -> ``servers.start`` arguments, ``kind``
    among them, a relay when it is not given), all up at once with their receivers, taking turns: round
    after round each server gets a burst, then each a chain, the order reversed every other round (as
    ``bench.sections.appends.paired``, for the same reason: two runs seconds apart meet nearly the same
    machine).
    Every run must deliver every event. Returns each setup's ``bursts`` and ``chains`` in round order."""
    up: dict[str, tuple[Server, Clients, list[Clients]]] = {}
    try:
        for name, setup in setups.items():
            options = dict(setup)
            kind = options.pop("kind", "relay")
            server = await servers.start(kind, run_dir, calibration, f"paired-{name}", **options)
            try:
                driver, receivers = await open_room_clients(
                    server, run_dir, f"paired-{name}", rooms, per_room
                )
            except BaseException:
                await server.stop()
                raise
            up[name] = (server, driver, receivers)
            await burst(server.pid, driver, receivers, max(3, events // 10))  # warm-up
        out: dict[str, dict[str, list[dict[str, Any]]]] = {name: {"bursts": [], "chains": []} for name in up}
        names = list(up)
        for i in range(rounds):
            order = turn_order(names, i)
            for mode, n, key in (("burst", events, "bursts"), ("chain", chain_events, "chains")):
                for name in order:
                    server, driver, receivers = up[name]
                    run = await burst(server.pid, driver, receivers, n, mode=mode)
                    if not run["complete"]:
                        raise BenchError(f"fan-out {mode} {name}: not every event arrived: {run}")
                    out[name][key].append(run)
                    await asyncio.sleep(0.2)
        return out
    finally:
        for server, driver, receivers in up.values():
            await close_all([driver, *receivers])
            await server.stop()


async def _repeat(
    pid: int, driver: Clients, receivers: list[Clients], events: int, repeats: int, mode: str
) -> list[dict[str, Any]]:
    runs = []
    for _ in range(repeats):
        runs.append(await burst(pid, driver, receivers, events, mode=mode))
        if not runs[-1]["complete"]:
            break  # the sockets still hold the late events; another run would count them
        await asyncio.sleep(0.2)
    return runs


def _best(runs: list[dict[str, Any]], what: str) -> dict[str, Any]:
    complete = [r for r in runs if r["complete"]]
    if not complete:
        raise BenchError(f"{what}: no run delivered every event: {runs}")
    return max(complete, key=lambda r: r["rate"])


def _figures(run: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {
        f"{prefix}rate": run["rate"],
        f"{prefix}elapsed": run["elapsed"],
        # CPU microseconds per delivery: the work each side did, whatever share of the machine it got.
        f"{prefix}server_cpu_us": 1e6 * run["cpu"]["server"] / run["received"],
        f"{prefix}receiver_cpu_us": 1e6 * run["cpu"]["receivers"] / run["received"],
        # Cores kept busy: below 1.0 the server was waiting (for receivers, or for a core).
        f"{prefix}server_busy": run["cpu"]["server"] / run["elapsed"],
        f"{prefix}receiver_busy": run["cpu"]["receivers"] / run["elapsed"],
    }
