"""Keepalive pings: relay.shell.keepalive's one timer against websockets' task per socket, in one run.

    python -m bench.studies.keepalive [--sockets 3000] [--interval 2] [--seconds 10]

A server process (uvloop) holds idle sockets opened by a client process and pings each every
``interval`` seconds, with websockets' own keepalive, with relay.shell.keepalive, and with none (the
baseline); the figures are the server's CPU over ``seconds`` per ping sent (the pong's handling included,
which is websockets' in both) and its resident memory per socket above the baseline. Not part of the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

from bench.tools.harness import ROOT, cpu_seconds, rss_kib

MODES = ("none", "websockets", "relay")


def _serve(mode: str, interval: float) -> None:
    import uvloop
    from websockets.asyncio.server import ServerConnection, serve

    from relay.shell.keepalive import Keepalive

    async def main() -> None:
        keepalive = Keepalive(interval, interval) if mode == "relay" else None

        async def handler(ws: ServerConnection) -> None:
            if keepalive is not None:
                keepalive.add(ws)
            await ws.wait_closed()

        own = mode == "websockets"
        async with serve(
            handler,
            "127.0.0.1",
            0,
            compression=None,
            ping_interval=interval if own else None,
            ping_timeout=interval if own else None,
        ) as server:
            print(server.sockets[0].getsockname()[1], flush=True)
            await asyncio.sleep(3600)

    uvloop.run(main())


def _hold(port: int, sockets: int) -> None:
    import uvloop
    from websockets.asyncio.client import ClientConnection, connect

    async def main() -> None:
        held: list[ClientConnection] = []
        for _ in range(sockets):
            held.append(await connect(f"ws://127.0.0.1:{port}/", compression=None, ping_interval=None))
        print("connected", flush=True)
        await asyncio.sleep(3600)

    uvloop.run(main())


def measure(mode: str, sockets: int, interval: float, seconds: float) -> tuple[float, float]:
    """(server CPU seconds over ``seconds``, RSS KiB) with ``sockets`` idle sockets pinged by ``mode``."""
    python = sys.executable
    server = subprocess.Popen(
        [python, "-m", "bench.studies.keepalive", "--serve", mode, "--interval", str(interval)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    port = int(server.stdout.readline())
    clients = subprocess.Popen(
        [python, "-m", "bench.studies.keepalive", "--hold", str(port), "--sockets", str(sockets)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert clients.stdout is not None
        clients.stdout.readline()
        time.sleep(interval + 1)  # every socket has had its first ping
        before = cpu_seconds(server.pid)
        time.sleep(seconds)
        return cpu_seconds(server.pid) - before, rss_kib(server.pid)
    finally:
        for proc in (clients, server):
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.studies.keepalive", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--sockets", type=int, default=3000)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--serve", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--hold", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve, args.interval)
        return
    if args.hold:
        _hold(args.hold, args.sockets)
        return
    pings = args.sockets * args.seconds / args.interval
    results: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            results[mode].append(measure(mode, args.sockets, args.interval, args.seconds))
    base_cpu = min(cpu for cpu, _ in results["none"])
    base_rss = min(rss for _, rss in results["none"])
    per_ping = {}
    for mode in ("websockets", "relay"):
        cpu = min(c for c, _ in results[mode])
        rss = min(r for _, r in results[mode])
        per_ping[mode] = 1e6 * (cpu - base_cpu) / pings
        print(
            f"{mode:>10}: {per_ping[mode]:5.1f} µs of server CPU per ping (about {pings:,.0f} pings), "
            f"{(rss - base_rss) / args.sockets:4.2f} KiB per socket above no keepalive"
        )
    ratio = per_ping["relay"] / per_ping["websockets"]
    print(f"relay.shell.keepalive ÷ websockets' keepalive, CPU per ping: {ratio:.2f}×")


if __name__ == "__main__":
    main()
