"""The upkeep's garbage collections under a hosted load: variants of the relay taking turns, in one run.

    python -m bench.studies.gc --tables 1000 --seconds 130 --rounds 2 before=HEAD after=work
    python -m bench.studies.gc before=work:TABLERELAY_FULL_GC=whole after=work

Each turn is ``bench.sections.hosted.relay_run`` without its restart: a fresh relay process on a fresh
SQLite data folder, ``tables`` tables of six real JS clients (``bench/receivers/hosted.mjs``) rolling on
their own schedules for ``seconds`` (long enough for two of the upkeep's minutely passes), and the log
checked against every client. The variants take turns, round after round (A B A B ...), so a machine
shared with other work weighs on each alike. A variant is ``NAME=TREE[:VAR=VALUE,...]`` as in
``bench.studies.ab``; ``--bare`` adds the bare ``websockets`` per-room broadcast peer under the same tables
as one more turn (the hosted section's peer), and prints each variant's p99 ÷ bare's.

Per turn: the event loop's lag at its worst (the largest ``/healthz`` loop-lag maximum read during the
run), intent → last member p50 / p99 / max over the steady part, the relay's peak RSS, and from its log
the ``memory_trimmed`` lines (each minute's longest collection: its pause and its thread CPU time). Then
each figure as the first variant ÷ each other one, the median of the rounds' ratios. Not part of the
suite; what a change bought goes to ``bench/changes.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.sections import hosted
from bench.studies.ab import Variant, parse_variant
from bench.tools import servers
from bench.tools.machine import loadavg

BARE = "bare"
FIGURES = ("lag_max_ms", "p99_ms", "max_ms", "rss_mib", "collect_ms_max", "collect_cpu_ms_max")


def _trimmed(log_dir: Path) -> list[dict[str, Any]]:
    lines = []
    for log in sorted(log_dir.glob("hosted-relay-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if '"memory_trimmed"' in line:
                try:
                    lines.append(json.loads(line))
                except ValueError:
                    continue
    return lines


async def bare_turn(
    calibration: servers.Calibration, run_dir: Path, tables: int, seconds: float, seed: int
) -> dict[str, Any]:
    """The bare websockets per-room broadcast peer under the same tables and schedule."""
    run = await hosted.bare_run(run_dir, calibration, tables=tables, seconds=seconds, mean_s=10.0, seed=seed)
    steady = run["steady"]
    return {
        "variant": BARE,
        "clients": run["clients"],
        "rolls": steady["rolls"],
        **{k: steady[k] for k in ("p50_ms", "p99_ms", "max_ms", "rss_mib", "cpu_share")},
        "lag_max_ms": None,
        "collect_ms_max": None,
        "collect_cpu_ms_max": None,
        "collect_ms": [],
        "collect_cpu_ms": [],
        "minute_cpu_ms": [],
        "lost": 0,
        "duplicates": 0,
        "load": loadavg(),
    }


async def turn(variant: Variant, run_dir: Path, tables: int, seconds: float, seed: int) -> dict[str, Any]:
    run = await hosted.relay_run(
        run_dir,
        tables=tables,
        seconds=seconds,
        after_s=0,
        mean_s=10.0,
        restart=False,
        seed=seed,
        extra_env=variant.env,
        source=variant.source,
    )
    steady, check = run["steady"], run["check"]
    lags = [p["lag_max_ms"] for p in run["series"] if p.get("lag_max_ms") is not None]
    trimmed = _trimmed(run_dir)
    pauses = [t["collect_ms"] for t in trimmed if t.get("collect_ms") is not None]
    return {
        "variant": variant.name,
        "clients": run["clients"],
        "rolls": steady["rolls"],
        "p50_ms": steady["p50_ms"],
        "p99_ms": steady["p99_ms"],
        "max_ms": steady["max_ms"],
        "lag_max_ms": max(lags, default=None),
        "rss_mib": steady["rss_mib"],
        "cpu_share": steady["cpu_share"],
        "collect_ms_max": max(pauses, default=None),
        "collect_cpu_ms_max": max(
            (t["collect_cpu_ms"] for t in trimmed if t.get("collect_cpu_ms")), default=None
        ),
        "collect_ms": pauses,
        "collect_cpu_ms": [t.get("collect_cpu_ms") for t in trimmed],
        # All of a minute's collections (a line before there was more than one a minute: its one).
        "minute_cpu_ms": [t.get("collections_cpu_ms", t.get("collect_cpu_ms")) for t in trimmed],
        "lost": check["lost"],
        "duplicates": check["duplicates"],
        "load": loadavg(),
    }


def _show(row: dict[str, Any]) -> str:
    def f(value: Any, digits: int = 0) -> str:
        return "–" if value is None else f"{value:,.{digits}f}"

    return (
        f"{row['variant']:>10}  p50 {f(row['p50_ms'])} p99 {f(row['p99_ms'])} max {f(row['max_ms'])} ms"
        f"  loop-lag max {f(row['lag_max_ms'])} ms  RSS {f(row['rss_mib'])} MiB"
        f"  CPU {f((row['cpu_share'] or 0) * 100)} %  collections {row['collect_ms']} ms"
        f"  (CPU {row['collect_cpu_ms']} ms, a minute's {row['minute_cpu_ms']} ms)  rolls {row['rolls']}"
        f"  lost {row['lost']} dup {row['duplicates']}"
        f"  load {row['load'][0]:.1f}"
    )


def ratios(rows: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, float | None]]:
    """Per other variant and figure: the median over rounds of first ÷ other (the turn just after or before
    in the same round)."""
    first = names[0]
    out: dict[str, dict[str, float | None]] = {}
    rounds = [[x for x in rows if x["round"] == r] for r in sorted({x["round"] for x in rows})]
    for other in names[1:]:
        per: dict[str, float | None] = {}
        for figure in FIGURES:
            values = []
            for r in rounds:
                a = next(x for x in r if x["variant"] == first).get(figure)
                b = next(x for x in r if x["variant"] == other).get(figure)
                if a and b:
                    values.append(a / b)
            per[figure] = statistics.median(values) if values else None
        out[other] = per
    return out


async def main_async(args: argparse.Namespace) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="tablerelay-gc-study-"))
    variants = [parse_variant(v, scratch) for v in args.variants]
    calibration = None
    if args.bare:
        variants.append(Variant(BARE, None))
        calibration = await servers.calibrate(scratch)
    rows = []
    for r in range(args.rounds):
        order = variants if r % 2 == 0 else variants[::-1]  # who goes first alternates too
        for variant in order:
            run_dir = scratch / f"round{r}-{variant.name}"
            run_dir.mkdir()
            if variant.name == BARE:
                assert calibration is not None
                row = await bare_turn(calibration, run_dir, args.tables, args.seconds, seed=37 + r)
            else:
                row = await turn(variant, run_dir, args.tables, args.seconds, seed=37 + r)
            row["round"] = r
            print(_show(row), flush=True)
            rows.append(row)
    rows.sort(key=lambda x: (x["round"], [v.name for v in variants].index(x["variant"])))
    names = [v.name for v in variants]
    relays = [n for n in names if n != BARE]
    for other, per in ratios(rows, relays).items():
        shown = "  ".join(f"{k} {v:.2f}×" if v else f"{k} –" for k, v in per.items())
        print(f"{names[0]} ÷ {other} (median of {args.rounds} rounds): {shown}", flush=True)
    if args.bare:
        for name in names[:-1]:
            per = ratios(rows, [name, BARE])[BARE]
            shown = "  ".join(f"{k} {per[k]:.2f}×" for k in ("p99_ms", "max_ms", "rss_mib") if per[k])
            print(f"{name} ÷ bare (median of {args.rounds} rounds): {shown}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.gc", description=__doc__.split("\n")[0])
    parser.add_argument("variants", nargs="+", help="NAME=TREE[:VAR=VALUE,...], the first is the baseline")
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=130.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", help="write every turn's figures here")
    parser.add_argument(
        "--bare", action="store_true", help="the bare websockets peer as one more turn (each variant ÷ bare)"
    )
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
