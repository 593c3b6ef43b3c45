"""End-to-end fixtures: a real ``tablerelay serve`` process and real WebSocket clients.

Everything here is written from the wire-protocol spec, not from the server's code: the server is a black box
started as a subprocess, spoken to over sockets, and judged by the bytes it sends and the log lines it writes.

The server process is in servers.py, the client and the spec's helpers in wire.py.
"""

from __future__ import annotations

import asyncio
import secrets
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.servers import Room, Server, running_server, server_env
from tests.e2e.wire import Client


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server per test module, on its own data folder, with default limits and debug logging.

    Debug logging makes the "no hidden value in any log line" checks as strict as they can be.
    """
    with running_server(tmp_path_factory.mktemp("relay-data"), {"TABLERELAY_LOG_LEVEL": "debug"}) as srv:
        yield srv


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start extra servers for one test (own limits, or to be killed); any still running are stopped."""
    started: list[Server] = []

    def start(data: Path | None = None, **env: str) -> Server:
        srv = Server(
            data=data or tmp_path / f"data{len(started)}",
            env=server_env(env.pop("secret", secrets.token_hex(24)), env),
        ).start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        if srv.running:
            srv.stop(signal.SIGKILL)


@pytest.fixture
async def room(server: Server) -> Room:
    return await server.acreate_room("Table " + secrets.token_hex(3))


@pytest.fixture
async def clients() -> Any:
    """Collects clients a test opens and closes them at the end, whatever happened."""
    opened: list[Client] = []

    class Opener:
        async def join(self, url: str, token: str, label: str = "client", **kwargs: Any) -> Client:
            c = await Client.join(url, token, label, **kwargs)
            opened.append(c)
            return c

        async def open(self, url: str, label: str = "client", **kwargs: Any) -> Client:
            c = await Client.open(url, label, **kwargs)
            opened.append(c)
            return c

    yield Opener()
    await asyncio.gather(*(c.close() for c in opened), return_exceptions=True)
