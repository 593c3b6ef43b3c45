"""Fear and Hope: effects of duality rolls, and spends that race for the last Fear."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.e2e.servers import Room, Server
from tests.e2e.wire import Client, caught_up, fold_resources

DUALITY = {"system": "daggerheart.duality", "modifier": 1, "difficulty": 12}
ATTACK = {
    "system": "daggerheart.attack",
    "modifier": 3,
    "experience": 2,
    "spend_fear": True,
    "targets": [{"name": "Ranger", "evasion": 12}],
}


async def full_log(
    server: Server, room: Room, clients: Any, epoch: int
) -> tuple[Client, list[dict[str, Any]]]:
    """A fresh GM connection resuming from seq 0: the room's whole log in its welcome history."""
    reader = await clients.join(server.url, room.gm, "log-reader", resume={"epoch": epoch, "seq": 0})
    assert reader.welcome["recovered"] is True, reader.welcome
    history = reader.welcome["history"]
    assert [ev["seq"] for ev in history] == list(range(1, reader.welcome["seq"] + 1)), "seqs must be dense"
    return reader, history


async def test_duality_with_fear_gives_the_gm_fear(server: Server, room: Room, clients: Any) -> None:
    gm = await clients.join(server.url, room.gm, "gm")
    p1 = await clients.join(server.url, room.player, "p1")
    assert gm.welcome["state"]["fear"] == 0
    hope = 0
    for _ in range(40):  # P(no Fear in 40 rolls) = (7/12)**40 < 1e-9
        ack = await p1.roll(DUALITY)
        seq = ack["seq"]
        ev = await gm.event(seq)
        result = ev["result"]
        assert result["with"] in ("hope", "fear", "critical"), result
        if result["with"] == "fear":
            res = await gm.next("event", kind="resource", where=lambda f, seq=seq: f.get("cause") == seq)
            assert res["name"] == "fear", res
            assert res["delta"] == 1, res
            assert res["value"] == 1, res
            assert res["seq"] > ack["seq"], res
            break
        if hope < 6:
            res = await gm.next("event", kind="resource", where=lambda f, seq=seq: f.get("cause") == seq)
            assert res["name"] == "hope", res
            assert res["participant"] == p1.id, res
            assert res["value"] == hope + 1, res
            hope += 1
    else:
        pytest.fail("40 duality rolls never came up with Fear")
    again = await clients.join(server.url, room.spectator, "spec")
    assert again.welcome["state"]["fear"] == 1, again.welcome["state"]
    assert again.welcome["state"]["hope"].get(p1.id, 0) == hope, again.welcome["state"]


async def test_fifty_racing_spends_of_twelve_fear(server: Server, room: Room, clients: Any) -> None:
    gms = [await clients.join(server.url, room.gm, f"gm{i}") for i in range(5)]
    watcher = await clients.join(server.url, room.spectator, "watcher")
    epoch = gms[0].welcome["epoch"]

    reply = await gms[0].request({"t": "resource", "name": "fear", "op": "set", "n": 12})
    assert reply["t"] == "ack", reply
    res = await watcher.event(reply["seq"])
    assert res["kind"] == "resource", res
    assert res["name"] == "fear", res
    assert res["value"] == 12, res

    # 10 attacks pipelined on each of 5 GM sockets, all sent before any answer is read.
    frames = [
        [{"t": "roll", "id": gm.new_id("atk"), "intent": ATTACK, "visibility": "public"} for _ in range(10)]
        for gm in gms
    ]

    async def fire(gm: Client, batch: list[dict[str, Any]]) -> None:
        for frame in batch:
            await gm.send(frame)

    await asyncio.gather(*(fire(gm, batch) for gm, batch in zip(gms, frames, strict=True)))
    answers = [await gm.answer(frame["id"]) for gm, batch in zip(gms, frames, strict=True) for frame in batch]
    acks = [a for a in answers if a["t"] == "ack"]
    errors = [a for a in answers if a["t"] == "error"]
    assert len(acks) == 12, f"{len(acks)} spends succeeded out of 50 racing for 12 Fear: {errors[:3]}"
    assert len(errors) == 38, answers
    assert {e["code"] for e in errors} == {"insufficient"}, errors
    for e in errors:
        assert isinstance(e["message"], str), e
        assert len(e["message"]) > 10, e
    assert len({a["seq"] for a in acks}) == 12

    fresh = await clients.join(server.url, room.spectator, "fresh")
    assert fresh.welcome["state"]["fear"] == 0, fresh.welcome["state"]
    _, history = await full_log(server, room, clients, epoch)
    fear, _ = fold_resources(history)
    assert fear == 0
    ack_seqs = {a["seq"] for a in acks}
    attacks = [
        ev for ev in history if ev["kind"] == "roll" and ev["result"]["system"] == "daggerheart.attack"
    ]
    assert {ev["seq"] for ev in attacks} == ack_seqs, "exactly the acknowledged attacks are in the log"
    spends = [ev for ev in history if ev["kind"] == "resource" and ev["delta"] < 0]
    assert len(spends) == 12, spends
    assert {ev["cause"] for ev in spends} == ack_seqs, "each spend names the attack that caused it"
    for ev in spends:
        assert ev["name"] == "fear", ev
        assert ev["delta"] == -1, ev


async def test_two_resource_spends_race_for_the_last_fear(server: Server, room: Room, clients: Any) -> None:
    a = await clients.join(server.url, room.gm, "gm-a")
    b = await clients.join(server.url, room.gm, "gm-b")
    assert (await a.request({"t": "resource", "name": "fear", "op": "set", "n": 1}))["t"] == "ack"
    fa = {"t": "resource", "id": a.new_id("spend"), "name": "fear", "op": "spend", "n": 1}
    fb = {"t": "resource", "id": b.new_id("spend"), "name": "fear", "op": "spend", "n": 1}
    await asyncio.gather(a.send(fa), b.send(fb))
    answers = [await a.answer(fa["id"]), await b.answer(fb["id"])]
    assert sorted(x["t"] for x in answers) == ["ack", "error"], answers
    assert [x["code"] for x in answers if x["t"] == "error"] == ["insufficient"], answers
    after = await clients.join(server.url, room.spectator, "after")
    assert after.welcome["state"]["fear"] == 0


async def test_hope_is_given_by_the_gm_and_spent_by_its_owner(
    server: Server, room: Room, clients: Any
) -> None:
    gm = await clients.join(server.url, room.gm, "gm")
    p1 = await clients.join(server.url, room.player, "p1")
    await caught_up(gm, p1)  # the GM gives Hope to someone their own socket has seen arrive
    gain = await gm.request({"t": "resource", "name": "hope", "op": "gain", "n": 10, "participant": p1.id})
    assert gain["t"] == "ack", gain
    ev = await p1.event(gain["seq"])
    assert ev["kind"] == "resource", ev
    assert ev["participant"] == p1.id, ev
    assert ev["value"] == 6, "Hope stops at its cap of 6"
    spend = await p1.request({"t": "resource", "name": "hope", "op": "spend", "n": 2, "participant": p1.id})
    assert spend["t"] == "ack", spend
    ev = await gm.event(spend["seq"])
    assert ev["delta"] == -2, ev
    assert ev["value"] == 4, ev
    too_much = await p1.request(
        {"t": "resource", "name": "hope", "op": "spend", "n": 5, "participant": p1.id}
    )
    assert too_much["t"] == "error", too_much
    assert too_much["code"] == "insufficient", too_much
    state = (await clients.join(server.url, room.spectator, "spec")).welcome["state"]
    assert state["hope"][p1.id] == 4, state
