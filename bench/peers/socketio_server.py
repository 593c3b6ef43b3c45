"""python-socketio on aiohttp broadcasting to a room: the Socket.IO stack a Foundry VTT server speaks.

Clients connect with ``auth={"room": NAME}`` and join that room. A ``roll`` event from any client makes
the server number it within the room and ``emit`` an ``event`` to the whole room carrying the relay's
roll event (decoded, as JSON, the way Socket.IO ships objects), with its seq. The payload file is the
JSON of one real relay roll event, captured by the orchestrator at the start of the run.

    python -m bench.peers.socketio_server --port 0 --payload event.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import socketio
from aiohttp import web

from bench.peers.common import announce, raise_nofile
from bench.peers.loop import run_on_peer_loop


async def main(host: str, port: int, payload: dict[str, Any]) -> None:
    raise_nofile()
    sio = socketio.AsyncServer(async_mode="aiohttp", logger=False, engineio_logger=False)
    app = web.Application()
    sio.attach(app)
    rooms: dict[str, str] = {}
    seqs: dict[str, int] = {}

    async def connect(sid: str, environ: dict[str, Any], auth: dict[str, Any] | None = None) -> None:  # noqa: ARG001
        room = str((auth or {}).get("room") or "table")
        rooms[sid] = room
        await sio.enter_room(sid, room)

    async def disconnect(sid: str, *_: Any) -> None:
        rooms.pop(sid, None)

    async def roll(sid: str, data: Any) -> None:  # noqa: ARG001
        room = rooms.get(sid, "table")
        seq = seqs.get(room, 0) + 1
        seqs[room] = seq
        await sio.emit("event", {**payload, "seq": seq}, room=room)

    # Registered by call rather than with the untyped ``@sio.event`` decorator, which would leave the
    # handlers unchecked.
    for handler in (connect, disconnect, roll):
        sio.on(handler.__name__, handler)

    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    # The runner's addresses are its sites' listening sockets (getsockname()): the one site's is first.
    announce(host, runner.addresses[0][1], "http")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--payload", type=Path, required=True, help="a JSON file: the event to broadcast")
    args = parser.parse_args()
    run_on_peer_loop(main(args.host, args.port, json.loads(args.payload.read_text())))
