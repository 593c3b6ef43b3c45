"""A room's memory is bounded: an old hidden roll's blob leaves memory and comes back from the log for its
reveal, and a room nobody is in is unloaded and loaded again on the next hello, with nothing lost."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Callable
from typing import Any

import msgpack

from tests.e2e.servers import Server, parse_log_line
from tests.e2e.wire import assert_full, assert_sealed

POWER = {"system": "drawsteel.power", "characteristic": 2}


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
    await srv.alogged("room_unloaded", room.id)
    _, _, health = await srv.aget("/healthz")
    assert '"rooms": 0' in health, health

    back = await clients.join(srv.url, session, "p-back", resume={"epoch": epoch, "seq": last})
    assert back.welcome["recovered"] is True
    history = [ev["seq"] for ev in back.welcome["history"]]
    assert history == list(range(last + 1, back.welcome["seq"] + 1)), "the leaves stored while it was away"
    assert len(await srv.alogged("room_loaded", count=2)) == 2, "loaded again from the log"
    ack = await back.roll(POWER, "public", "after the reload")
    assert ack["seq"] == back.welcome["seq"] + 1, "seqs go on from the log, dense"
    assert srv.logged("room_unloaded"), "unloaded once"
    errors = [r for r in map(parse_log_line, srv.log_lines) if r is not None and r.get("level") == "error"]
    assert not errors, errors


DUALITY = {"system": "daggerheart.duality", "modifier": 1}


async def test_a_hidden_roll_out_of_memory_stays_sealed_in_histories_and_its_reveal_is_authorized_as_before(
    server_factory: Callable[..., Server], clients: Any
) -> None:
    """An old hidden roll's entry leaves the room's memory (relay.shell.old_rolls): a resume from before it
    still shows it sealed to outsiders, with its resource event naming no cause, and every byte they receive
    up to its reveal is searched for its secrets; the reveal is authorized as for a recent roll."""
    # A recent window of 3 events; the upkeep looks every second (a third of the idle time).
    srv = server_factory(TABLERELAY_HISTORY="3", TABLERELAY_ROOM_IDLE="3", TABLERELAY_LOG_LEVEL="debug")
    room = await srv.acreate_room("Old rolls")
    gm = await clients.join(srv.url, room.gm, "gm")
    p1 = await clients.join(srv.url, room.player, "p1")
    p2 = await clients.join(srv.url, room.player, "p2")
    spec = await clients.join(srv.url, room.spectator, "spec")
    before = spec.welcome["seq"]
    marker = secrets.token_hex(8)
    hidden = await p1.roll(DUALITY, "gm", f"Old secret {marker}")
    full = await gm.event(hidden["seq"])
    assert_full(full)
    effect = await gm.next("event", kind="resource", where=lambda f: f["seq"] > hidden["seq"])
    assert effect["cause"] is None, "a resource event names its roll only once the roll is revealed"
    for i in range(6):
        await p1.roll(POWER, "public", f"after {i}")
    await wait_for(
        lambda: any(
            r.get("room") == room.id and r["floor"] >= effect["seq"]
            for r in srv.logged("hidden_rolls_forgotten")
        )
    )

    # Resumes from before the roll: the history comes from the log, the roll's state from old_rolls.
    epoch = spec.welcome["epoch"]
    late_spec = await clients.join(
        srv.url, room.spectator, "late-spec", resume={"epoch": epoch, "seq": before}
    )
    late_p2 = await clients.join(
        srv.url, p2.welcome["session"], "late-p2", resume={"epoch": epoch, "seq": before}
    )
    late_gm = await clients.join(
        srv.url, gm.welcome["session"], "late-gm", resume={"epoch": epoch, "seq": before}
    )
    for c in (late_spec, late_p2, late_gm):
        assert c.welcome["recovered"] is True, c.welcome
        shown = {ev["seq"]: ev for ev in c.welcome["history"]}
        if c is late_gm:
            assert_full(shown[hidden["seq"]])
            assert shown[hidden["seq"]]["label"] == f"Old secret {marker}"
        else:
            assert_sealed(shown[hidden["seq"]])
        assert shown[effect["seq"]].get("cause") is None, "an unrevealed roll is named as a cause to nobody"

    for c in (p2, spec, late_p2):
        refused = await c.request({"t": "reveal", "seq": hidden["seq"]})
        assert refused["t"] == "error", refused
        assert refused["code"] == "forbidden", refused
    await asyncio.sleep(0.3)
    logs_before_reveal = list(srv.log_lines)
    reveal = await p1.request({"t": "reveal", "seq": hidden["seq"]})  # the roller of a gm roll may
    assert reveal["t"] == "ack", reveal
    opened = {c.label: await c.event(reveal["seq"]) for c in (p2, spec, late_spec, late_p2)}
    nonce = opened["spec"]["nonce"]
    blob = opened["spec"]["blob"]
    assert hashlib.sha256(nonce + blob).hexdigest() == full["commitment"]
    assert msgpack.unpackb(blob, raw=False)["label"] == f"Old secret {marker}"
    needles = {
        "label marker": marker.encode(),
        "nonce": nonce,
        "result": msgpack.packb(full["result"], use_bin_type=True),
        "dice": msgpack.packb(full["result"]["dice"], use_bin_type=True),
        "intent": msgpack.packb(full["intent"], use_bin_type=True),
    }
    for c in (p2, spec, late_spec, late_p2):
        received = c.bytes_since(0, next(i for i, f in enumerate(c.frames) if f is opened[c.label]))
        for name, needle in needles.items():
            assert needle not in received, f"{c.label} received the old roll's {name} before its reveal"
    for line in logs_before_reveal:
        assert marker not in line, line
        assert nonce.hex() not in line, line

    again = await gm.request({"t": "reveal", "seq": hidden["seq"]})
    assert again == {"t": "ack", "id": again["id"], "seq": reveal["seq"]}, "a second reveal is the first"
    after = await clients.join(srv.url, room.spectator, "after", resume={"epoch": epoch, "seq": before})
    shown = {ev["seq"]: ev for ev in after.welcome["history"]}
    assert_full(shown[hidden["seq"]])
    assert shown[hidden["seq"]]["revealed"] == reveal["seq"]
    assert shown[effect["seq"]]["cause"] == hidden["seq"], "named once its roll is revealed"
    errors = [r for r in map(parse_log_line, srv.log_lines) if r is not None and r.get("level") == "error"]
    assert not errors, errors
