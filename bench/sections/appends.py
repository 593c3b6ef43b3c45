"""Durable appends: acknowledged rolls per second (SQLite, the default durability).

Each roller is a player socket that sends a roll, waits for its ack (sent only once the roll is committed)
and sends the next: R rollers keep R rolls in flight. Scenarios: 1, 10 and 100 rollers in one room, and
100 rollers each in a room of its own. In one room every roller is also a member, so each acknowledged
roll is also delivered to all R rollers; across 100 rooms each roll reaches only its roller.

The rollers are a load generator, not a client under test: they read each frame's header and decode only
the small frames (acks and errors), skipping event payloads unread (``openLean`` in the harness). With the
full ``ws`` client, parsing half a million deliveries a second took two thirds of a core on this 2-core
machine, beside the server it was meant to measure.

Beside the server figures, ``storage`` measures the event log alone, in this process: the same roll records
appended through ``relay.storage.sqlite.log.SqliteLog`` by 1, 10 and 100 concurrent writers, no sockets. It is
the ceiling the storage layer puts on the server's figure.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.sections.tables import split_cpu
from bench.tools import servers
from bench.tools.harness import (
    BenchError,
    Clients,
    close_all,
    cpu_seconds,
    gather_expect,
    split,
    start_clients,
    turn_order,
)
from bench.tools.profile import Sampler
from bench.tools.servers import Calibration
from relay.storage.sqlite.log import SqliteLog

#: Seconds of unmeasured rolling before each of ``paired``'s windows (see there): at the acked rates this
#: machine reaches, enough to use up a full pool of nonce pairs.
LEAD_SECONDS = 0.4


class Rig:
    """One relay with its rollers connected and idle between windows: ``window`` runs them for a while."""

    def __init__(self, server: servers.Server, groups: list[Clients], rollers_per_room: int) -> None:
        self.server = server
        self.groups = groups
        self.rollers_per_room = rollers_per_room

    @classmethod
    async def open(
        cls,
        run_dir: Path,
        calibration: Calibration,
        *,
        rooms: int,
        rollers_per_room: int,
        signing: bool = True,
        tag: str = "",
        seed: bool = False,
        **start: Any,
    ) -> Rig:
        """``start`` adds ``servers.start`` arguments (``bench.studies.ab``'s variants: a source tree,
        environment); ``seed`` has every roll carry a roller seed, as the JS client sends with fair dice."""
        name = f"appends-{rooms}x{rollers_per_room}{tag}"
        server = await servers.start("relay", run_dir, calibration, name, signing=signing, **start)
        groups: list[Clients] = []
        try:
            made = server.add_rooms(rooms)
            total = rooms * rollers_per_room
            parts = 1 if total * rollers_per_room < 1000 else 2  # deliveries to in-room rollers weigh most
            for i, chunk in enumerate(split(server.targets("roller", made, rollers_per_room), parts)):
                groups.append(
                    await start_clients(
                        f"{name}-{i}",
                        run_dir,
                        {
                            "role": "roller",
                            "kind": "relay",
                            "targets": [t for t in chunk if t["conns"]],
                            "intent": servers.INTENT,
                            "label": servers.LABEL,
                            "lean": True,
                            "seed": seed,
                        },
                    )
                )
            await gather_expect(groups, "ready", 120)
        except BaseException:
            await close_all(groups)
            await server.stop()
            raise
        return cls(server, groups, rollers_per_room)

    async def window(self, seconds: float, profile: Path | None = None) -> dict[str, Any]:
        """Every roller rolls for ``seconds``: acks, server CPU (all of it and by thread), rollers' CPU."""
        server, groups = self.server, self.groups
        sampler = Sampler(server.pid, profile) if profile is not None else None
        async with sampler or contextlib.nullcontext():
            cpu0 = server.process.cpu_seconds()
            split0 = split_cpu(server.pid)
            client0 = sum(cpu_seconds(g.proc.pid) for g in groups)
            for group in groups:
                group.send(cmd="go", duration=seconds)
            done = await gather_expect(groups, "done", seconds + 60)
            cpu = server.process.cpu_seconds() - cpu0
            split1 = split_cpu(server.pid)
            client_cpu = sum(cpu_seconds(g.proc.pid) for g in groups) - client0
        by = {k: v - split0.get(k, 0.0) for k, v in split1.items() if v > split0.get(k, 0.0)}
        acks = sum(d["acks"] for d in done)
        closes = _tally(done, "closes")
        if closes or not acks:
            # A window without rollers is no measurement: say so rather than record a rate of nothing.
            raise BenchError(f"appends window: {acks} acks, sockets closed by the server: {closes or 'none'}")
        return {
            "seconds": seconds,
            "acks": acks,
            "rate": acks / seconds,
            "deliveries_per_second": acks * self.rollers_per_room / seconds,
            # Cores busy on average: the server, and the roller processes.
            "server_cpu": cpu / seconds,
            "client_cpu": client_cpu / seconds,
            # Server CPU per acked roll (µs), all of it and by thread (event loop, others, signing child).
            "cpu_us_per_roll": 1e6 * cpu / max(1, acks),
            "cpu_us_per_roll_by": {k: round(1e6 * v / max(1, acks), 1) for k, v in by.items()},
            "errors": _tally(done, "errors"),
            **({"profile": sampler.result} if sampler is not None else {}),
        }

    async def close(self) -> None:
        await close_all(self.groups)
        await self.server.stop()


def _tally(done: list[dict[str, Any]], key: str) -> dict[str, int]:
    """The roller processes' counts under ``key`` (close reasons, error codes), added up."""
    total: dict[str, int] = {}
    for counts in done:
        for name, n in (counts.get(key) or {}).items():
            total[name] = total.get(name, 0) + n
    return total


async def measure(
    run_dir: Path,
    calibration: Calibration,
    *,
    rooms: int,
    rollers_per_room: int,
    seconds: float,
    warmup: float = 0.5,
    repeats: int = 2,
    profile: Path | None = None,
    signing: bool = True,
    **start: Any,
) -> dict[str, Any]:
    """Acknowledged rolls per second, the best of ``repeats`` windows after a warm-up; ``profile`` samples
    the server (py-spy) in the last window."""
    rig = await Rig.open(
        run_dir, calibration, rooms=rooms, rollers_per_room=rollers_per_room, signing=signing, **start
    )
    try:
        await rig.window(warmup)
        windows = [await rig.window(seconds, profile if i == repeats - 1 else None) for i in range(repeats)]
    finally:
        await rig.close()
    # The best window: on a shared machine, interference only ever slows one down.
    best = max(windows, key=lambda w: w["acks"])
    profiled = windows[-1].get("profile")
    return {
        "rooms": rooms,
        "rollers_per_room": rollers_per_room,
        "rollers": rooms * rollers_per_room,
        "signing": signing,
        **{k: v for k, v in best.items() if k != "profile"},
        "windows": [w["acks"] for w in windows],
        **({"profile": profiled} if profiled is not None else {}),
    }


async def paired(
    run_dir: Path,
    calibration: Calibration,
    setups: Mapping[str, Mapping[str, Any]],
    *,
    rooms: int,
    rollers_per_room: int,
    rounds: int,
    seconds: float,
    warmup: float = 0.5,
    lead: float = LEAD_SECONDS,
) -> dict[str, list[dict[str, Any]]]:
    """Windows of several relays (``setups``: name -> ``Rig.open`` arguments), all up at once, taking turns.

    Round after round each relay's rollers roll for ``seconds`` while the others' wait, the order reversed
    every other round (A B, B A, …) so that neither side always follows the other. On a shared machine
    whose speed drifts from one second to the next, two windows a second apart meet nearly the same
    machine: the ratio of each round's pair is a far steadier figure than two runs minutes apart.

    Each measured window follows ``lead`` seconds of rolling that are not measured, so it meets the relay
    as sustained load does: a signing relay idle during the others' turns fills its pool of nonce pairs
    (``relay.trust.nonces``, up to two batches). Without the lead-in its window started on pairs made during
    another side's window, and made them up during the next side's: both in signing's favour.
    Returns each setup's windows in round order.
    """
    rigs: dict[str, Rig] = {}
    try:
        for name, options in setups.items():
            rigs[name] = await Rig.open(
                run_dir,
                calibration,
                rooms=rooms,
                rollers_per_room=rollers_per_room,
                tag=f"-{name}",
                **options,
            )
            await rigs[name].window(warmup)
        out: dict[str, list[dict[str, Any]]] = {name: [] for name in rigs}
        names = list(rigs)
        for i in range(rounds):
            for name in turn_order(names, i):
                if lead:
                    await rigs[name].window(lead)
                out[name].append(await rigs[name].window(seconds))
        return out
    finally:
        await asyncio.gather(*(rig.close() for rig in rigs.values()), return_exceptions=True)


async def storage(run_dir: Path, calibration: Calibration, *, writers: int, seconds: float) -> dict[str, Any]:
    """Roll records appended per second by ``writers`` concurrent writers to ``SqliteLog`` alone."""
    record = {k: v for k, v in calibration.event.items() if k != "t"}
    folder = Path(tempfile.mkdtemp(prefix="storage-", dir=run_dir))
    log = SqliteLog(folder / "tablerelay.sqlite3")
    try:
        room = await log.create_room("storage", fear_max=12, hope_max=6, max_rooms=10)
        seq = 0
        count = 0
        deadline = time.perf_counter() + seconds

        async def writer() -> None:
            nonlocal seq, count
            while time.perf_counter() < deadline:
                seq += 1
                await log.append(room.id, [{**record, "seq": seq}], seq - 1)
                count += 1

        started = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(writers)))
        elapsed = time.perf_counter() - started
        stats = log.stats
    finally:
        await log.close()
    return {
        "writers": writers,
        "rate": count / elapsed,
        "transactions": stats.transactions,
        "appends_per_transaction": stats.appends / max(1, stats.transactions),
    }
