"""A single node killed outright stores no leaves; restarted, it takes its dead sockets' members off the list
(``Room.sweep`` when the room loads) before the first welcome, once each."""

from __future__ import annotations

import signal
from collections import Counter
from typing import Any


async def test_a_killed_single_node_lists_no_stale_members_after_its_restart(
    server_factory: Any, clients: Any, tmp_path: Any
) -> None:
    srv = server_factory(data=tmp_path / "data", secret="k" * 48)
    room = await srv.acreate_room("Kill")
    gm = await clients.join(srv.url, room.gm, "gm")
    player = await clients.join(srv.url, room.player, "player")
    assert {gm.id, player.id} <= {m["id"] for m in player.welcome["state"]["members"]}
    srv.stop(signal.SIGKILL)
    srv.start()
    fresh = await clients.join(srv.url, room.spectator, "fresh")
    members = {m["id"] for m in fresh.welcome["state"]["members"]}
    assert members == {fresh.id}, f"stale members after a restart: {members - {fresh.id}}"
    leaves = Counter(ev["member"]["id"] for ev in fresh.welcome["history"] if ev.get("kind") == "leave")
    assert leaves == Counter({gm.id: 1, player.id: 1}), leaves
    # A second restart (a clean one) stores nothing more for them.
    await srv.astop(signal.SIGTERM)
    srv.start()
    again = await clients.join(srv.url, room.spectator, "again")
    leaves = Counter(ev["member"]["id"] for ev in again.welcome["history"] if ev.get("kind") == "leave")
    assert (leaves[gm.id], leaves[player.id]) == (1, 1), leaves
