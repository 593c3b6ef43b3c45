"""The server a soak runs against: a ``tablerelay serve`` process on loopback that the soak starts and stops,
its log read line by line (errors counted), and its RSS and open descriptors read from /proc."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


class ServerProcess:
    def __init__(self, data: Path) -> None:
        self.data = data
        self.proc: asyncio.subprocess.Process | None = None
        self.port = 0
        self.error_lines: list[str] = []  # level error or critical: internal errors, with their traces
        self.errors = 0
        self.warnings = 0
        self.trims: list[dict[str, Any]] = []  # the server's memory_trimmed lines (relay.shell.upkeep)
        self.sites: list[dict[str, Any]] = []  # its memory_sites lines, with TABLERELAY_TRACEMALLOC set
        self._listening: asyncio.Future[int] | None = None
        self._reader: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    async def start(self) -> str:
        """Start serving on 127.0.0.1 (a free port); the WebSocket address once it logs 'listening'."""
        # Only loopback: the soak's traffic never leaves this machine.
        env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
        env["TABLERELAY_MAX_PER_IP"] = "100000"  # every client comes from 127.0.0.1
        # Passed on to the relay: relay.shell.observe.memtrace and relay.shell.upkeep read them.
        for name in ("TABLERELAY_TRACEMALLOC", "TABLERELAY_FULL_GC"):
            if os.environ.get(name):
                env[name] = os.environ[name]
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "relay.ops.cli", "serve", "--host", "127.0.0.1", "--port", "0",
            "--data", str(self.data), "--log-format", "json", "--log-level", "info",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        self._listening = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read())
        try:
            self.port = await asyncio.wait_for(asyncio.shield(self._listening), START_TIMEOUT)
        except (TimeoutError, asyncio.CancelledError) as exc:
            await self.stop()
            said = " | ".join(self.error_lines) or "nothing on its log"
            raise RuntimeError(f"tablerelay serve did not start ({said})") from exc
        return f"ws://127.0.0.1:{self.port}/ws"

    async def _read(self) -> None:
        assert self.proc is not None
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            record: Any = None
            with contextlib.suppress(ValueError):
                record = json.loads(line)
            if not isinstance(record, dict):
                # Not a structured line (a crash before logging was set up): an error by definition.
                self._error(line)
                continue
            if record.get("event") == "listening" and self._listening and not self._listening.done():
                self._listening.set_result(int(record["port"]))
            if record.get("event") == "memory_trimmed":
                self.trims.append(
                    {
                        k: record.get(k)
                        for k in (
                            "ms",
                            "collect_ms",
                            "collect_cpu_ms",
                            "collected",
                            "blocks",
                            "full_collections",
                            "timestamp",
                        )
                    }
                )
            if record.get("event") == "memory_sites":
                self.sites.append(record)
            level = record.get("level")
            if level in ("error", "critical"):
                self._error(line)
            elif level == "warning":
                self.warnings += 1
        if self._listening is not None and not self._listening.done():
            self._listening.cancel()  # the server exited before listening; start() says so

    def _error(self, line: str) -> None:
        self.errors += 1
        if len(self.error_lines) < 20:
            self.error_lines.append(line[:2000])

    async def stop(self) -> int | None:
        """SIGTERM (the server drains and closes with 1001), then wait; its exit status."""
        proc = self.proc
        if proc is None:
            return None
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
        except TimeoutError:
            proc.kill()
            code = await proc.wait()
            self._error(f"the server did not stop within {STOP_TIMEOUT:.0f} s of SIGTERM and was killed")
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._reader, 10)
        return code


def rss_bytes(pid: int) -> int | None:
    """Resident memory of ``pid`` (VmRSS in /proc/PID/status), or None where /proc does not say."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


async def get_json(host: str, port: int, path: str, timeout: float = 10.0) -> dict[str, Any]:
    """A plain HTTP GET of a JSON endpoint (the server answers with ``Connection: close``)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        response = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    _, _, body = response.partition(b"\r\n\r\n")
    data: dict[str, Any] = json.loads(body)
    return data
