"""A room's memory is bounded: an old hidden roll's blob leaves memory and comes back from the log for its
reveal, and a room nobody is in is unloaded and loaded again on the next hello, with nothing lost."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from typing import Any

import msgpack

from .conftest import Server, parse_log_line

POWER = {"system": "drawsteel.power", "characteristic": 2}


def log_events(srv: Server, name: str) -> list[dict[str, Any]]:
    return [r for r in map(parse_log_line, srv.log_lines) if r is not None and r.get("event") == name]


async def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "the condition never came true"
        await asyncio.sleep(0.1)


async def test_a_late_reveal_reads_the_blob_back_and_an_idle_room_is_unloaded_and_reloaded(
    server_factory: Callable[..., Server], clients: Any
) -> None:
    # A recent window of 3 events and a 1-second idle time, so the upkeep acts within the test.
    srv = server_factory(TABLERELAY_HISTORY="3", TABLERELAY_ROOM_IDLE="1", TABLERELAY_LOG_LEVEL="debug")
    room = await srv.acreate_room("Upkeep")
    gm = await clients.join(srv.url, room.gm, "gm")
    p = await clients.join(srv.url, room.player, "p")
    hidden = await p.roll(POWER, "blind", "LATE-REVEAL-MARKER")
    for i in range(6):
        await p.roll(POWER, "public", f"after {i}")
    commitment = (await gm.event(hidden["seq"]))["commitment"]
    await asyncio.sleep(1.0)  # the upkeep looks every third of a second

    refused = await p.request({"t": "reveal", "seq": hidden["seq"]})  # a blind roll: the GM's to reveal
    assert refused["t"] == "error"
    assert refused["code"] == "forbidden"
    reveal = await gm.request({"t": "reveal", "seq": hidden["seq"]})
    assert reveal["t"] == "ack", reveal
    event = await p.event(reveal["seq"])
    assert event["kind"] == "reveal"
    assert event["of"] == hidden["seq"]
    assert hashlib.sha256(event["nonce"] + event["blob"]).hexdigest() == commitment
    body = msgpack.unpackb(event["blob"], raw=False)
    assert body["label"] == "LATE-REVEAL-MARKER", "the blob read back is the roll's own"
    again = await gm.request({"t": "reveal", "seq": hidden["seq"]})
    assert again == {"t": "ack", "id": again["id"], "seq": reveal["seq"]}, "a second reveal is the first"

    last = reveal["seq"]
    epoch = p.welcome["epoch"]
    session = p.welcome["session"]
    await gm.close()
    await p.close()
    await wait_for(lambda: any(r.get("room") == room.id for r in log_events(srv, "room_unloaded")))
    _, _, health = await srv.aget("/healthz")
    assert '"rooms": 0' in health, health

    back = await clients.join(srv.url, session, "p-back", resume={"epoch": epoch, "seq": last})
    assert back.welcome["recovered"] is True
    history = [ev["seq"] for ev in back.welcome["history"]]
    assert history == list(range(last + 1, back.welcome["seq"] + 1)), "the leaves stored while it was away"
    assert len(log_events(srv, "room_loaded")) == 2, "loaded again from the log"
    ack = await back.roll(POWER, "public", "after the reload")
    assert ack["seq"] == back.welcome["seq"] + 1, "seqs go on from the log, dense"
    assert log_events(srv, "room_unloaded"), "unloaded once"
    errors = [r for r in map(parse_log_line, srv.log_lines) if r is not None and r.get("level") == "error"]
    assert not errors, errors
