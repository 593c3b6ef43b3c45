"""Sampling profiles of a running server with py-spy, summarised for docs/benchmarks.md.

``Sampler(pid, out)`` is an async context manager: py-spy attaches when it is entered (out of process, no
change to the server) and writes its raw collapsed stacks when it is left. ``summarise`` turns those into
shares of the samples: by layer (the relay's own code, websockets, asyncio, msgpack, the rules core,
SQLite, logging, …) and by function (self time), per thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Any

from bench.tools.harness import VENV_BIN

# Where a frame's file lives says which layer it belongs to; first match wins.
LAYERS = (
    ("relay/storage/nats/", "NATS event log (relay/storage/nats)"),
    ("relay/log/nats", "NATS event log (relay/storage/nats)"),  # its path before the layer folders
    ("nats/", "nats-py (NATS client)"),
    ("relay/storage/", "SQLite event log (relay/storage)"),
    ("relay/log/", "SQLite event log (relay/storage)"),
    ("sqlite3", "SQLite event log (relay/storage)"),
    ("relay/", "relay (room, fan-out, protocol)"),
    ("rules/", "rules core (dice, resolvers)"),
    ("websockets/", "websockets (framing, connection)"),
    ("msgpack", "msgpack"),
    ("structlog", "logging (structlog)"),
    ("logging/", "logging (structlog)"),
    ("jwt/", "auth (PyJWT)"),
    ("asyncio/", "asyncio event loop and transports"),
    ("selectors.py", "asyncio event loop and transports"),
    ("socketio/", "python-socketio / engine.io"),
    ("engineio/", "python-socketio / engine.io"),
    ("aiohttp/", "aiohttp"),
    ("bench/", "peer server code"),
)


def py_spy() -> str | None:
    local = VENV_BIN / "py-spy"
    return str(local) if local.exists() else shutil.which("py-spy")


class Sampler:
    def __init__(self, pid: int, out: Path, rate: int = 200) -> None:
        self.pid = pid
        self.out = out
        self.rate = rate
        self.proc: asyncio.subprocess.Process | None = None
        self.result: dict[str, Any] = {}

    async def __aenter__(self) -> Sampler:
        exe = py_spy()
        if exe is None:
            self.result = {"error": "py-spy is not installed"}
            return self
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.proc = await asyncio.create_subprocess_exec(
            exe,
            "record",
            "--pid",
            str(self.pid),
            "--rate",
            str(self.rate),
            "--format",
            "raw",
            "--threads",
            "--nonblocking",
            "--output",
            str(self.out),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await asyncio.sleep(0.5)  # attached and sampling before the load starts
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.proc is None:
            return
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self.out.exists():
            self.result.update(summarise(self.out))
        else:
            self.result.setdefault("error", "py-spy wrote no profile")


@contextlib.asynccontextmanager
async def sampled_if_asked(variable: str, pid: int, out: Path) -> AsyncIterator[Sampler | None]:
    """With ``variable=1`` in the environment, py-spy samples ``pid`` meanwhile (a diagnosis: sampling
    costs the server CPU, so such a run's figures are not for the page); else nothing."""
    if os.environ.get(variable) != "1":
        yield None
        return
    async with Sampler(pid, out, rate=100) as sampler:
        yield sampler


def _layer(frame: str) -> str:
    for needle, name in LAYERS:
        if needle in frame:
            return name
    return "other Python"


#: Functions a profile names by self time; the page shows as many of the inclusive ones.
TOP = 12


def summarise(path: Path, top: int = TOP) -> dict[str, Any]:
    """Shares of samples by thread, by layer of the innermost frame, by function (self time, the first
    ``top``) and by the project's functions, inclusive (all of them)."""
    threads: Counter[str] = Counter()
    layers: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        thread = frames[0]
        if thread.startswith("process ") and len(frames) > 1:
            frames = frames[1:]
            thread = frames[0]
        # "thread (2077): MainThread" → "MainThread"
        name = thread.split("): ", 1)[1] if "): " in thread else thread
        leaf = frames[-1]
        total += n
        threads[name] += n
        # A leaf inside the standard library is charged to the nearest caller in a known layer, so time in
        # e.g. ``socket.send`` counts for the asyncio transport that made the call.
        layer = "other Python"
        for frame in reversed(frames[1:]):
            layer = _layer(frame)
            if layer != "other Python":
                break
        layers[layer] += n
        functions[_short(leaf)] += n
        # Inclusive time of the project's own functions (each counted once per sample, however deep).
        for name in {_short(f) for f in frames[1:] if _own(f)}:
            inclusive[name] += n
    if total == 0:
        return {"samples": 0}

    def shares(counter: Counter[str], limit: int | None = None) -> list[tuple[str, float]]:
        return [(k, round(100 * v / total, 1)) for k, v in counter.most_common(limit)]

    return {
        "samples": total,
        "threads": shares(threads),
        "layers": shares(layers),
        "functions": shares(functions, top),
        # Every function, not the top few: the page reads named parts out of it
        # (bench.report.tables.TABLES_PARTS) whatever their rank, and shows the first ``top`` itself.
        "inclusive": shares(inclusive),
    }


def _own(frame: str) -> bool:
    """A frame of the relay's or the rules core's code, start-up wrappers (every sample has them) aside."""
    if "(relay/ops/cli.py" in frame or "(relay/ops/commands.py" in frame:
        return False
    return "(relay/" in frame or "(rules/" in frame or "/relay/" in frame or "/rules/" in frame


def _short(frame: str) -> str:
    """``send (websockets/asyncio/connection.py:970)`` → ``send (websockets/asyncio/connection.py)``."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    file = where.rsplit(":", 1)[0]
    for marker in ("site-packages/", "lib/python3.11/", "/work/main/"):
        if marker in file:
            file = file.split(marker, 1)[1]
    return f"{name} ({file})" if file else name
