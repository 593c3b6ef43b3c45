"""Acknowledged means stored: a server killed mid-burst keeps every event it acknowledged."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from tests.e2e.servers import Server
from tests.e2e.wire import Client, fold_resources

DUALITY = {"system": "daggerheart.duality", "modifier": 0}
POWER = {"system": "drawsteel.power", "characteristic": 2}
PER_CLIENT = 30  # under the default burst of 40 frames, so the rate limit never answers instead of the server


@pytest.mark.parametrize("writer", ["loop", "thread", "process"])
async def test_acknowledged_events_survive_sigkill(
    server_factory: Callable[..., Server], clients: Any, writer: str
) -> None:
    srv = server_factory(TABLERELAY_SQLITE_WRITER=writer)
    room = await srv.acreate_room("Durable")
    gm = await clients.join(srv.url, room.gm, "gm")
    players = [await clients.join(srv.url, room.player, f"p{i}") for i in range(3)]
    epoch = gm.welcome["epoch"]
    everyone = [gm, *players]
    sent: dict[str, Client] = {}

    async def burst(client: Client) -> None:
        intent = POWER if client is gm else DUALITY
        for i in range(PER_CLIENT):
            rid = client.new_id("dur")
            frame = {
                "t": "roll",
                "id": rid,
                "intent": intent,
                "visibility": "gm" if i % 3 == 0 else "public",
                "label": rid,
            }
            try:
                await client.send(frame)
            except ConnectionClosed:
                return
            sent[rid] = client
            await asyncio.sleep(0.001)  # spread the sends so the kill lands while frames are in flight

    def acks() -> list[tuple[Client, dict[str, Any]]]:
        return [(c, f) for c in everyone for f in c.frames if isinstance(f, dict) and f.get("t") == "ack"]

    async def kill_mid_burst() -> None:
        deadline = asyncio.get_running_loop().time() + 20
        while len(acks()) < 30 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.002)
        await asyncio.to_thread(srv.kill)

    await asyncio.gather(*(burst(c) for c in everyone), kill_mid_burst())
    for c in everyone:
        with contextlib.suppress(AssertionError):
            await c.wait_closed(5)
    acked = acks()
    assert len(acked) >= 30, "the server was killed before it acknowledged anything"
    for c, ack in acked:
        assert sent[ack["id"]] is c, ack

    srv.start()  # same data folder, same secret, a new port
    reader = await clients.join(srv.url, room.gm, "reader", resume={"epoch": epoch, "seq": 0})
    w = reader.welcome
    assert w["epoch"] == epoch, "the log survived, so the epoch must not change"
    assert w["recovered"] is True, w
    history = w["history"]
    assert [ev["seq"] for ev in history] == list(range(1, w["seq"] + 1)), "seqs must be dense 1..N"
    by_seq = {ev["seq"]: ev for ev in history}
    for c, ack in acked:
        ev = by_seq.get(ack["seq"])
        assert ev is not None, f"acknowledged seq {ack['seq']} is missing after the restart"
        assert ev["kind"] == "roll", ev
        assert ev["actor"]["id"] == c.id, ev
        assert ev["label"] == ack["id"], "the acknowledged seq holds a different roll"
    rolls = [ev for ev in history if ev["kind"] == "roll"]
    assert len(rolls) >= len(acked)
    assert len({ev["label"] for ev in rolls}) == len(rolls), "a roll was stored twice"
    fear, hope = fold_resources(history)
    assert w["state"]["fear"] == fear, (w["state"], fear)
    for who in set(hope) | set(w["state"]["hope"]):
        assert w["state"]["hope"].get(who, 0) == hope.get(who, 0), (who, w["state"]["hope"], hope)

    # The restarted server takes new rolls after the old ones.
    p = await clients.join(srv.url, room.player, "after")
    ack = await p.roll(DUALITY)
    assert ack["seq"] > w["seq"]


async def test_a_dead_writer_process_stops_the_acks_not_the_server(
    server_factory: Callable[..., Server], clients: Any
) -> None:
    # The writer process is gone: every roll after it is answered with an error, never an ack, the
    # operator is told once, and what was acked before is on disk for the next start.
    srv = server_factory(TABLERELAY_SQLITE_WRITER="process")
    room = await srv.acreate_room("Writer dies")
    player = await clients.join(srv.url, room.player, "p")
    before = [await player.roll(DUALITY, label=f"before-{i}") for i in range(5)]
    (started,) = await srv.alogged("sqlite_writer_started")
    os.kill(int(started["pid"]), signal.SIGKILL)
    for i in range(3):
        frame = {"t": "roll", "intent": DUALITY, "visibility": "public", "label": f"after-{i}"}
        reply = await player.request(frame)
        assert reply["t"] == "error", reply
        assert reply["code"] == "internal", reply
    # The log line comes when the pipe's end is read, maybe after the answers.
    assert len(await srv.alogged("sqlite_writer_ended")) == 1, srv.log_text()
    reply = await player.request({"t": "ping"})
    assert reply["t"] == "pong", "the server still answers; it only stores nothing more"
    await srv.astop()

    srv.start()  # the writer thread this time: the file is the same either way
    resume = {"epoch": player.welcome["epoch"], "seq": 0}
    reader = await clients.join(srv.url, room.gm, "reader", resume=resume)
    rolls = [ev for ev in reader.welcome["history"] if ev["kind"] == "roll"]
    assert [ev["label"] for ev in rolls] == [f"before-{i}" for i in range(5)]
    assert [ev["seq"] for ev in rolls] == [ack["seq"] for ack in before]
