"""A real ``tablerelay serve`` process for the end-to-end tests: started on a data folder, stopped by a
signal, asked over HTTP and through its command line, and judged by the log lines it writes.

Written from the spec and the command line's documentation, not from the server's code: the server is a black
box started as a subprocess.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.console import tablerelay_bin

#: Seconds to wait for the server to say it is listening.
START_TIMEOUT = 30.0


@dataclass
class Server:
    """One ``tablerelay serve`` process on a data folder; its stderr is collected line by line."""

    data: Path
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    log_lines: list[str] = field(default_factory=list)
    host: str = ""
    port: int = 0
    url: str = ""
    _ready: threading.Event = field(default_factory=threading.Event)
    _reader: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> Server:
        self._ready.clear()
        self.host, self.port, self.url = "", 0, ""
        self.proc = subprocess.Popen(
            [tablerelay_bin(), "serve", "--host", "127.0.0.1", "--port", "0", "--data", str(self.data)],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self._reader = threading.Thread(target=self._read_stderr, args=(self.proc,), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None:
                self._reader.join(2)
                pytest.fail(
                    f"tablerelay serve exited with {self.proc.returncode} before listening; stderr:\n"
                    + self.log_text()
                )
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                self._reader.join(2)
                pytest.fail(
                    f"tablerelay serve did not log 'listening' within {START_TIMEOUT}s; stderr:\n"
                    + self.log_text()
                )
        return self

    def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.log_lines.append(line)
            if not self._ready.is_set():
                record = parse_log_line(line)
                if record is not None and record.get("event") == "listening":
                    self.host = str(record["host"])
                    self.port = int(record["port"])
                    self.url = str(record["url"])
                    self._ready.set()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Send ``sig`` and wait for the process to exit; returns its exit status."""
        assert self.proc is not None
        if sig != signal.SIGKILL and _loop_running():
            # The wait would hold this thread's event loop, and the test's clients on it could not answer
            # the server's close frame: the server would wait out its 10-second close timeout.
            pytest.fail("Server.stop from an async test blocks its event loop: await astop() instead")
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(
                f"tablerelay serve did not exit within {timeout}s of signal {sig}; stderr:\n"
                + self.log_text()
            )
        if self._reader is not None:
            self._reader.join(5)
        return code

    async def astop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """``stop`` from an async test: the test's event loop keeps running while the server shuts down, so
        its open clients answer the server's close frame (``stop`` refuses to run on a running loop)."""
        return await asyncio.to_thread(self.stop, sig, timeout)

    def kill(self) -> None:
        """SIGKILL: no clean-up, as in a power cut."""
        self.stop(signal.SIGKILL)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- observation -------------------------------------------------------------------------------------
    @property
    def http(self) -> str:
        return f"http://{self.host}:{self.port}"

    def log_text(self) -> str:
        return "\n".join(self.log_lines)

    def logged(self, event: str, room: str | None = None) -> list[dict[str, Any]]:
        """The log records of ``event`` read so far (of room ``room`` only, if given)."""
        return [
            r
            for r in map(parse_log_line, list(self.log_lines))
            if r is not None and r.get("event") == event and (room is None or r.get("room") == room)
        ]

    async def alogged(
        self, event: str, room: str | None = None, *, count: int = 1, timeout: float = 10.0
    ) -> list[dict[str, Any]]:
        """``logged``, once it holds ``count`` records: the server's stderr is read by a thread, which under
        load can lag behind what the server has already said on its sockets."""
        deadline = time.monotonic() + timeout
        while len(found := self.logged(event, room)) < count:
            # The message (every line read so far, joined) is built only if the wait fails.
            assert time.monotonic() < deadline, (
                f"fewer than {count} {event!r} lines logged:\n{self.log_text()[-3000:]}"
            )
            await asyncio.sleep(0.05)
        return found

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str, str]:
        """A blocking HTTP GET: (status, content type, body)."""
        try:
            with urllib.request.urlopen(self.http + path, timeout=timeout) as resp:
                return (
                    resp.status,
                    resp.headers.get("Content-Type", ""),
                    resp.read().decode("utf-8", "replace"),
                )
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode("utf-8", "replace")

    async def aget(self, path: str) -> tuple[int, str, str]:
        return await asyncio.to_thread(self.get, path)

    async def assert_healthy(self) -> None:
        assert self.running, "the server process died:\n" + self.log_text()[-4000:]
        status, _, body = await self.aget("/healthz")
        assert status == 200, f"/healthz answered {status}: {body!r}"

    # -- command line ------------------------------------------------------------------------------------
    def cli(self, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [tablerelay_bin(), *args, "--data", str(self.data)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert proc.returncode == 0, f"tablerelay {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}"
        return proc

    def create_room(self, name: str = "Test table") -> Room:
        out = self.cli("room", "create", "--name", name, "--json").stdout
        data = json.loads(out)
        assert set(data) >= {"room", "gm", "player", "spectator", "watch"}, data
        return Room(
            id=str(data["room"]),
            gm=data["gm"],
            player=data["player"],
            spectator=data["spectator"],
            watch=data["watch"],
            name=name,
        )

    async def acreate_room(self, name: str = "Test table") -> Room:
        return await asyncio.to_thread(self.create_room, name)

    def token(self, room: str, role: str, *, name: str | None = None, ttl: int | None = None) -> str:
        args = ["token", "--room", room, "--role", role]
        if name is not None:
            args += ["--name", name]
        if ttl is not None:
            args += ["--ttl", str(ttl)]
        out = self.cli(*args).stdout.strip()
        assert out, "tablerelay token printed nothing"
        return out.splitlines()[-1].strip()


@dataclass(frozen=True)
class Room:
    id: str
    gm: str
    player: str
    spectator: str
    watch: str
    name: str


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def parse_log_line(line: str) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def server_env(secret: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    env["TABLERELAY_SECRET"] = secret
    env["PYTHONUNBUFFERED"] = "1"
    # TEST_SQLITE_WRITER=process runs the e2e suite against the SQLite writer process.
    if os.environ.get("TEST_SQLITE_WRITER"):
        env["TABLERELAY_SQLITE_WRITER"] = os.environ["TEST_SQLITE_WRITER"]
    env.update(extra or {})
    return env


@contextlib.contextmanager
def running_server(data: Path, extra_env: dict[str, str] | None = None) -> Iterator[Server]:
    """A started server that is stopped with SIGTERM afterwards, which must exit 0."""
    server = Server(data=data, env=server_env(secrets.token_hex(24), extra_env)).start()
    try:
        yield server
    finally:
        if server.running:
            _exited_cleanly(server, server.stop(signal.SIGTERM))


@contextlib.asynccontextmanager
async def arunning_server(data: Path, extra_env: dict[str, str] | None = None) -> AsyncIterator[Server]:
    """``running_server`` in an async test: stopped with ``astop``."""
    server = Server(data=data, env=server_env(secrets.token_hex(24), extra_env)).start()
    try:
        yield server
    finally:
        if server.running:
            _exited_cleanly(server, await server.astop(signal.SIGTERM))


def _exited_cleanly(server: Server, code: int) -> None:
    assert code == 0, f"tablerelay serve exited with {code} after SIGTERM; stderr tail:\n" + "\n".join(
        server.log_lines[-40:]
    )
