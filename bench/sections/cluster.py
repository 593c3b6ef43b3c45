"""Cluster mode: many tables on two relay nodes over a 3-server NATS JetStream cluster, against one node on
SQLite in the same run, and the gap in acknowledged rolls when the stream's leader is killed.

    python -m bench.sections.cluster          # writes bench/results/cluster.json, bench/cluster.md, the plot
    python -m bench.sections.cluster --quick  # smaller, for trying it out
    python -m bench.sections.cluster --trial 1000 6000 1 [--window 32] [--profile out.txt]
                                       # many tables only, printed as JSON (nothing recorded is rewritten);
                                       # --profile adds py-spy samples of node 1 over one more round

Many tables: the shape of bench/sections/tables.py (1,000 rooms of 6 spectator members, rolls to random rooms
with a fixed window in flight, p99 from a roll's intent to the last member of its room). In the cluster every
room has members on both nodes (one receiver process per node) and its roller on one of them (rooms
alternate), so every roll is stored through JetStream and fanned out by both nodes, one of them from the
stream.

Failover: 16 rollers (one per room, half on each node) roll one at a time, each retrying a roll that failed
with the same id, as a client does; the NATS server leading the events stream is killed with SIGKILL after
3 s. The gap is the longest time without any acknowledged roll around the kill.

The suite does not run this by default (it needs its own minutes): ``./scripts/bench --cluster`` (or
``python -m bench.sections.cluster``) runs it; ``python -m bench.report`` puts bench/cluster.md into
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import msgpack
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from websockets.asyncio.client import connect

from bench.sections import tables
from bench.sections.fanout import cpu_of, open_room_clients
from bench.sections.latency import percentile
from bench.tools import servers
from bench.tools.harness import (
    ROOT,
    VENV_BIN,
    BenchError,
    Clients,
    children,
    close_all,
    gather_expect,
    start_clients,
    start_server,
)
from bench.tools.machine import loadavg
from bench.tools.profile import Sampler
from relay.storage.nats.log import NatsLog
from relay.storage.nats.stream import STREAM
from relay.trust import tokens
from tests.cluster.natsd import NatsCluster, running_cluster

RESULTS = ROOT / "bench" / "results" / "cluster.json"
SECTION = ROOT / "bench" / "cluster.md"
PLOT = ROOT / "docs" / "images" / "bench-cluster-failover.png"
GOAL_ROLLS = 2000.0
GOAL_P99_RATIO = 3.0


def signing_key() -> str:
    return (
        Ed25519PrivateKey.generate()
        .private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        .decode()
    )


class ClusterRelays:
    """Two ``tablerelay serve`` nodes on one NATS cluster, sharing secret and signing key."""

    def __init__(self, nats: NatsCluster, run_dir: Path) -> None:
        self.nats = nats
        self.run_dir = run_dir
        self.secret = secrets.token_hex(32)
        self.env = {
            **servers.RELAY_ENV,
            "TABLERELAY_STORE": nats.store,
            "TABLERELAY_SECRET": self.secret,
            "TABLERELAY_SIGNING_KEY": signing_key(),
        }
        self.nodes: list[Any] = []

    async def start(self, count: int = 2) -> None:
        for i in range(count):
            data = Path(tempfile.mkdtemp(prefix="tablerelay-node-", dir=self.run_dir))
            argv = [
                str(VENV_BIN / "tablerelay"),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--data",
                str(data),
            ]
            log = self.run_dir / f"cluster-node{i}.log"
            self.nodes.append(await start_server("relay", argv, log, env=self.env, data=data))

    def url(self, index: int) -> str:
        return f"ws://127.0.0.1:{self.nodes[index % len(self.nodes)].port}/ws"

    async def rooms(self, count: int) -> list[servers.Room]:
        key = self.secret.encode()
        log = await NatsLog.connect(self.nats.store, follow=False)
        made = []
        try:
            for i in range(count):
                info = await log.create_room(f"bench {i}", fear_max=12, hope_max=6, max_rooms=100_000)
                made.append(
                    servers.Room(
                        info.id,
                        gm=tokens.issue(key, info.id, "gm", name="GM"),
                        player=tokens.issue(key, info.id, "player"),
                        watchers=tokens.issue(
                            key, info.id, "spectator", sub="bench-watchers", name="Watchers"
                        ),
                    )
                )
        finally:
            await log.close()
        return made

    @property
    def pids(self) -> list[int]:
        return [node.pid for node in self.nodes]

    async def stop(self) -> None:
        for node in self.nodes:
            await node.stop()


async def cluster_clients(
    relays: ClusterRelays, run_dir: Path, rooms: list[servers.Room], per_room: int
) -> tuple[Clients, list[Clients]]:
    """The driver (one GM socket per room, rooms alternating between the nodes) and one receiver process per
    node holding half of every room's members."""
    targets = [
        {"url": relays.url(i), "room": r.name, "conns": 1, "token": r.gm, "name": "GM"}
        for i, r in enumerate(rooms)
    ]
    driver = await start_clients(
        "cluster-driver",
        run_dir,
        {
            "role": "driver",
            "kind": "relay",
            "targets": targets,
            "intent": servers.INTENT,
            "label": servers.LABEL,
        },
    )
    groups = [driver]
    try:
        await driver.expect("ready", 120)
        for node in range(len(relays.nodes)):
            share = per_room // len(relays.nodes) + (1 if node < per_room % len(relays.nodes) else 0)
            chunk = [
                {
                    "url": relays.url(node),
                    "room": r.name,
                    "conns": share,
                    "token": r.watchers,
                    "name": "Watcher",
                }
                for r in rooms
            ]
            groups.append(
                await start_clients(
                    f"cluster-recv{node}",
                    run_dir,
                    {"role": "receive", "kind": "relay", "targets": chunk, "decode": True},
                )
            )
        await gather_expect(groups[1:], "ready", 240)
    except BaseException:
        await close_all(groups)
        raise
    return driver, groups[1:]


async def many_tables(
    nats: NatsCluster,
    run_dir: Path,
    *,
    rooms: int,
    per_room: int,
    rolls: int,
    window: int,
    rounds: int,
    profile: Path | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The single SQLite node and the two-node cluster, both up, taking turns round by round (so the load
    other work puts on the machine falls on both alike): (single, cluster). ``profile``: py-spy samples
    the first node in one more cluster round (not counted), summarised into ``cluster["profile"]``."""
    single = await servers.start("relay", run_dir, None, f"cluster-single-{rooms}x{per_room}")
    relays = ClusterRelays(nats, run_dir)
    groups: list[Clients] = []
    try:
        s_driver, s_receivers = await open_room_clients(
            single, run_dir, "cluster-single", rooms, per_room, procs=2, receive_options={"decode": True}
        )
        groups += [s_driver, *s_receivers]
        await relays.start()
        c_driver, c_receivers = await cluster_clients(relays, run_dir, await relays.rooms(rooms), per_room)
        groups += [c_driver, *c_receivers]
        nats_pids = [s.proc.pid for s in nats.servers if s.proc is not None]
        warm = tables.order(rooms, rolls // 4, 1)
        await tables.run_once(single.pid, s_driver, s_receivers, warm, per_room, window)
        await tables.run_once(relays.pids[0], c_driver, c_receivers, warm, per_room, window)
        single_runs, cluster_runs = [], []
        for i in range(rounds):
            picks = tables.order(rooms, rolls, tables.SEED + 10 + i)
            single_runs.append(
                await tables.run_once(single.pid, s_driver, s_receivers, picks, per_room, window)
            )
            # Each node with its nonce process, as the single node's figure counts its own.
            node_pids = [p for pid in relays.pids for p in (pid, *children(pid))]
            before = cpu_of({"nodes": node_pids, "nats": nats_pids})
            run = await tables.run_once(relays.pids[0], c_driver, c_receivers, picks, per_room, window)
            after = cpu_of({"nodes": node_pids, "nats": nats_pids})
            run["cpu_us_per_roll_nodes"] = 1e6 * (after["nodes"] - before["nodes"]) / rolls
            run["cpu_us_per_roll_nats"] = 1e6 * (after["nats"] - before["nats"]) / rolls
            cluster_runs.append(run)
        if profile is not None:
            picks = tables.order(rooms, rolls, tables.SEED + 99)
            async with Sampler(relays.pids[0], profile) as sampler:
                await tables.run_once(relays.pids[0], c_driver, c_receivers, picks, per_room, window)
            sampled = sampler.result
    finally:
        await close_all(groups)
        await relays.stop()
        await single.stop()
    cluster = summarize("cluster", cluster_runs, rooms, per_room, rolls, window)
    if profile is not None:
        cluster["profile"] = sampled
    return summarize("single", single_runs, rooms, per_room, rolls, window), cluster


def summarize(
    kind: str, runs: list[dict[str, Any]], rooms: int, per_room: int, rolls: int, window: int
) -> dict[str, Any]:
    complete = [r for r in runs if r["complete"]]
    if not complete:
        raise BenchError(f"many tables {kind}: no run delivered every event: {[brief(r) for r in runs]}")
    best = max(complete, key=lambda r: r["rolls_per_second"])
    pooled = [x for r in complete for x in r["latencies_ms"]]
    out = {
        "kind": kind,
        "rooms": rooms,
        "per_room": per_room,
        "rolls": rolls,
        "window": window,
        "rolls_per_second": best["rolls_per_second"],
        "rate": best["rate"],
        "p50_ms": percentile(pooled, 50),
        "p99_ms": percentile(pooled, 99),
        "runs": [brief(r) for r in runs],
    }
    for key in ("cpu_us_per_roll_nodes", "cpu_us_per_roll_nats", "server_cpu_us_per_roll"):
        if key in best:
            out[key] = min(r[key] for r in complete)
    return out


def brief(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k not in ("latencies_ms", "cpu_us_per_roll_by")}


# -- failover --------------------------------------------------------------------------------------------


async def stream_leader(store: str) -> str:
    log = await NatsLog.connect(store, follow=False)
    try:
        info = await log.js.stream_info(STREAM)
        assert info.cluster is not None
        return str(info.cluster.leader)
    finally:
        await log.close()


async def roller(url: str, token: str, stop: asyncio.Event, acks: list[float], errors: list[str]) -> None:
    """Roll one at a time; an error is sent again with the same id; record each ack's time."""
    async with connect(url, compression=None, max_size=None) as ws:
        await ws.send(msgpack.packb({"t": "hello", "v": 1, "token": token}))
        while True:
            # The relay speaks MessagePack in binary frames only.
            frame = msgpack.unpackb(await ws.recv(decode=False))
            if frame.get("t") == "welcome":
                break
        n = 0
        while not stop.is_set():
            n += 1
            rid = f"f{n}-{secrets.token_hex(4)}"
            while not stop.is_set():
                await ws.send(
                    msgpack.packb({"t": "roll", "id": rid, "intent": servers.INTENT, "visibility": "public"})
                )
                while True:
                    frame = msgpack.unpackb(await ws.recv(decode=False))
                    if frame.get("id") == rid and frame.get("t") in ("ack", "error"):
                        break
                if frame["t"] == "ack":
                    acks.append(time.monotonic())
                    break
                errors.append(str(frame.get("code")))
                await asyncio.sleep(0.05)


async def failover(
    nats: NatsCluster, run_dir: Path, *, rollers: int, before: float, after: float
) -> dict[str, Any]:
    relays = ClusterRelays(nats, run_dir)
    await relays.start()
    try:
        rooms = await relays.rooms(rollers)
        leader = await stream_leader(nats.store)
        stop = asyncio.Event()
        acks: list[float] = []
        errors: list[str] = []
        tasks = [
            asyncio.create_task(roller(relays.url(i), room.player, stop, acks, errors))
            for i, room in enumerate(rooms)
        ]
        t0 = time.monotonic()
        await asyncio.sleep(before)
        killed = time.monotonic()
        nats.by_name(leader).kill()
        await asyncio.sleep(after)
        stop.set()
        await asyncio.wait(tasks, timeout=15)
        for task in tasks:
            task.cancel()
        new_leader = await stream_leader(nats.store)
    finally:
        await relays.stop()
    times = sorted(a - t0 for a in acks)
    kill_at = killed - t0
    around = [t for t in times if kill_at - 1.0 <= t <= kill_at + after]
    gaps = [(b - a, a) for a, b in zip([kill_at - 1.0, *around], [*around, kill_at + after], strict=False)]
    gap, gap_start = max(gaps) if gaps else (float("nan"), kill_at)
    steady = [t for t in times if 1.0 <= t < kill_at]
    return {
        "rollers": rollers,
        "killed": leader,
        "new_leader": new_leader,
        "kill_at": kill_at,
        "gap_seconds": gap,
        "gap_start": gap_start,
        "acked": len(times),
        "acked_per_second_before": len(steady) / max(1e-9, kill_at - 1.0),
        "errors": {code: errors.count(code) for code in sorted(set(errors))},
        "ack_times": times,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = result["ack_times"]
    end = max(times) if times else 1.0
    step = 0.1
    buckets = [0] * (int(end / step) + 1)
    for t in times:
        buckets[int(t / step)] += 1
    fig, ax = plt.subplots(figsize=(8, 3.2), dpi=120)
    ax.plot([i * step for i in range(len(buckets))], [b / step for b in buckets], color="#2b6cb0", lw=1.2)
    ax.axvline(result["kill_at"], color="#c53030", ls="--", lw=1)
    ax.annotate(
        "stream leader killed", (result["kill_at"], ax.get_ylim()[1] * 0.9), color="#c53030", fontsize=8
    )
    ax.axvspan(result["gap_start"], result["gap_start"] + result["gap_seconds"], color="#feb2b2", alpha=0.5)
    ax.set_xlabel("seconds")
    ax.set_ylabel("acknowledged rolls / s")
    ax.set_title(f"Failover: {result['gap_seconds']:.2f} s without an acknowledged roll", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


# -- the run and its section ----------------------------------------------------------------------------


async def run(quick: bool) -> dict[str, Any]:
    rooms, per_room = (200, 6) if quick else (1000, 6)
    rolls, window, rounds = (1500, 32, 1) if quick else (6000, 32, 2)
    run_dir = Path(tempfile.mkdtemp(prefix="tablerelay-bench-cluster-"))
    load_start = loadavg()
    started = time.time()
    with running_cluster(run_dir / "nats-tables") as nats:
        single, cluster = await many_tables(
            nats, run_dir, rooms=rooms, per_room=per_room, rolls=rolls, window=window, rounds=rounds
        )
    with running_cluster(run_dir / "nats-failover") as nats:
        fail = await failover(nats, run_dir, rollers=16, before=3.0, after=7.0 if quick else 9.0)
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "quick": quick,
        "load_start": load_start,
        "load_end": loadavg(),
        "single": single,
        "cluster": cluster,
        "failover": fail,
    }


def section(results: dict[str, Any]) -> str:
    single, cluster, fail = results["single"], results["cluster"], results["failover"]
    p99_ratio = cluster["p99_ms"] / single["p99_ms"] if single["p99_ms"] else float("nan")
    rate_ok = cluster["rolls_per_second"] >= GOAL_ROLLS
    p99_ok = p99_ratio <= GOAL_P99_RATIO
    yes = {True: "met", False: "**not met**"}
    load = (
        ", ".join(str(x) for x in results["load_start"])
        + " → "
        + ", ".join(str(x) for x in results["load_end"])
    )

    def row(name: str, r: dict[str, Any]) -> str:
        return f"| {name} | {r['rolls_per_second']:,.0f} | {r['p50_ms']:.1f} ms | {r['p99_ms']:.1f} ms |"

    lines = [
        "## 8. Cluster mode",
        "",
        f"`python -m bench.sections.cluster`, run {results['when']} UTC (load average 1, 5, 15 min: {load}). "
        "Everything on this one 2-core machine: 3 `nats-server` processes (JetStream, R3), 2 relay nodes, "
        "the client harness and, for the single node, the same relay on SQLite, both up and taking turns. "
        "A cluster here buys no cores: it measures what JetStream's quorum writes and the second node's "
        "fan-out cost, not a scale-out.",
        "",
        f"Many tables: {cluster['rooms']:,} rooms of {cluster['per_room']} members, {cluster['rolls']:,} "
        f"rolls to random rooms per run, {cluster['window']} in flight. In the cluster each room has members "
        "on both nodes and its roller on one (rooms alternate), so every roll is fanned out by both nodes, "
        "one of them from the stream.",
        "",
        "| | acked rolls/s | p50 intent → last member | p99 intent → last member |",
        "| --- | ---: | ---: | ---: |",
        row("one node, SQLite", single),
        row("2 nodes, 3-server JetStream", cluster),
        "",
        f"Goals: acked rolls/s ≥ {GOAL_ROLLS:,.0f} in the cluster: {cluster['rolls_per_second']:,.0f}, "
        f"{yes[rate_ok]}; p99 ≤ {GOAL_P99_RATIO:.0f}× the single node's: {p99_ratio:.2f}×, {yes[p99_ok]}.",
    ]
    if "cpu_us_per_roll_nodes" in cluster:
        lines += [
            "",
            f"CPU per roll in the cluster: {cluster['cpu_us_per_roll_nodes']:,.0f} µs in the two relay nodes "
            f"together (their nonce processes included), {cluster['cpu_us_per_roll_nats']:,.0f} µs in the "
            "three NATS servers together; the "
            f"single node spent {single['server_cpu_us_per_roll']:,.0f} µs (its nonce process included).",
        ]
    lines += [
        "",
        f"Failover: {fail['rollers']} rollers (one room each, half on each node) rolling one at a time at "
        f"{fail['acked_per_second_before']:,.0f} acked rolls/s; the stream leader ({fail['killed']}) was "
        f"killed with SIGKILL at {fail['kill_at']:.1f} s and {fail['new_leader']} took over. The longest "
        f"time without an acknowledged roll: **{fail['gap_seconds']:.2f} s**. Errors the rollers saw and "
        f"sent again: {fail['errors'] or 'none'}. No acknowledged roll is lost (tests/cluster checks it on "
        "every run).",
        "",
        "![Acknowledged rolls per second around the kill of the stream leader]"
        "(images/bench-cluster-failover.png)",
        "",
    ]
    return "\n".join(lines)


async def trial(rooms: int, rolls: int, rounds: int, window: int, profile: Path | None) -> dict[str, Any]:
    """Many tables only, at a size of one's choosing, for trying a change: nothing recorded is rewritten."""
    run_dir = Path(tempfile.mkdtemp(prefix="tablerelay-bench-cluster-trial-"))
    load_start = loadavg()
    with running_cluster(run_dir / "nats-tables") as nats:
        single, cluster = await many_tables(
            nats,
            run_dir,
            rooms=rooms,
            per_room=6,
            rolls=rolls,
            window=window,
            rounds=rounds,
            profile=profile,
        )
    return {"load_start": load_start, "load_end": loadavg(), "single": single, "cluster": cluster}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--trial",
        nargs=3,
        type=int,
        metavar=("ROOMS", "ROLLS", "ROUNDS"),
        help="many tables only, printed as JSON; bench/cluster.md and the results are left as they are",
    )
    parser.add_argument("--window", type=int, default=32, help="rolls in flight (with --trial)")
    parser.add_argument("--profile", type=Path, help="with --trial: py-spy samples of node 1 go here")
    args = parser.parse_args(argv)
    if args.trial:
        rooms, rolls, rounds = args.trial
        out = asyncio.run(trial(rooms, rolls, rounds, args.window, args.profile))
        print(json.dumps(out, indent=2))
        return
    results = asyncio.run(run(args.quick))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    slim = {**results, "failover": {k: v for k, v in results["failover"].items() if k != "ack_times"}}
    RESULTS.write_text(json.dumps(slim, indent=2) + "\n")
    plot(results["failover"], PLOT)
    SECTION.write_text(section(results))
    print(section(results))


if __name__ == "__main__":
    main()
