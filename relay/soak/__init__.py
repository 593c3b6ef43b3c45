"""``tablerelay soak``: a bounded run of many clients against one server, checked for lost events, internal
errors and growth. ``run`` drives it, ``client`` is one client's behaviour, ``process`` the server process
and /proc readings, ``report`` the plot and the Markdown section."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from pathlib import Path
from typing import Any

from relay.soak.report import markdown, plot
from relay.soak.run import Options, soak


def soak_command(args: argparse.Namespace) -> int:
    if args.minutes <= 0 or args.clients < 1 or args.rooms < 1 or args.rooms > args.clients:
        print("tablerelay: --minutes must be positive and --rooms from 1 to --clients.", flush=True)
        return 2
    if args.url is not None and args.data is None:
        print("tablerelay: --url needs --data, the running server's data folder.", flush=True)
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
        print(f"tablerelay: the soak could not run: {exc}", flush=True)
        return 1
    except (asyncio.CancelledError, KeyboardInterrupt):
        print("tablerelay: the soak was stopped before its end; nothing was checked.", flush=True)
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
    print("soak passed" if results["ok"] else "soak FAILED")
    return 0 if results["ok"] else 1


__all__ = ["Options", "markdown", "plot", "soak", "soak_command"]
