"""The cluster's event log alone: this process's CPU per append through ``relay.storage.nats.log.NatsLog``,
against the same file at another git revision, taking turns in one run.

    python -m bench.studies.nats_log                  # this working tree against HEAD, 4 rounds
    python -m bench.studies.nats_log --against REV --rounds 6

A 3-server JetStream cluster on loopback (as the cluster tests start it); in each turn one ``NatsLog``
appends to 200 rooms at once, one append in flight per room, 25 each, while a second one follows every room
and is handed the first one's events, as a second relay node is. The CPU of this process (both logs and the
NATS client under them, no sockets, no rules) per append is the figure: it is the part of a cluster node's
cost per roll that the log's own code decides, which the many-tables run on the cluster cannot show apart
from its own noise (its rates move by more than a tenth between runs on this shared machine). Only
``relay/storage/nats/log.py`` is taken from the other revision; everything it imports is this tree's.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import uvloop

from bench.tools.harness import ROOT, turn_order
from tests.cluster.natsd import running_cluster

ROOMS = 200
PER_ROOM = 25
# Where the log's file is, newest first: relay/log/nats.py moved to relay/storage/nats.py in c855932, and to
# relay/storage/nats/log.py when the backends got folders of their own.
PATHS = ("relay/storage/nats/log.py", "relay/storage/nats.py", "relay/log/nats.py")
CODEC_BEFORE = b"from relay.storage.sqlite import decode_record, encode_record"
CODEC = b"from relay.storage.codec import decode_record, encode_record"


def record(seq: int) -> dict[str, Any]:
    """A small stored record: what is measured is the log's work per append, not the encoding of a roll."""
    return {
        "seq": seq,
        "ts": 1_700_000_000_000 + seq,
        "kind": "roll",
        "epoch": "e",
        "actor": {"id": "a", "name": "A", "role": "player"},
        "visibility": "public",
    }


def module_at(revision: str | None, folder: Path) -> ModuleType:
    """``relay/storage/nats/log.py`` of ``revision`` (None: this working tree), loaded under a name of its
    own."""
    name = f"nats_log_{revision or 'work'}".replace("-", "_").replace("~", "_").replace("^", "_")
    path = ROOT / PATHS[0]
    if revision is not None:
        path = folder / f"{name}.py"
        path.write_bytes(source_at(revision))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def source_at(revision: str) -> bytes:
    """The log's file as it was at ``revision``, at whichever of its paths that revision has."""
    for where in PATHS:
        shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:{where}"], capture_output=True)
        if shown.returncode == 0:
            # Before relay.storage.codec, the log took the record codec from the SQLite log's module.
            return shown.stdout.replace(CODEC_BEFORE, CODEC)
    raise SystemExit(f"bench.studies.nats_log: {revision} has none of {', '.join(PATHS)}")


async def turn(module: ModuleType, store: str) -> tuple[float, float]:
    """CPU µs per append and appends per second, one turn."""
    writer = await module.NatsLog.connect(store)
    follower = await module.NatsLog.connect(store)
    try:
        rooms = []
        for _ in range(ROOMS):
            info = await writer.create_room("bench", fear_max=12, hope_max=6, max_rooms=1_000_000)
            rooms.append(info.id)
        everything = asyncio.get_running_loop().create_future()
        handed = 0

        def deliver(records: list[dict[str, Any]]) -> None:
            nonlocal handed
            handed += len(records)
            if handed == ROOMS * PER_ROOM and not everything.done():
                everything.set_result(None)

        for room in rooms:
            await writer.state(room)
            await follower.state(room)
            follower.follow(room, 0, deliver)

        async def roll(room: str) -> None:
            seq = 0
            for _ in range(PER_ROOM):
                seq = await writer.append(room, [record(seq + 1)], seq)

        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(roll(room) for room in rooms))
        await asyncio.wait_for(everything, 30)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        return cpu / (ROOMS * PER_ROOM) * 1e6, ROOMS * PER_ROOM / wall
    finally:
        await asyncio.gather(writer.close(), follower.close())


Turns = dict[str, list[tuple[float, float]]]


async def run(modules: dict[str, ModuleType], store: str, rounds: int) -> Turns:
    results: Turns = {name: [] for name in modules}
    names = list(modules)
    for index in range(rounds):
        for name in turn_order(names, index):
            results[name].append(await turn(modules[name], store))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--against", default="HEAD", help="the git revision to compare with (HEAD)")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        modules = {args.against: module_at(args.against, folder), "work": module_at(None, folder)}
        with running_cluster(folder / "nats") as cluster:
            results = uvloop.run(run(modules, cluster.store, args.rounds))
    medians = {name: statistics.median(cpu for cpu, _ in turns) for name, turns in results.items()}
    for name, turns in results.items():
        cpus = ", ".join(f"{cpu:.1f}" for cpu, _ in turns)
        rates = ", ".join(f"{rate:,.0f}" for _, rate in turns)
        print(f"{name:>12}: CPU per append {cpus} µs (median {medians[name]:.1f}); appends/s {rates}")
    print(f"work ÷ {args.against}, median CPU per append: {medians['work'] / medians[args.against]:.2f}×")


if __name__ == "__main__":
    main()
