"""Members across a single node's stop and start (``Room.sweep``, ``relay.shell.upkeep.Upkeep.sweep_later``).

A stop stores no leaves and a kill cannot; after the start, the members the log still lists have
``rejoin_grace`` seconds to come back. Those who do store neither a leave nor a join (a deploy is not a wave
of everyone leaving and joining); each one still away then gets one leave. With a grace of 0 the leaves are
stored as the room loads, before its first welcome."""

from __future__ import annotations

import signal
from collections import Counter
from typing import Any

#: A hang guard for the waits below, not a bound on how soon anything happens.
GUARD = 60.0


def leaves_in(events: list[dict[str, Any]]) -> Counter[str]:
    return Counter(ev["member"]["id"] for ev in events if ev.get("kind") == "leave")


async def test_a_killed_single_node_lists_no_stale_members_after_its_restart(
    server_factory: Any, clients: Any, tmp_path: Any
) -> None:
    srv = server_factory(data=tmp_path / "data", secret="k" * 48, TABLERELAY_REJOIN_GRACE="0")
    room = await srv.acreate_room("Kill")
    gm = await clients.join(srv.url, room.gm, "gm")
    player = await clients.join(srv.url, room.player, "player")
    assert {gm.id, player.id} <= {m["id"] for m in player.welcome["state"]["members"]}
    srv.stop(signal.SIGKILL)
    srv.start()
    fresh = await clients.join(srv.url, room.spectator, "fresh")
    members = {m["id"] for m in fresh.welcome["state"]["members"]}
    assert members == {fresh.id}, f"stale members after a restart: {members - {fresh.id}}"
    assert leaves_in(fresh.welcome["history"]) == Counter({gm.id: 1, player.id: 1})
    # A second restart (a clean one) stores nothing more for them.
    await srv.astop(signal.SIGTERM)
    srv.start()
    again = await clients.join(srv.url, room.spectator, "again")
    leaves = leaves_in(again.welcome["history"])
    assert (leaves[gm.id], leaves[player.id]) == (1, 1), leaves


async def test_a_deploy_stores_no_leave_or_join_for_who_comes_back_and_one_leave_for_who_does_not(
    server_factory: Any, clients: Any, tmp_path: Any
) -> None:
    srv = server_factory(data=tmp_path / "data", secret="k" * 48, TABLERELAY_REJOIN_GRACE="3")
    room = await srv.acreate_room("Deploy")
    gm = await clients.join(srv.url, room.gm, "gm")
    player = await clients.join(srv.url, room.player, "player")
    away = await clients.join(srv.url, room.player, "away")
    ack = await gm.roll({"system": "drawsteel.power", "characteristic": 1}, "public", "before")
    before = ack["seq"]
    await srv.astop(signal.SIGTERM)
    srv.start()
    # The GM and one player come back; the other player does not.
    resumed = {}
    for who in (gm, player):
        resumed[who.id] = await clients.join(
            srv.url,
            who.welcome["session"],
            f"{who.label}-back",
            resume={"epoch": who.welcome["epoch"], "seq": before},
        )
        assert resumed[who.id].welcome["recovered"] is True
        kinds = [ev["kind"] for ev in resumed[who.id].welcome["history"]]
        assert not {"leave", "join"} & set(kinds), kinds
    assert {m["id"] for m in resumed[gm.id].welcome["state"]["members"]} == {gm.id, player.id, away.id}
    # After the grace, one leave: the player who stayed away; nothing for those who came back.
    gone = await resumed[gm.id].next("event", kind="leave", timeout=GUARD)
    assert gone["member"]["id"] == away.id
    await resumed[gm.id].roll({"system": "drawsteel.power", "characteristic": 1}, "public", "after")
    fresh = await clients.join(srv.url, room.spectator, "fresh")
    history = fresh.welcome["history"]
    assert leaves_in(history) == Counter({away.id: 1}), leaves_in(history)
    joins = Counter(ev["member"]["id"] for ev in history if ev.get("kind") == "join")
    assert joins == Counter({gm.id: 1, player.id: 1, away.id: 1, fresh.id: 1}), joins
    assert {m["id"] for m in fresh.welcome["state"]["members"]} == {gm.id, player.id, fresh.id}
    assert [line["leaves"] for line in srv.logged("members_swept")] == [1]
