"""A/B runs of relay variants in one run, taking turns, for measuring a change before keeping it.

    python -m bench.studies.ab --shape tables --rounds 3 base=HEAD new=work
    python -m bench.studies.ab --shape rooms100 --rounds 4 base=HEAD new=work \
        new+uv=work:TABLERELAY_LOOP=uvloop
    python -m bench.studies.ab --shape signing --rounds 3 new=work   # each variant signing on, then off
    python -m bench.studies.ab --shape pairs --rounds 12 new=work    # the same, all up at once, in turns
    python -m bench.studies.ab --shape fanpairs100 --rounds 10 new=work
                                                 # one room of 100, against bare, in turns

A variant is ``NAME=TREE[:VAR=VALUE,...]``: ``TREE`` is ``work`` (this working tree), a folder holding
``relay/`` and ``rules/``, or a git revision, whose ``relay/`` and ``rules/`` are exported to a temporary
folder; a folder or revision runs ahead of the editable install;
the variables are added to the relay's environment. Shapes:

- ``tables``: the many-tables section (1,000 rooms × 6, rolls to random rooms, 32 in flight); every
  variant stays up and the variants take turns, round after round, with the bare ``websockets`` server
  (on asyncio's loop and on uvloop) as two more turns unless ``--no-bare``.
- ``rooms100`` / ``room100``: acked rolls with 100 rooms × 1 roller / 100 rollers in one room; a fresh
  server per window, the variants taking turns.
- ``signing``: ``room100`` with signing on and off for each variant, taking turns.
- ``pairs``: the signing section's method: every variant signed and unsigned, all up at once with 100
  rollers each, taking turns in windows of ``--seconds``; each variant's signed ÷ unsigned, the median
  of the rounds' ratios.
- ``fanpairs100`` / ``fanpairs1000``: fan-out into a room of 100 / 1,000, every variant and the bare
  ``websockets`` server up at once, taking turns (a burst each, then one roll at a time each, round after
  round); each variant's ratio to bare, the median of the rounds'.
- ``chain1`` / ``chain100`` / ``chain1000``: the fan-out section's one roll at a time into a room of 1 / 100 /
  1,000 (a fresh server per turn), with the bare ``websockets`` server as one more turn unless ``--no-bare``.
  A room of one shows a roll's fixed cost (CPU per roll = per delivery), the part a larger room shares out.
- ``burst1000``: the fan-out section's bursts into a room of 1,000, each variant signing on and off,
  taking turns (a fresh server per turn).

The machine is shared, so wall-clock rates are noisy: the figures to compare are the server's CPU per roll
(event loop thread, other threads, the signing child) and ratios of variants measured in the same round.
Nothing here is part of the published page; ``bench/changes.md`` records what a change bought.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.report.signing import paired_ratio, per_delivery_us, windows_cpu
from bench.sections import appends, fanout, tables
from bench.tools import servers
from bench.tools.harness import ROOT
from bench.tools.machine import loadavg


@dataclass
class Variant:
    name: str
    source: Path | None  # None: this working tree
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> dict[str, Any]:
        return {"source": self.source, "extra_env": self.env}


def parse_variant(text: str, scratch: Path) -> Variant:
    name, _, spec = text.partition("=")
    tree, _, assignments = spec.partition(":")
    env = dict(item.split("=", 1) for item in assignments.split(",") if item)
    if not name or not tree:
        raise SystemExit(f"a variant is NAME=TREE[:VAR=VALUE,...], not {text!r}")
    if tree == "work":
        return Variant(name, None, env)
    if os.path.isdir(tree):  # a prepared folder holding relay/ and rules/ (a compiled build, say)
        return Variant(name, Path(tree).resolve(), env)
    folder = scratch / f"tree-{name}"
    folder.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", tree, "relay", "rules"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return Variant(name, folder, env)


def _say(text: str) -> None:
    print(text, flush=True)


async def run_tables(variants: list[Variant], run_dir: Path, rounds: int, bare: bool) -> None:
    calibration = await servers.calibrate(run_dir)
    kinds = tuple(f"relay-{v.name}" for v in variants) + (("bare", "bare-asyncio") if bare else ())
    options: dict[str, dict[str, Any]] = {f"relay-{v.name}": v.start() for v in variants}
    options["bare-asyncio"] = {"extra_env": {"BENCH_PEER_LOOP": "asyncio"}}
    rows = await tables.measure(
        kinds,
        run_dir,
        calibration,
        rooms=1000,
        per_room=6,
        rolls=3000,
        window=32,
        rounds=rounds,
        options=options,
    )
    for row in rows:
        _say(
            f"{row['kind']:>16}  best {row['rate']:>8,.0f} deliveries/s  p99 {row['p99_ms']:.1f} ms"
            f"  min CPU {row['server_cpu_us_per_roll']:.0f} µs/roll"
        )
        for run in row["runs"]:
            _say(
                f"{'':>18}{run['rate']:>8,.0f}/s  {run['server_cpu_us_per_roll']:>5.0f} µs/roll"
                f"  {run['cpu_us_per_roll_by']}  p99 {run['p99_ms']:.1f} ms"
            )


def _turns(
    variants: list[Variant], rounds: int, signing_both: bool
) -> Iterator[tuple[int, Variant, bool, str]]:
    """(round, variant, signing, name) for every turn: the variants in order, round after round, each
    signing on then off when ``signing_both``."""
    for i in range(rounds):
        for variant in variants:
            for signing in (True, False) if signing_both else (True,):
                name = f"{variant.name}{'' if signing else ' unsigned'}" if signing_both else variant.name
                yield i + 1, variant, signing, name


async def run_appends(
    variants: list[Variant], run_dir: Path, rounds: int, rooms: int, per_room: int, signing_both: bool
) -> None:
    calibration = await servers.calibrate(run_dir)
    results: dict[str, list[dict[str, Any]]] = {}
    for i, variant, signing, key in _turns(variants, rounds, signing_both):
        r = await appends.measure(
            run_dir,
            calibration,
            rooms=rooms,
            rollers_per_room=per_room,
            seconds=1.5,
            repeats=2,
            signing=signing,
            **variant.start(),
        )
        results.setdefault(key, []).append(r)
        _say(
            f"round {i} {key:>16} {r['rate']:>7,.0f} acked/s"
            f"  {r['cpu_us_per_roll']:>5.0f} µs/roll  {r['cpu_us_per_roll_by']}"
            f"  server {r['server_cpu']:.2f} cores, rollers {r['client_cpu']:.2f}  load {loadavg()}"
        )
    for key, runs in results.items():
        rates = [r["rate"] for r in runs]
        cpus = [r["cpu_us_per_roll"] for r in runs]
        _say(
            f"{key:>16}: median {statistics.median(rates):>7,.0f} acked/s"
            f" (max {max(rates):,.0f}), median {statistics.median(cpus):.0f} µs/roll (min {min(cpus):.0f})"
        )


async def run_pairs(variants: list[Variant], run_dir: Path, rounds: int, seconds: float) -> None:
    """The signing section's method: every variant signed and unsigned, all up at once, taking turns in
    short windows (``appends.paired``); the figure is the median of the rounds' signed ÷ unsigned."""
    calibration = await servers.calibrate(run_dir)
    setups = {
        f"{v.name}{'' if signing else ' unsigned'}": {"signing": signing, **v.start()}
        for v in variants
        for signing in (True, False)
    }
    out = await appends.paired(
        run_dir, calibration, setups, rooms=1, rollers_per_room=100, rounds=rounds, seconds=seconds
    )
    names = list(out)
    for i in range(rounds):
        cells = "  ".join(f"{name} {out[name][i]['rate']:>6,.0f}" for name in names)
        _say(f"round {i + 1:>2}  {cells}  acked/s")
    for name in names:
        windows = out[name]
        cpu = windows_cpu(windows)
        _say(
            f"{name:>16}: median {statistics.median(w['rate'] for w in windows):>7,.0f} acked/s;"
            f" µs per roll: loop {cpu.get('event loop thread', 0.0):.0f},"
            f" nonces {cpu.get('child processes', 0.0):.0f}, rollers {cpu['rollers']:.0f}"
        )
    for v in variants:
        pair = paired_ratio(out[v.name], out[f"{v.name} unsigned"])
        if pair is not None:
            _say(
                f"{v.name:>16}: signed ÷ unsigned {pair['ratio']:.3f}"
                f" (the rounds' median; {pair['low']:.2f}–{pair['high']:.2f})"
            )


async def run_chain(
    variants: list[Variant],
    run_dir: Path,
    rounds: int,
    bare: bool,
    members: int = 100,
    deliveries: int = 22_500,
) -> None:
    calibration = await servers.calibrate(run_dir)
    turns: list[tuple[str, str, dict[str, Any]]] = [("relay", v.name, v.start()) for v in variants]
    if bare:
        turns.append(("bare", "bare", {}))
    results: dict[str, list[dict[str, Any]]] = {}
    for i in range(rounds):
        for kind, name, start in turns:
            r = await fanout.measure(
                kind,
                run_dir,
                calibration,
                rooms=1,
                per_room=members,
                events=20,
                chain_events=deliveries // members,
                repeats=1,
                tag=f"ab-{name}",
                **start,
            )
            results.setdefault(name, []).append(r)
            _say(
                f"round {i + 1} {name:>16} one at a time {r['chain_rate']:>9,.0f} deliveries/s"
                f"  {r['chain_server_cpu_us']:.2f} µs per delivery"
                f" ({r['chain_server_cpu_us'] * members:,.0f} per roll)  load {loadavg()}"
            )
    for name, runs in results.items():
        rates = [r["chain_rate"] for r in runs]
        cpus = [r["chain_server_cpu_us"] for r in runs]
        _say(
            f"{name:>16}: best {max(rates):>9,.0f}/s, median {statistics.median(rates):,.0f}/s,"
            f" CPU per delivery median {statistics.median(cpus):.2f} µs (min {min(cpus):.2f})"
        )


async def run_burst(variants: list[Variant], run_dir: Path, rounds: int) -> None:
    calibration = await servers.calibrate(run_dir)
    results: dict[str, list[dict[str, Any]]] = {}
    for i, variant, signing, key in _turns(variants, rounds, True):
        r = await fanout.measure(
            "relay",
            run_dir,
            calibration,
            rooms=1,
            per_room=1000,
            events=fanout.events_for(1000, 120_000),
            repeats=2,
            tag=f"ab-{variant.name}",
            signing=signing,
            **variant.start(),
        )
        results.setdefault(key, []).append(r)
        _say(
            f"round {i} {key:>16} bursts {r['rate']:>10,.0f} deliveries/s"
            f"  {r['server_cpu_us']:.2f} µs per delivery, server {r['server_busy']:.2f} cores,"
            f" receivers {r['receiver_busy']:.2f}  load {loadavg()}"
        )
    for key, runs in results.items():
        rates = [r["rate"] for r in runs]
        cpus = [r["server_cpu_us"] for r in runs]
        _say(
            f"{key:>16}: best {max(rates):>10,.0f}/s, median {statistics.median(rates):,.0f}/s,"
            f" CPU per delivery median {statistics.median(cpus):.2f} µs (min {min(cpus):.2f})"
        )


async def run_fan_pairs(variants: list[Variant], run_dir: Path, rounds: int, members: int) -> None:
    """Fan-out into one room of ``members``, every variant and the bare ``websockets`` server up at once,
    taking turns (``fanout.paired``): a burst each, then one roll at a time each, round after round; each
    variant's ratio to bare is the median of the rounds'."""
    calibration = await servers.calibrate(run_dir)
    events = fanout.events_for(members, 120_000)
    setups: dict[str, dict[str, Any]] = {v.name: v.start() for v in variants}
    setups["bare"] = {"kind": "bare"}
    out = await fanout.paired(
        run_dir,
        calibration,
        setups,
        rooms=1,
        per_room=members,
        events=events,
        chain_events=max(5, events // 4),
        rounds=rounds,
    )
    for key, what in (("bursts", "bursts"), ("chains", "one at a time")):
        bare = out["bare"][key]
        for name, kinds in out.items():
            runs = kinds[key]
            pair = paired_ratio(runs, bare)
            assert pair is not None  # every run delivered every event (fanout.paired checks)
            _say(
                f"{what:>13} {name:>10}: median {pair['on']:>9,.0f} deliveries/s,"
                f" {per_delivery_us(runs) or 0.0:.2f} µs per delivery; ÷ bare {pair['ratio']:.3f}"
                f" (the rounds' median; {pair['low']:.2f}–{pair['high']:.2f})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.ab", description=__doc__.split("\n")[0])
    shapes = (
        "tables",
        "rooms100",
        "room100",
        "signing",
        "pairs",
        "fanpairs100",
        "fanpairs1000",
        "chain1",
        "chain100",
        "chain1000",
        "burst1000",
    )
    parser.add_argument("--shape", choices=shapes, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-bare", action="store_true", help="tables, chains: no bare websockets turn")
    parser.add_argument(
        "--deliveries", type=int, default=22_500, help="chains: deliveries per turn (longer: less noise)"
    )
    parser.add_argument("--seconds", type=float, default=1.0, help="pairs: each window's length")
    parser.add_argument("variants", nargs="+", help="NAME=TREE[:VAR=VALUE,...]")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="tablerelay-ab-"))
    try:
        variants = [parse_variant(text, scratch) for text in args.variants]
        _say(f"load {loadavg()}")
        if args.shape == "tables":
            body = run_tables(variants, scratch, args.rounds, not args.no_bare)
        elif args.shape == "rooms100":
            body = run_appends(variants, scratch, args.rounds, 100, 1, False)
        elif args.shape in ("chain1", "chain100", "chain1000"):
            members = int(args.shape.removeprefix("chain"))
            body = run_chain(variants, scratch, args.rounds, not args.no_bare, members, args.deliveries)
        elif args.shape == "pairs":
            body = run_pairs(variants, scratch, args.rounds, args.seconds)
        elif args.shape in ("fanpairs100", "fanpairs1000"):
            members = int(args.shape.removeprefix("fanpairs"))
            body = run_fan_pairs(variants, scratch, args.rounds, members)
        elif args.shape == "burst1000":
            body = run_burst(variants, scratch, args.rounds)
        elif args.shape == "room100":
            body = run_appends(variants, scratch, args.rounds, 1, 100, False)
        else:
            body = run_appends(variants, scratch, args.rounds, 1, 100, True)
        asyncio.run(body)
        _say(f"load {loadavg()}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
