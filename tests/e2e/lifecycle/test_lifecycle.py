"""Servers of their own: graceful shutdown, and a slow client that must not slow the room."""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Callable
from typing import Any

from tests.e2e.servers import Server
from tests.e2e.wire import Client

POWER = {"system": "drawsteel.power", "characteristic": 2}


async def test_sigterm_closes_clients_with_1001_and_exits_0(
    server_factory: Callable[..., Server], clients: Any
) -> None:
    srv = server_factory()
    room = await srv.acreate_room("Closing time")
    gm = await clients.join(srv.url, room.gm, "gm")
    p = await clients.join(srv.url, room.player, "p")
    await p.roll(POWER)
    stopping = asyncio.ensure_future(asyncio.to_thread(srv.stop, signal.SIGTERM))
    codes = [await c.wait_closed(10) for c in (gm, p)]
    assert await stopping == 0, "SIGTERM must end the server with exit status 0"
    for code, _ in codes:
        assert code == 1001, f"clients must be told the server is going away (1001), got {codes}"


def is_leave_of(ev: dict[str, Any], who: str) -> bool:
    if ev.get("kind") != "leave":
        return False
    return ev.get("actor", {}).get("id") == who or who in str(ev.get("member", ""))


async def test_a_client_that_stops_reading_is_dropped_with_4008(
    server_factory: Callable[..., Server], clients: Any
) -> None:
    # A small queue and a lifted rate limit, so the test needs few events and the senders are never refused.
    srv = server_factory(TABLERELAY_SEND_QUEUE="32", TABLERELAY_RATE="5000", TABLERELAY_BURST="5000")
    room = await srv.acreate_room("Slow reader")
    gm = await clients.join(srv.url, room.gm, "gm")
    fast = await clients.join(srv.url, room.player, "fast")
    # The stalled client's receive buffer is made tiny so its queue overflows after few events.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((srv.host, srv.port))
    sock.setblocking(False)
    slow = await clients.join(
        srv.url, room.spectator, "slow", formats=["foundry", "roll20"], read=False, sock=sock, max_queue=1
    )
    first = slow.welcome["seq"] + 1

    label = "x" * 200
    dropped_at = None
    for _ in range(60):  # at most 60 batches of 40 rolls
        batch = [
            (
                c,
                {
                    "t": "roll",
                    "id": c.new_id("flood"),
                    "intent": POWER,
                    "visibility": "public",
                    "label": label,
                },
            )
            for c in (gm, fast)
            for _ in range(20)
        ]
        for c, f in batch:
            await c.send(f)
        for c, f in batch:
            reply = await c.answer(f["id"])
            assert reply["t"] == "ack", reply
        if any(is_leave_of(ev, slow.id) for ev in gm.events()):
            dropped_at = max(ev["seq"] for ev in gm.events())
            break
    assert dropped_at is not None, "the server never dropped a client that stopped reading"

    # Life goes on for everyone else.
    tail = [await gm.roll(POWER, "public", f"after {i}") for i in range(5)]
    top = tail[-1]["seq"]
    for c in (gm, fast):
        await c.event(top)
        seqs = [ev["seq"] for ev in c.events()]
        assert seqs == list(range(seqs[0], top + 1)), f"{c.label} missed or repeated events"

    # The stalled client, reading again, finds what it was sent in order and then the 4008 close.
    code, reason = await slow.wait_closed(15)
    assert code == 4008, f"a client whose queue overflowed must be closed with 4008, got {code} {reason!r}"
    got = [ev["seq"] for ev in slow.events()]
    assert got == list(range(first, first + len(got))), "a dropped client still gets a gapless prefix"
    last = got[-1] if got else slow.welcome["seq"]
    assert last < top

    # And it catches up with a resume.
    back = await Client.join(
        srv.url, slow.welcome["session"], "slow-back", resume={"epoch": slow.welcome["epoch"], "seq": last}
    )
    try:
        assert back.welcome["recovered"] is True
        assert [ev["seq"] for ev in back.welcome["history"]] == list(range(last + 1, back.welcome["seq"] + 1))
    finally:
        await back.close()
