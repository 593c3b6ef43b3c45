"""The floor of our stack: a bare ``websockets`` server that broadcasts a precomputed frame.

Every connection joins the room named by its path (``/r/<room>``). Any message a client sends counts as a
roll: the server numbers it within the room and broadcasts a frame of exactly the relay's roll-event size,
the precomputed template with only the 4-byte seq patched in. No parsing, no storage, no dice: what is
left is websockets framing and the asyncio transport, which the relay pays for too.

    python -m bench.peers.bare_ws --port 0 --frame-size 480
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import struct

import msgpack
from websockets.asyncio.server import ServerConnection, broadcast, serve

from bench.peers.common import announce, raise_nofile
from bench.peers.loop import run_on_peer_loop


def template(size: int) -> tuple[bytes, bytes]:
    """(prefix, suffix) of a MessagePack map ``{"t": "event", "seq": <uint32>, "pad": <bin>}`` of ``size``
    bytes once the 4-byte seq sits between them; receivers can decode it like a relay event."""
    head = b"\x83" + msgpack.packb("t") + msgpack.packb("event") + msgpack.packb("seq") + b"\xce"
    tail_key = msgpack.packb("pad")
    for pad in range(max(0, size - 64), size + 1):
        tail = tail_key + msgpack.packb(b"\x00" * pad, use_bin_type=True)
        if len(head) + 4 + len(tail) == size:
            return head, tail
    raise ValueError(f"cannot build a frame of {size} bytes")


class Bare:
    def __init__(self, size: int) -> None:
        self.head, self.tail = template(size)
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


async def main(host: str, port: int, size: int) -> None:
    raise_nofile()
    bare = Bare(size)
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
    parser.add_argument("--frame-size", type=int, required=True, help="bytes per broadcast frame")
    args = parser.parse_args()
    run_on_peer_loop(main(args.host, args.port, args.frame_size))
