"""relay.shell.keepalive on real sockets: live clients are pinged and stay; a peer that never answers is
closed with 1011 "keepalive ping timeout", as websockets' own keepalive would."""

from __future__ import annotations

import asyncio
import base64
import gc
import os
import struct
import weakref
from collections.abc import AsyncIterator

import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.protocol import State

from relay.shell.keepalive import Keepalive

INTERVAL = 0.3


@pytest.fixture
async def server() -> AsyncIterator[tuple[Server, Keepalive, list[ServerConnection]]]:
    keepalive = Keepalive(INTERVAL, INTERVAL)
    sockets: list[ServerConnection] = []

    async def handler(ws: ServerConnection) -> None:
        sockets.append(ws)
        keepalive.add(ws)
        await ws.wait_closed()

    async with serve(handler, "127.0.0.1", 0, ping_interval=None, ping_timeout=None, close_timeout=1) as srv:
        yield srv, keepalive, sockets
    await keepalive.close()


def _port(srv: Server) -> int:
    return int(srv.sockets[0].getsockname()[1])


async def test_a_live_client_is_pinged_and_stays_open(
    server: tuple[Server, Keepalive, list[ServerConnection]],
) -> None:
    srv, keepalive, _ = server
    async with connect(f"ws://127.0.0.1:{_port(srv)}/", ping_interval=None) as client:
        await asyncio.sleep(8 * INTERVAL)
        assert keepalive.sent >= 3, keepalive.sent  # the client's library answered every ping
        assert keepalive.timed_out == 0
        assert client.protocol.state is State.OPEN
        await client.send("still here")


async def _raw_upgrade(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A WebSocket client that completes the handshake and then never reads or answers anything."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    return reader, writer


async def _frames(reader: asyncio.StreamReader) -> AsyncIterator[tuple[int, bytes]]:
    """Server frames (unmasked, short) as (opcode, payload) until the socket ends."""
    while True:
        try:
            first, length = await reader.readexactly(2)
        except asyncio.IncompleteReadError:
            return
        assert length < 126
        yield first & 0x0F, await reader.readexactly(length)


async def test_a_peer_that_never_answers_is_closed_with_1011(
    server: tuple[Server, Keepalive, list[ServerConnection]],
) -> None:
    srv, keepalive, sockets = server
    reader, writer = await _raw_upgrade(_port(srv))
    try:
        seen: list[tuple[int, bytes]] = []

        async def read_all() -> None:
            async for frame in _frames(reader):
                seen.append(frame)
                if frame[0] == 0x8:  # close: done
                    return

        await asyncio.wait_for(read_all(), 6 * INTERVAL + 3)
        opcodes = [op for op, _ in seen]
        assert opcodes[0] == 0x9, seen  # a ping, never answered
        op, payload = seen[-1]
        assert op == 0x8, seen
        (code,) = struct.unpack("!H", payload[:2])
        assert (code, payload[2:]) == (1011, b"keepalive ping timeout")
        assert keepalive.timed_out == 1
        await asyncio.wait_for(sockets[0].wait_closed(), 5)  # the server gives up on the handshake
    finally:
        writer.close()


async def test_a_closed_socket_is_freed_before_its_next_ping_is_due() -> None:
    # A socket that closes long before its turn in the ping queue must not stay in memory (its buffers,
    # its protocol) until that turn comes: a hosted relay sees people come and go all evening.
    keepalive = Keepalive(60.0, 10.0)
    held: list[weakref.ref[ServerConnection]] = []
    done = asyncio.Event()

    async def handler(ws: ServerConnection) -> None:
        held.append(weakref.ref(ws))
        keepalive.add(ws)
        await ws.wait_closed()
        done.set()

    async with serve(handler, "127.0.0.1", 0, ping_interval=None, ping_timeout=None, close_timeout=1) as srv:
        async with connect(f"ws://127.0.0.1:{_port(srv)}/", ping_interval=None):
            pass
        await asyncio.wait_for(done.wait(), 5)
        await asyncio.sleep(0.05)  # the handler's task is let go once it has finished
        gc.collect()
        assert len(keepalive._pings) == 1, "its ping is still queued for a minute from now"
        assert held[0]() is None, "the keepalive queue kept a closed socket alive"
    await keepalive.close()


async def test_closed_sockets_are_forgotten_without_a_word(
    server: tuple[Server, Keepalive, list[ServerConnection]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    srv, keepalive, _ = server
    for _ in range(10):  # sockets that close before their first ping
        async with connect(f"ws://127.0.0.1:{_port(srv)}/", ping_interval=None):
            await asyncio.sleep(INTERVAL / 10)
    # One that takes a ping and goes away without its pong: websockets fails the ping's future.
    reader, writer = await _raw_upgrade(_port(srv))
    first = await asyncio.wait_for(anext(_frames(reader)), 6 * INTERVAL)
    assert first[0] == 0x9, first
    writer.close()
    await asyncio.sleep(4 * INTERVAL)
    gc.collect()  # a future whose exception nobody took would complain now
    assert keepalive.timed_out == 0
    assert "exception was never retrieved" not in caplog.text
    assert not keepalive._pings, "nothing is kept for a closed socket"
    assert not keepalive._pongs
