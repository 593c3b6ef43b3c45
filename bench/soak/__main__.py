"""The soak: a bounded run of many clients against one server, checked for lost events, internal errors and
growth.

    python -m bench.soak                          # 10 minutes, 1,000 clients in 200 rooms
    python -m bench.soak --minutes 2 --clients 200 --rooms 40

It lives in ``bench/soak/`` rather than ``relay/``: its clients choose what to do with Python's ``random``,
which nothing under ``relay/`` may import. ``bench.soak.run`` drives it, ``bench.soak.client`` is one
client's behaviour, ``bench.soak.process`` the server process and /proc readings, ``bench.soak.report`` the
plot and the Markdown section (docs/hardening.md describes the run and its checks)."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.soak.report import markdown, plot
from bench.soak.run import Options, soak


def soak_command(args: argparse.Namespace) -> int:
    if args.minutes <= 0 or args.clients < 1 or args.rooms < 1 or args.rooms > args.clients:
        print("soak: --minutes must be positive and --rooms from 1 to --clients.", flush=True)
        return 2
    if args.url is not None and args.data is None:
        print("soak: --url needs --data, the running server's data folder.", flush=True)
        return 2
    options = Options(
        minutes=args.minutes,
        clients=args.clients,
        rooms=args.rooms,
        url=args.url,
        data=Path(args.data) if args.data else None,
        pid=args.pid,
        warmup=args.warmup,
        report_every=args.report_every,
        seed=args.seed,
    )

    async def main() -> dict[str, Any]:
        # SIGTERM (and Ctrl-C) cancel the run, so the server it started is stopped and its folder removed.
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await soak(options, say=lambda line: print(line, flush=True))

    try:
        results = asyncio.run(main())
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"soak: the soak could not run: {exc}", flush=True)
        return 1
    except (asyncio.CancelledError, KeyboardInterrupt):
        print("soak: the soak was stopped before its end; nothing was checked.", flush=True)
        return 1
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    image = None
    if args.plot:
        if plot(results, Path(args.plot)):
            image = args.plot
            print(f"plot: {args.plot}")
        else:
            print("plot: skipped, matplotlib is not installed (pip install -e '.[bench]')")
    if args.markdown:
        Path(args.markdown).write_text(markdown(results, args.image or image))
    for name, check in results["checks"].items():
        verdict = {True: "pass", False: "FAIL", None: "not measured"}[check["ok"]]
        detail = {k: v for k, v in check.items() if k not in ("ok", "lost_examples") and v not in ([], None)}
        print(f"{verdict:>12}  {name}  {json.dumps(detail)}")
    for line in results["error_samples"][:10] + results["server_error_lines"][:5]:
        print(f"       error  {line[:300]}")
    print(f"     warm-up  {results['warmup_seconds'] / 60:.1f} min: {results['warmup_basis']}")
    print("soak passed" if results["ok"] else "soak FAILED")
    return 0 if results["ok"] else 1


def parser() -> argparse.ArgumentParser:
    soak = argparse.ArgumentParser(
        prog="python -m bench.soak",
        description="A bounded soak run on 127.0.0.1: rolls of every visibility, reveals, Fear and Hope, "
        "reconnects with resume, slow consumers and malformed frames. Prints the server's RSS, open "
        "descriptors, event-loop lag p99 and errors every minute, then checks that no acknowledged event "
        "was lost, no internal error happened, and RSS and descriptors stayed within 5%% after warm-up. "
        "Exits 1 when a check fails.",
    )
    soak.add_argument("--minutes", type=float, default=10.0, help="how long the clients run [10]")
    soak.add_argument("--clients", type=int, default=1000, help="WebSocket clients [1000]")
    soak.add_argument("--rooms", type=int, default=200, help="rooms they are spread over [200]")
    soak.add_argument("--url", help="a running server's ws:// address [start one on 127.0.0.1]")
    soak.add_argument(
        "--data", help="with --url: that server's data folder (rooms are made and checked there)"
    )
    soak.add_argument("--pid", type=int, help="with --url: that server's process id, for RSS and descriptors")
    soak.add_argument(
        "--warmup",
        type=float,
        help="minutes not held to the flatness checks [until every room has filled its history window "
        "and roll ids their 2 minutes, plus one upkeep pass]",
    )
    soak.add_argument("--report-every", type=float, default=60.0, help="seconds between printed lines [60]")
    soak.add_argument("--seed", type=int, help="seed of the clients' choices (not of any dice)")
    soak.add_argument("--json", metavar="FILE", help="write the full results as JSON")
    soak.add_argument("--plot", metavar="FILE", help="write a PNG plot (needs matplotlib: the bench extra)")
    soak.add_argument("--markdown", metavar="FILE", help="write the results as a Markdown section")
    soak.add_argument("--image", help="the plot's address as the Markdown section should link it")
    return soak


def main(argv: Sequence[str] | None = None) -> int:
    return soak_command(parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
