"""What the server's process freezes out of the collector must never become a reference cycle.

``relay.shell.upkeep`` freezes what survives its collections (``gc.freeze``), so no collection walks the
sockets and rooms of the hours before; a frozen object is still freed the moment its last reference goes,
but a cycle it ends up in waits for ever. The long-lived things a hosted relay lets go of are sockets
(closed by the client, dropped, closed for a broken frame: ``test_server.py``) and idle rooms unloaded:
each must be freed by reference counting alone, with nothing left for a collection to find.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from websockets.asyncio.server import ServerConnection
from websockets.server import ServerProtocol

from tests.relay.shell.test_server import POWER, Running, collect_until, hello, serving


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Running]:
    async with serving(tmp_path) as running:
        yield running


def relay_garbage() -> list[Any]:
    """What a full collection finds unreachable now that belongs to the server side: the relay's own
    objects, websockets' server connections and protocols (the test's clients are in this process too)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return [
            o
            for o in gc.garbage
            if type(o).__module__.startswith("relay.") or isinstance(o, ServerConnection | ServerProtocol)
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def finished(running: Running) -> None:
    handlers = running.relay._handlers
    for _ in range(200):  # the server's handlers finish after the clients see the close
        if not handlers:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the closed sockets' handlers did not finish")


async def test_sockets_that_rolled_and_closed_and_their_unloaded_room_leave_no_cycle(server: Running) -> None:
    room = server.room()
    gc.collect()  # cycles from before this test out of the way
    gm, _ = await hello(server.url, server.token(room, "gm"))
    player, _ = await hello(server.url, server.token(room, "player", sub="p1"))
    watcher, _ = await hello(server.url, server.token(room, "spectator", sub="w"))
    for i, visibility in enumerate(("public", "gm", "public")):
        await gm.send(msgpack.packb({"t": "roll", "id": f"r{i}", "intent": POWER, "visibility": visibility}))
    await collect_until(watcher, 6)  # three joins, three rolls (the gm-only one sealed for it)
    await gm.close()  # a close handshake
    await player.close(1001)
    watcher.transport.abort()  # a socket that just drops
    await finished(server)
    assert relay_garbage() == [], "a closed socket left a reference cycle"

    handle = server.relay.rooms[room]
    assert not handle.room.sockets, "nobody left in the room"
    del handle
    server.relay.upkeep.unload(room)
    assert room not in server.relay.rooms
    assert relay_garbage() == [], "an unloaded room left a reference cycle"


def test_the_servers_process_freezes_what_survives_the_upkeeps_collections() -> None:
    # In a child process: freezing is process-wide and would change this test run's collector.
    probe = (
        "import gc; from relay.shell import upkeep; from relay.shell.serve import settle_gc\n"
        "kept = [[i] for i in range(1000)]\n"
        "found, _, _ = upkeep.collect(freeze=upkeep._freezing)\n"
        "before = gc.get_freeze_count()\n"
        "settle_gc()\n"
        "more = [[i] for i in range(1000)]\n"
        "upkeep.collect(freeze=upkeep._freezing)\n"
        "print(before, gc.get_freeze_count() - before, len(gc.get_objects(2)) < 100)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    before, frozen, walked = out.stdout.split()
    assert int(before) == 0, "a process that did not hand its collector over keeps it as it was"
    assert int(frozen) >= 2000, "the server's process freezes what its collections leave alive"
    assert walked == "True", "the next collection has almost nothing left to walk"
