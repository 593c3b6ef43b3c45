"""The floor of our stack: a bare ``websockets`` server that broadcasts the relay's own roll event.

Every connection joins the room named by its path (``/r/<room>``). Any message a client sends counts as a
roll: the server numbers it within the room and broadcasts the relay's roll event as the relay sent it
(captured by the suite's calibration), only its seq patched in as a 4-byte integer: the same bytes for the
receivers to read and decode as the relay's, give or take the seq's width. No parsing, no storage, no
dice: what is left is websockets framing and the asyncio transport, which the relay pays for too.

    python -m bench.peers.bare_ws --port 0 --frame event.msgpack
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import struct
from pathlib import Path

import msgpack
from websockets.asyncio.server import ServerConnection, broadcast, serve

from bench.peers.common import announce, raise_nofile
from bench.peers.loop import run_on_peer_loop

#: The seq written as MessagePack's uint32 with a value no event has: where the seq goes in the template.
SEQ_MARK = msgpack.packb("seq") + b"\xce\xff\xff\xff\xff"


def template(event: bytes) -> tuple[bytes, bytes]:
    """(prefix, suffix) of the MessagePack map ``event`` (the relay's roll event, its keys in their order)
    re-encoded with its seq as a uint32: the 4-byte seq goes between them."""
    frame = msgpack.unpackb(event, raw=False)
    if not isinstance(frame, dict) or "seq" not in frame:
        raise ValueError("the frame file does not hold an event with a seq")
    data = msgpack.packb({**frame, "seq": 0xFFFFFFFF}, use_bin_type=True)
    at = data.index(SEQ_MARK) + len(SEQ_MARK) - 4
    return data[:at], data[at + 4 :]


class Bare:
    def __init__(self, event: bytes) -> None:
        self.head, self.tail = template(event)
        self.rooms: dict[str, set[ServerConnection]] = {}
        self.seqs: dict[str, int] = {}

    async def handler(self, ws: ServerConnection) -> None:
        room = ws.request.path if ws.request is not None else "/"
        members = self.rooms.setdefault(room, set())
        members.add(ws)
        try:
            async for _ in ws:
                seq = self.seqs.get(room, 0) + 1
                self.seqs[room] = seq
                broadcast(members, self.head + struct.pack(">I", seq) + self.tail)
        finally:
            members.discard(ws)


async def main(host: str, port: int, event: bytes) -> None:
    raise_nofile()
    bare = Bare(event)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # The relay's own settings where they matter to throughput and memory.
    async with serve(
        bare.handler, host, port, compression=None, max_size=64 * 1024, max_queue=64, ping_interval=20
    ) as server:
        announce(host, server.sockets[0].getsockname()[1], "ws")
        await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--frame", type=Path, required=True, help="the relay's roll event (MessagePack)")
    args = parser.parse_args()
    run_on_peer_loop(main(args.host, args.port, args.frame.read_bytes()))
