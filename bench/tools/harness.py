"""Processes of a benchmark run: the server under test and the Node client harness around it.

Every server (the relay, the bare websockets server, python-socketio) runs as its own process with its log
in the run's folder; every group of clients is a ``bench/receivers/harness.mjs`` process that speaks JSON
lines on stdin/stdout. Each wait here is bounded, so a run that goes wrong ends with an error naming the
process instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "bench" / "receivers" / "harness.mjs"
VENV_BIN = Path(sys.executable).parent


class BenchError(RuntimeError):
    """A run that could not be measured (a process died, a wait timed out)."""


def raise_nofile() -> None:
    """In a child before exec: lift the soft descriptor limit to the hard one (10,000 sockets need it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` in KiB (VmRSS from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise BenchError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far, in seconds (from /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (from /proc/PID/task/*/children)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(child) for child in (task / "children").read_text().split()]
    return out


async def wait_for_line(
    path: Path, proc: asyncio.subprocess.Process, event: str, timeout: float
) -> dict[str, Any]:
    """Poll a JSON-lines log file until a line with ``"event": event`` appears."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            raise BenchError(f"server exited with {proc.returncode}; log: {path}\n{_tail(path)}")
        if path.exists():
            for line in path.read_text(errors="replace").splitlines():
                if event in line:
                    with contextlib.suppress(ValueError):
                        data = json.loads(line)
                        if data.get("event") == event:
                            return dict(data)
        await asyncio.sleep(0.05)
    raise BenchError(f"no {event!r} line from the server within {timeout} s; log: {path}\n{_tail(path)}")


def _tail(path: Path, lines: int = 15) -> str:
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class ServerProcess:
    """A running server: its kind, process, port and log file."""

    kind: str
    proc: asyncio.subprocess.Process
    port: int
    log: Path
    data: Path | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_kib(self) -> int:
        return rss_kib(self.pid)

    def cpu_seconds(self) -> float:
        """The server's CPU time, its child processes' included (the relay signs in a child)."""
        total = cpu_seconds(self.pid)
        for pid in children(self.pid):
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += cpu_seconds(pid)
        return total

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


async def start_server(
    kind: str,
    argv: Sequence[str],
    log: Path,
    env: dict[str, str] | None = None,
    data: Path | None = None,
    cwd: Path = ROOT,
) -> ServerProcess:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=out,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            preexec_fn=raise_nofile,
        )
    try:
        line = await wait_for_line(log, proc, "listening", 30)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    return ServerProcess(kind, proc, int(line["port"]), log, data)


@dataclass
class Clients:
    """One harness.mjs process: ``role`` clients of a server ``kind`` on the given targets."""

    name: str
    proc: asyncio.subprocess.Process
    stderr: Path
    lines: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    reader: asyncio.Task[None] | None = None

    def start_reading(self) -> None:
        """Start the task that puts the process's JSON lines on ``lines``, then ``{"ev": "exit"}``."""
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            raw = await self.proc.stdout.readline()
            if not raw:
                await self.lines.put({"ev": "exit"})
                return
            try:
                await self.lines.put(json.loads(raw))
            except ValueError:
                await self.lines.put({"ev": "noise", "line": raw.decode(errors="replace")})

    def send(self, **command: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(command) + "\n").encode())

    async def expect(self, event: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"{self.name}: no {event!r} within {timeout} s\n{_tail(self.stderr)}")
            try:
                line = await asyncio.wait_for(self.lines.get(), left)
            except TimeoutError:
                continue
            if line.get("ev") == event:
                return line
            if line.get("ev") in ("error", "exit"):
                raise BenchError(f"{self.name}: {line}\n{_tail(self.stderr)}")

    async def close(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.send(cmd="close")
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self.reader is not None:
            self.reader.cancel()


async def start_clients(name: str, run_dir: Path, config: dict[str, Any]) -> Clients:
    stderr = run_dir / f"{name}.stderr"
    stderr.parent.mkdir(parents=True, exist_ok=True)
    argument = json.dumps(config)
    if len(argument) > 100_000:
        # An argument holds at most 128 KiB (Linux's MAX_ARG_STRLEN): a thousand rooms' tokens go in a file.
        path = run_dir / f"{name}.config.json"
        path.write_text(argument)
        argument = "@" + str(path)
    with stderr.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            "node",
            str(HARNESS),
            argument,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            cwd=ROOT,
            preexec_fn=raise_nofile,
            limit=1 << 26,  # a latency report carries every event's timestamps on one line
        )
    clients = Clients(name, proc, stderr)
    clients.start_reading()
    return clients


async def gather_expect(groups: Sequence[Clients], event: str, timeout: float) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(g.expect(event, timeout) for g in groups)))


async def close_all(groups: Sequence[Clients]) -> None:
    await asyncio.gather(*(g.close() for g in groups), return_exceptions=True)


def turn_order(names: Sequence[str], round_index: int) -> list[str]:
    """The order servers take their turns in round ``round_index``: as given, reversed every other round,
    so that no side always runs right after the same other one."""
    return list(names) if round_index % 2 == 0 else list(names)[::-1]


def split(targets: Sequence[dict[str, Any]], parts: int) -> list[list[dict[str, Any]]]:
    """Spread each target's connections over ``parts`` processes as evenly as possible."""
    chunks: list[list[dict[str, Any]]] = [[] for _ in range(parts)]
    for target in targets:
        conns = int(target["conns"])
        for i in range(parts):
            share = conns // parts + (1 if i < conns % parts else 0)
            chunks[i].append({**target, "conns": share})
    return chunks
