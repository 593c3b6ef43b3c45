"""Run the benchmark suite and write docs/benchmarks.md with its plots.

    python -m bench                 # the whole suite (under 5 minutes on 2 cores)
    python -m bench --quick         # smaller sizes, about a minute; writes bench/results/quick.json only
    python -m bench --only fanout,latency
    python -m bench --no-profile    # skip the py-spy and tracemalloc diagnostic runs
    python -m bench.report          # rewrite the docs from the last results without measuring

Results go to bench/results/latest.json (full runs) or bench/results/quick.json, then the report.
``./scripts/bench`` installs what the suite needs first.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import page
from bench.sections import appends, fanout, growth, latency, memory, tables
from bench.tools import servers
from bench.tools.harness import ROOT
from bench.tools.machine import describe, loadavg, python_speed

SECTIONS = (
    "fanout",
    "latency",
    "memory",
    "appends",
    "tables",
    "growth",
    "signing",
    "dice",
    "hosted",
    "fairness",
)
RESULTS = ROOT / "bench" / "results"


@dataclass(frozen=True)
class Sizes:
    fanout_members: tuple[int, ...]
    fanout_deliveries: int  # per burst, relay and bare
    socketio_deliveries: int  # per burst: python-socketio is ~10× slower, so fewer events keep it short
    repeats: int
    latency_members: int
    latency_rate: float
    latency_seconds: float  # per run
    latency_rounds: int  # runs per server, taking turns
    memory_connections: int
    memory_history: int  # events in each room before the connections open (the relay's welcome carries them)
    traced_connections: int
    append_seconds: float
    append_windows: int  # measured windows per shape; the best counts
    append_shapes: tuple[tuple[int, int], ...]
    storage_seconds: float
    growth_members: tuple[int, ...]
    growth_rooms: tuple[tuple[int, int], ...]
    growth_kinds: tuple[str, ...]
    chain_divisor: int  # one-at-a-time runs send events // chain_divisor rolls
    profile_members: int
    signing_rounds: int  # fan-out: a burst and a chain of the signed and the unsigned relay, taking turns
    signing_pairs: int  # acked rolls: windows of the signed and the unsigned relay, taking turns
    signing_seconds: float  # each such window
    # fan-out: deliveries per burst of each relay. Longer than section 1's: at 120,000 a fast machine's burst
    # is over in about 100 ms, a few ticks of the CPU clock, and the nonce process's refill (512 pairs, made
    # in one go) is a lump inside one window rather than spread over the signatures it serves.
    signing_burst_deliveries: int
    tables_rooms: int  # many tables: rooms of tables_per_room members, rolls to random rooms
    tables_per_room: int
    tables_rolls: int  # per run
    tables_window: int  # rolls in flight
    # Runs per server, taking turns. The p99 pools them all: on 2026-11-27 one run of 6,000 rolls with a
    # stall or two moved a pool of three runs' p99 by half (eight readings of the ratio, 0.53× to 1.94×).
    tables_rounds: int
    # A hosted relay's day (bench/sections/hosted.py): tables of six rolling on their own schedules for
    # hosted_seconds, a restart under them, hosted_after seconds more; then the bare peer under the same load.
    hosted_tables: int = 3000
    hosted_seconds: float = 300.0
    hosted_after: float = 30.0
    # Fair dice (bench/sections/fairness.py): acked player rolls with fair dice on and off, taking turns, in
    # each (rooms, rollers per room) shape: one room of 100 as the signing goal's, and 100 rooms of one, where
    # a roll's fixed cost (the fair path's) weighs most. Then a GM's rolls with fair_players witnesses
    # against unwitnessed ones, fair_latency_rolls a round, taking turns.
    fair_shapes: tuple[tuple[int, int], ...] = ((1, 100), (100, 1))
    fair_rounds: int = 12
    fair_seconds: float = 1.0
    fair_players: int = 5
    fair_latency_rolls: int = 300
    fair_latency_rounds: int = 6


FULL = Sizes(
    fanout_members=(100, 1000, 5000),
    fanout_deliveries=120_000,
    socketio_deliveries=20_000,
    repeats=2,
    latency_members=1000,
    latency_rate=20.0,
    latency_seconds=8.0,
    latency_rounds=2,
    memory_connections=10_000,
    memory_history=25,
    traced_connections=200,
    append_seconds=1.5,
    append_windows=3,
    append_shapes=((1, 1), (1, 10), (1, 100), (100, 1)),
    storage_seconds=1.0,
    growth_members=(10, 100, 1000, 5000),
    growth_rooms=((1, 1000), (10, 100), (100, 10)),
    growth_kinds=("relay", "bare"),
    chain_divisor=4,
    profile_members=1000,
    signing_rounds=8,
    signing_pairs=12,
    signing_seconds=1.0,
    signing_burst_deliveries=900_000,
    tables_rooms=1000,
    tables_per_room=6,
    tables_rolls=6000,
    tables_window=32,
    tables_rounds=6,
)

QUICK = Sizes(
    fanout_members=(100, 1000),
    fanout_deliveries=30_000,
    socketio_deliveries=8_000,
    repeats=1,
    latency_members=300,
    latency_rate=20.0,
    latency_seconds=2.0,
    latency_rounds=1,
    memory_connections=500,
    memory_history=25,
    traced_connections=0,
    append_seconds=0.7,
    append_windows=1,
    append_shapes=((1, 1), (1, 10), (100, 1)),
    storage_seconds=0.4,
    growth_members=(10, 100, 1000),
    growth_rooms=((1, 1000), (10, 100)),
    growth_kinds=("relay",),
    chain_divisor=4,
    profile_members=1000,
    signing_rounds=2,
    signing_pairs=2,
    signing_seconds=0.7,
    signing_burst_deliveries=120_000,
    tables_rooms=1000,
    tables_per_room=6,
    tables_rolls=3000,
    tables_window=32,
    tables_rounds=2,
    hosted_tables=300,
    hosted_seconds=60.0,
    hosted_after=15.0,
    fair_shapes=((1, 100),),
    fair_rounds=2,
    fair_seconds=0.7,
    fair_latency_rolls=100,
    fair_latency_rounds=2,
)


async def run(sizes: Sizes, only: set[str], profile: bool, run_dir: Path) -> dict[str, Any]:
    results: dict[str, Any] = {
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": describe(),
        "sizes": sizes.__dict__,
        "sections": {},
        "timings": {},
        "load": {},
        "errors": {},
        "profiles": {},
    }
    started = time.monotonic()
    calibration = await servers.calibrate(run_dir)
    results["calibration"] = {
        "frame_size": calibration.frame_size,
        "json_size": len(servers.as_json(calibration.event, separators=(",", ":"))),
        "intent": servers.INTENT,
        "label": servers.LABEL,
    }
    print(f"relay roll event: {calibration.frame_size} bytes (MessagePack)", flush=True)

    async def section(name: str, body: Callable[[], Awaitable[Any]]) -> None:
        if name not in only:
            return
        print(f"== {name}", flush=True)
        load_before = loadavg()
        speed = python_speed()
        t0 = time.monotonic()
        try:
            results["sections"][name] = await body()
        except Exception as exc:
            # One broken section must not cost the others: record it, say so in the report.
            traceback.print_exc()
            results["errors"][name] = f"{type(exc).__name__}: {exc}"
        results["timings"][name] = round(time.monotonic() - t0, 1)
        results["load"][name] = {"before": load_before, "after": loadavg(), "python_ms": speed}
        print(f"   {name}: {results['timings'][name]} s", flush=True)

    async def do_fanout() -> list[dict[str, Any]]:
        out = []
        for members in sizes.fanout_members:
            for kind in servers.KINDS:
                budget = sizes.socketio_deliveries if kind == "socketio" else sizes.fanout_deliveries
                # python-socketio is an order of magnitude slower: fewer rolls keep its runs short.
                floor = 3 if kind == "socketio" else 10
                events = fanout.events_for(members, budget, floor)
                # One at a time, every server sends the relay's number of rolls: a roll there costs each
                # server about the same wall time, and a handful of rolls made the peer's rate (and so the
                # goal's ratio) swing from 5.4× to 11.5× between recorded runs.
                chain = max(5, fanout.events_for(members, sizes.fanout_deliveries, 10) // sizes.chain_divisor)
                wanted = profile and kind == "relay" and members == sizes.profile_members
                try:
                    r = await fanout.measure(
                        kind,
                        run_dir,
                        calibration,
                        rooms=1,
                        per_room=members,
                        events=events,
                        chain_events=chain,
                        repeats=1 if kind == "socketio" else sizes.repeats,
                        profile=run_dir / "profile-fanout" if wanted else None,
                    )
                except Exception as exc:
                    # One server failing at one size must not cost the rest of the section.
                    _failed(f"fan-out {kind} N={members}", exc)
                    continue
                for mode, summary in (r.pop("profile", None) or {}).items():
                    results["profiles"][f"fanout_{mode}"] = {"scenario": _scenario(r), **summary}
                _say(
                    f"{servers.LABELS[kind]:>16} N={members:<5} burst {r['rate']:>10,.0f}/s"
                    f"  one at a time {r.get('chain_rate', 0):>9,.0f}/s  ({r['wall_seconds']} s)"
                )
                out.append(r)
        return out

    async def do_latency() -> list[dict[str, Any]]:
        runs: dict[str, list[dict[str, Any]]] = {"relay": [], "bare": []}
        for _ in range(sizes.latency_rounds):
            for kind, done in runs.items():
                r = await latency.measure(
                    kind,
                    run_dir,
                    calibration,
                    members=sizes.latency_members,
                    rate=sizes.latency_rate,
                    seconds=sizes.latency_seconds,
                )
                _say(f"{servers.LABELS[kind]:>16} p50 {r['p50_ms']:.1f} ms  p99 {r['p99_ms']:.1f} ms")
                done.append(r)
        out = [latency.pooled(done) for done in runs.values()]
        for r in out:
            _say(f"{servers.LABELS[r['kind']]:>16} pooled over {r['events']} rolls: p99 {r['p99_ms']:.1f} ms")
        return out

    async def do_memory() -> dict[str, Any]:
        out: dict[str, Any] = {"runs": []}
        for kind in servers.KINDS:
            try:
                r = await memory.measure(
                    kind,
                    run_dir,
                    calibration,
                    connections=sizes.memory_connections,
                    history=sizes.memory_history,
                )
            except Exception as exc:
                _failed(f"memory {kind}", exc)
                continue
            _say(f"{servers.LABELS[kind]:>16} {r['kib_per_connection']:.1f} KiB per connection")
            out["runs"].append(r)
        if profile and sizes.traced_connections:
            traced = await memory.measure(
                "relay",
                run_dir,
                calibration,
                connections=sizes.traced_connections,
                history=sizes.memory_history,
                traced=run_dir / "trace-memory.json",
            )
            out["traced"] = traced
        return out

    async def do_appends() -> dict[str, Any]:
        async def acked(rooms: int, per_room: int, repeats: int, profile: Path | None = None) -> Any:
            return await appends.measure(
                run_dir,
                calibration,
                rooms=rooms,
                rollers_per_room=per_room,
                seconds=sizes.append_seconds,
                repeats=repeats,
                profile=profile,
            )

        out: dict[str, Any] = {"server": [], "storage": []}
        for rooms, per_room in sizes.append_shapes:
            r = await acked(rooms, per_room, sizes.append_windows)
            _say(f"{rooms:>3} room(s) × {per_room:<3} rollers {r['rate']:>8,.0f} acked rolls/s")
            out["server"].append(r)
        for writers in (1, 10, 100):
            r = await appends.storage(run_dir, calibration, writers=writers, seconds=sizes.storage_seconds)
            _say(f"  SqliteLog alone, {writers:>3} writers {r['rate']:>8,.0f} appends/s")
            out["storage"].append(r)
        if profile:
            # The shape with the most rollers in a room (fan-out per roll), and the one with the most rooms
            # (each roll's fixed cost, nothing shared: a hosted relay's many small tables).
            shapes = {
                "appends": max(sizes.append_shapes, key=lambda s: s[1]),
                "appends_rooms": max(sizes.append_shapes, key=lambda s: s[0]),
            }
            for key, (rooms, per_room) in shapes.items():
                r = await acked(rooms, per_room, 1, run_dir / f"profile-{key}.raw")
                results["profiles"][key] = {"scenario": _scenario(r), **r.pop("profile", {})}
        return out

    async def do_tables() -> list[dict[str, Any]]:
        rows = await tables.measure(
            ("relay", "bare"),
            run_dir,
            calibration,
            rooms=sizes.tables_rooms,
            per_room=sizes.tables_per_room,
            rolls=sizes.tables_rolls,
            window=sizes.tables_window,
            rounds=sizes.tables_rounds,
            profile=run_dir / "profile-tables.raw" if profile else None,
        )
        for r in rows:
            summary = r.pop("profile", None)
            if summary:
                results["profiles"]["tables"] = {"scenario": _scenario(r), **summary}
            _say(
                f"{servers.LABELS[r['kind']]:>16} {r['rooms']}×{r['per_room']} {r['rate']:>9,.0f}"
                f" deliveries/s"
                f" {r['rolls_per_second']:>7,.0f} rolls/s  p50 {r['p50_ms']:.1f} ms p99 {r['p99_ms']:.1f} ms"
                f"  server {r['server_cpu_us_per_roll']:.0f} µs/roll  load {loadavg()}"
            )
            _say(f"{'':>16} server CPU µs per roll by thread: {r['cpu_us_per_roll_by']}")
        return rows

    async def do_growth() -> dict[str, Any]:
        known = results["sections"].get("fanout") or []
        kinds = sizes.growth_kinds
        reuse = tuple(k for k in ("relay", "bare") if k not in kinds)
        members = await growth.measure(
            kinds,
            reuse,
            run_dir,
            calibration,
            shapes=[(1, n) for n in sizes.growth_members],
            deliveries=sizes.fanout_deliveries,
            known=known,
            repeats=sizes.repeats,
            problems=_problems,
        )
        rooms = await growth.measure(
            kinds,
            reuse,
            run_dir,
            calibration,
            shapes=list(sizes.growth_rooms),
            deliveries=sizes.fanout_deliveries,
            known=known + members,
            repeats=sizes.repeats,
            problems=_problems,
        )
        return {"members": members, "rooms": rooms}

    async def do_signing() -> dict[str, Any]:
        # What signing costs, signing on against off on the same machine, both relays up at once and
        # taking turns, so each pair of runs meets nearly the same machine: acked rolls (the roll path, one
        # signature per roll) with 100 rollers each, in short windows; fan-out to 1,000 members each (one
        # signature per roll, spread over 1,000 deliveries), in bursts and one roll at a time.
        lead = appends.LEAD_SECONDS
        paired = await appends.paired(
            run_dir,
            calibration,
            {"on": {"signing": True}, "off": {"signing": False}},
            rooms=1,
            rollers_per_room=100,
            rounds=sizes.signing_pairs,
            seconds=sizes.signing_seconds,
            lead=lead,
        )
        for i, (on, off) in enumerate(zip(paired["on"], paired["off"], strict=True), 1):
            _say(
                f"signing round {i:>2}: 100 rollers on {on['rate']:>7,.0f}  off {off['rate']:>7,.0f}"
                f" acked rolls/s  ({on['rate'] / max(off['rate'], 1):.2f}×)"
            )
        members = 1000
        events = fanout.events_for(members, sizes.signing_burst_deliveries)
        fan = await fanout.paired(
            run_dir,
            calibration,
            {"on": {"signing": True}, "off": {"signing": False}},
            rooms=1,
            per_room=members,
            events=events,
            chain_events=max(5, fanout.events_for(members, sizes.fanout_deliveries) // sizes.chain_divisor),
            rounds=sizes.signing_rounds,
        )
        for key, what in (("bursts", "burst"), ("chains", "one at a time")):
            for i, (on, off) in enumerate(zip(fan["on"][key], fan["off"][key], strict=True), 1):
                _say(
                    f"signing round {i:>2}: N={members} {what:<13} on {on['rate']:>9,.0f}"
                    f"  off {off['rate']:>9,.0f}/s  ({on['rate'] / max(off['rate'], 1):.2f}×)"
                )
        return {
            "paired": {"seconds": sizes.signing_seconds, "lead": lead, **paired},
            "fanout_paired": fan,
        }

    async def do_dice() -> Any:
        from bench.sections import dice_section

        return await asyncio.to_thread(dice_section.measure, quick=sizes is QUICK)

    await section("fanout", do_fanout)
    await section("latency", do_latency)
    await section("memory", do_memory)
    await section("appends", do_appends)
    await section("tables", do_tables)
    await section("growth", do_growth)
    await section("signing", do_signing)
    await section("dice", do_dice)

    async def do_hosted() -> dict[str, Any]:
        from bench.sections import hosted

        return await hosted.measure(
            run_dir,
            calibration,
            tables=sizes.hosted_tables,
            seconds=sizes.hosted_seconds,
            after_s=sizes.hosted_after,
        )

    await section("hosted", do_hosted)

    async def do_fairness() -> dict[str, Any]:
        from bench.sections import fairness

        result: dict[str, Any] = await fairness.measure(
            run_dir,
            calibration,
            shapes=sizes.fair_shapes,
            rounds=sizes.fair_rounds,
            seconds=sizes.fair_seconds,
            lead=appends.LEAD_SECONDS,
            players=sizes.fair_players,
            latency_rolls=sizes.fair_latency_rolls,
            latency_rounds=sizes.fair_latency_rounds,
            say=_say,
        )
        return result

    await section("fairness", do_fairness)
    results["duration"] = round(time.monotonic() - started, 1)
    results["problems"] = list(_problems)
    return results


def _scenario(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in ("runs", "chain_runs", "profile")}


def _failed(what: str, exc: BaseException) -> None:
    traceback.print_exception(exc)
    _problems.append(f"{what}: {type(exc).__name__}: {str(exc)[:300]}")


_problems: list[str] = []


def _say(text: str) -> None:
    print("   " + text, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description="tablerelay's benchmark suite")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, about a minute")
    parser.add_argument("--only", help=f"comma-separated sections: {','.join(SECTIONS)}")
    parser.add_argument("--no-profile", action="store_true", help="skip the diagnostic profiling runs")
    parser.add_argument("--keep", action="store_true", help="keep the run folder (server logs, raw profiles)")
    parser.add_argument("--results", type=Path, help="where to write the results JSON")
    parser.add_argument("--no-report", action="store_true", help="do not rewrite docs/benchmarks.md")
    parser.add_argument(
        "--report",
        action="store_true",
        help="rewrite docs/benchmarks.md even in --quick mode (off by default)",
    )
    parser.add_argument(
        "--hosted-tables",
        type=int,
        help="the hosted section's tables of six (default 3,000; --quick 300); 18,000 sockets need the "
        "machine's 20,000 descriptors per process and a quiet machine for 5 minutes",
    )
    parser.add_argument("--hosted-seconds", type=float, help="the hosted section's steady run (default 300)")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="run the cluster section instead (bench/sections/cluster.py: NATS servers, two nodes; about 5 "
        "minutes)",
    )
    args = parser.parse_args(argv)
    if args.cluster:
        from bench.sections import cluster

        cluster.main(["--quick"] if args.quick else [])
        return 0
    only = set(args.only.split(",")) if args.only else set(SECTIONS)
    unknown = only - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    if shutil.which("node") is None:
        print("bench: node is not installed (the client harness runs on Node 20+)", file=sys.stderr)
        return 2
    if not (ROOT / "bench" / "receivers" / "node_modules").exists():
        print("bench: run `npm ci --prefix bench/receivers` first (or ./scripts/bench)", file=sys.stderr)
        return 2
    sizes = QUICK if args.quick else FULL
    if args.hosted_tables is not None or args.hosted_seconds is not None:
        sizes = dataclasses.replace(
            sizes,
            hosted_tables=args.hosted_tables or sizes.hosted_tables,
            hosted_seconds=args.hosted_seconds or sizes.hosted_seconds,
        )
    run_dir = Path(tempfile.mkdtemp(prefix="tablerelay-bench-"))
    try:
        # Profiles are diagnostics for the published page; a quick run skips them.
        profile = not args.no_profile and not args.quick
        results = asyncio.run(run(sizes, only, profile, run_dir))
    finally:
        if args.keep:
            print(f"run folder kept: {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    results["mode"] = "quick" if args.quick else "full"
    out = args.results or RESULTS / ("quick.json" if args.quick else "latest.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    if only != set(SECTIONS) and out.exists():
        # A partial run updates its sections in the last full results instead of dropping the others.
        previous = json.loads(out.read_text())
        for key in ("sections", "timings", "load", "profiles"):
            previous.setdefault(key, {}).update(results[key])
        previous["errors"] = {
            **{k: v for k, v in previous.get("errors", {}).items() if k not in only},
            **results["errors"],
        }
        # The suite's own duration and sizes stay those of the last full run; the machine and the
        # calibration are this run's (the updated sections were measured with them).
        previous["machine"] = results["machine"]
        previous["calibration"] = results["calibration"]
        previous["problems"] = results.get("problems", [])
        previous.setdefault("updated", []).append({"sections": sorted(only), "started": results["started"]})
        results = previous
    out.write_text(json.dumps(results, indent=1))
    print(f"results: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} ({results['duration']} s)")
    # A quick run's sizes are too small for the published page: it only writes its results file.
    if not args.no_report and (args.report or not args.quick):
        written = page.write(results)
        for path in written:
            print(f"wrote {path.relative_to(ROOT)}")
    return 1 if results["errors"] or results.get("problems") else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
