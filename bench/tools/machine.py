"""The machine a run measured: CPU, cores, memory, kernel, runtimes and library versions, and its load."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from bench.tools.harness import ROOT


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def python_speed() -> float:
    """Milliseconds a fixed piece of pure Python takes here, best of five: how fast this machine runs the
    interpreter at the moment (absolute rates scale with it; the same kind of machine has read from 0.5 to
    1.6 s for ten million loop steps on different days). Taken before each section, so a section measured
    again on another day shows whether the machine it ran on was the same speed."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        total = 0
        for i in range(300_000):
            total += i & 7
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 1)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _mem_total_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return 0.0


def _pkg(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _node_pkg(name: str) -> str:
    path = ROOT / "bench" / "receivers" / "node_modules" / name / "package.json"
    try:
        import json

        return str(json.loads(path.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "not installed"


def _node() -> str:
    try:
        return subprocess.run(
            ["node", "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "not installed"


def revision() -> str:
    """The commit measured, and whether the relay or the rules core had uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "relay", "rules"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} (with uncommitted changes in relay/ or rules/)" if dirty else head


def describe() -> dict[str, Any]:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 0
    return {
        "revision": revision(),
        "cpu": _cpu_model(),
        "cores": cores,
        "memory_gib": _mem_total_gib(),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "node": _node(),
        "nofile": _nofile(),
        "load_at_start": loadavg(),
        "packages": {
            "websockets": _pkg("websockets"),
            "msgpack": _pkg("msgpack"),
            "python-socketio": _pkg("python-socketio"),
            "python-engineio": _pkg("python-engineio"),
            "aiohttp": _pkg("aiohttp"),
            "ws (node)": _node_pkg("ws"),
            "socket.io-client (node)": _node_pkg("socket.io-client"),
            "@msgpack/msgpack (node)": _node_pkg("@msgpack/msgpack"),
        },
    }


def _nofile() -> str:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return f"{soft}/{hard}"


def listen_overflows() -> dict[str, int]:
    """TcpExt's ListenOverflows and ListenDrops from /proc/net/netstat (0 where unreadable)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        lines = Path("/proc/net/netstat").read_text().splitlines()
        for head, values in zip(lines[::2], lines[1::2], strict=False):
            if head.startswith("TcpExt:"):
                pairs = dict(zip(head.split()[1:], values.split()[1:], strict=False))
                return {k: int(pairs[k]) for k in ("ListenOverflows", "ListenDrops") if k in pairs}
    return {}
