"""A real ``tablerelay serve`` process for the client tests (JS client and browser pages), and a tiny
synchronous wire client that rolls from Python the way any other client would."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
from websockets.sync.client import ClientConnection, connect

from tests.console import tablerelay_bin

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0


@dataclass
class Relay:
    """One running server on a data folder; ``log`` collects its stderr lines."""

    proc: subprocess.Popen[bytes]
    data: Path
    env: dict[str, str]
    # The tablerelay it runs: the project's, or an installed wheel's.
    command: str = field(default_factory=tablerelay_bin)
    cwd: Path | None = None
    host: str = ""
    port: int = 0
    log: list[str] = field(default_factory=list)

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}/ws"

    def create_room(self, name: str) -> dict[str, str]:
        """``tablerelay room create --json``: the room id, its three tokens and the watch address."""
        out = subprocess.run(
            [self.command, "room", "create", "--name", name, "--data", str(self.data), "--json"],
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            check=True,
            timeout=60,
        )
        room: dict[str, str] = json.loads(out.stdout)
        return room

    def log_text(self) -> str:
        return "\n".join(self.log[-200:])


@contextlib.contextmanager
def running_relay(
    data: Path,
    port: int = 0,
    *,
    command: str | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[Relay]:
    """Serve ``data``; the secret is the data folder's own, so tokens outlive a restart on the same folder.

    ``command`` is another ``tablerelay`` to run (an installed wheel's), from ``cwd`` with exactly ``env``.
    """
    command = command or tablerelay_bin()
    if env is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    proc = subprocess.Popen(
        [
            command,
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--data",
            str(data),
            "--log-format",
            "json",
        ],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    relay = Relay(proc, data, env, command, cwd)
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            relay.log.append(line)
            if ready.is_set():
                continue
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict) and record.get("event") == "listening":
                    relay.host, relay.port = str(record["host"]), int(record["port"])
                    ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while not ready.wait(0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("tablerelay serve did not start; its log:\n" + relay.log_text())
        yield relay
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(5)


class WireClient:
    """A bare protocol client: hello, then frames as plain dicts. For driving pages from Python."""

    def __init__(self, ws_url: str, token: str, name: str | None = None) -> None:
        self._stack = contextlib.ExitStack()
        self.conn: ClientConnection = self._stack.enter_context(connect(ws_url, open_timeout=10))
        hello: dict[str, Any] = {"t": "hello", "v": 1, "token": token}
        if name:
            hello["name"] = name
        self.send(hello)
        self.welcome = self.expect("welcome")
        self.events: list[dict[str, Any]] = []
        # A roll's id is its idempotency key per participant, and a GM token is one participant on every
        # socket: ids must be unique per client, not just per connection, or a new client's first roll
        # would be taken as a retry of an earlier client's.
        self._prefix = f"py-{secrets.token_hex(4)}"
        self._ids = 0

    def send(self, frame: dict[str, Any]) -> None:
        self.conn.send(msgpack.packb(frame, use_bin_type=True))

    def recv(self, timeout: float = 10.0) -> dict[str, Any]:
        data = self.conn.recv(timeout)
        assert isinstance(data, bytes), data  # the relay sends every frame binary
        frame: dict[str, Any] = msgpack.unpackb(data, raw=False)
        if frame.get("t") == "event":
            self.events.append(frame)
        return frame

    def expect(self, t: str, timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            frame = self.recv(max(0.01, deadline - time.monotonic()))
            if frame.get("t") == t:
                return frame
            if frame.get("t") == "error":
                raise AssertionError(f"server error while waiting for {t}: {frame}")

    def request(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Send a request and return the event its ack names."""
        self._ids += 1
        frame = {**frame, "id": f"{self._prefix}-{self._ids}"}
        self.send(frame)
        ack = self.expect("ack")
        assert ack["id"] == frame["id"]
        for event in self.events:
            if event["seq"] == ack["seq"]:
                return event
        while True:
            event = self.expect("event")
            if event["seq"] == ack["seq"]:
                return event

    def roll(
        self, intent: dict[str, Any], visibility: str = "public", label: str | None = None
    ) -> dict[str, Any]:
        frame: dict[str, Any] = {"t": "roll", "intent": intent, "visibility": visibility}
        if label:
            frame["label"] = label
        return self.request(frame)

    def reveal(self, seq: int) -> dict[str, Any]:
        return self.request({"t": "reveal", "seq": seq})

    def resource(self, name: str, op: str, n: int, participant: str | None = None) -> dict[str, Any]:
        frame: dict[str, Any] = {"t": "resource", "name": name, "op": op, "n": n}
        if participant:
            frame["participant"] = participant
        return self.request(frame)

    def close(self) -> None:
        self._stack.close()
