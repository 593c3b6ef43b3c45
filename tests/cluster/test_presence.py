"""Members across relay nodes (relay.shell.cluster.presence): a killed node's participants are taken off every
member list within seconds, once each, by the survivors; a node restarted under its name clears up after
itself."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from tests.cluster.conftest import Nodes
from tests.cluster.natsd import NatsCluster
from tests.cluster.test_cluster import stored
from tests.e2e.wire import Client

#: Seconds a dead node's members may stay listed: its heartbeat key expires after 4 s, the janitor looks
#: every second, and this machine is shared.
WITHIN = 20.0


def member_ids(welcome: dict[str, Any]) -> set[str]:
    return {m["id"] for m in welcome["state"]["members"]}


async def left(client: Client, pids: set[str], timeout: float = WITHIN) -> float:
    """Seconds until ``client`` has seen a leave event for each of ``pids``."""
    start = time.monotonic()
    while True:
        gone = {ev["member"]["id"] for ev in client.events() if ev["kind"] == "leave"}
        if pids <= gone:
            return time.monotonic() - start
        assert time.monotonic() - start < timeout, f"no leave for {pids - gone} within {timeout}s"
        await asyncio.sleep(0.1)


def counted(records: list[dict[str, Any]], kind: str) -> Counter[str]:
    return Counter(r["member"]["id"] for r in records if r["kind"] == kind)


async def test_a_killed_nodes_members_leave_once_and_a_fresh_welcome_lists_only_the_living(
    nats: NatsCluster, nodes_factory: Any, clients: Any
) -> None:
    nodes: Nodes = nodes_factory(nats, 3)
    a, b, c = nodes.nodes
    room = await nodes.acreate_room("Presence")
    watcher = await clients.join(a.url, room.spectator, "watch-a")
    on_c = [await clients.join(c.url, room.player, f"p{i}-c") for i in range(2)]
    both = await clients.join(c.url, room.player, "both-c")
    # The same participant through node A too (its session token names it): it stays present.
    also = await clients.join(a.url, both.welcome["session"], "both-a")
    assert also.id == both.id
    survivor = await clients.join(b.url, room.player, "p-b")
    gone = {p.id for p in on_c}
    before = await nodes.nodes[1].aget("/healthz")
    assert before[0] == 200
    await asyncio.sleep(1.5)  # every node has published its sockets' participants

    c.kill()
    took = await left(watcher, gone)
    fresh = await clients.join(b.url, room.spectator, "fresh-b")
    members = member_ids(fresh.welcome)
    assert not gone & members, f"{gone & members} still listed {took:.1f}s after their node died"
    assert {watcher.id, both.id, survivor.id} <= members
    # The surviving participant's socket on A still works, and nobody else was taken off.
    ack = await also.roll({"system": "drawsteel.power", "characteristic": 1}, "public", "still here")
    await watcher.event(ack["seq"])
    await asyncio.sleep(2.5)  # both survivors have run their janitor passes since
    records = await stored(nats.store, room.id)
    leaves = counted(records, "leave")
    assert leaves == Counter(dict.fromkeys(gone, 1)), f"one leave per dead socket's member: {leaves}"
    lines = [line for line in nodes.log_lines if "presence_cleared" in line]
    assert len(lines) == 1, lines


async def test_a_node_restarted_under_its_name_clears_its_previous_runs_members(
    nats: NatsCluster, nodes_factory: Any, clients: Any
) -> None:
    nodes: Nodes = nodes_factory(nats, 2)
    a, b = nodes.nodes
    room = await nodes.acreate_room("Restart")
    watcher = await clients.join(a.url, room.spectator, "watch-a")
    player = await clients.join(b.url, room.player, "p-b")
    await asyncio.sleep(1.5)
    b.kill()
    again = nodes.restart(1)
    await left(watcher, {player.id})
    # Back through the restarted node: present again, once.
    back = await clients.join(again.url, player.welcome["session"], "p-back")
    assert back.id == player.id
    assert player.id in member_ids(back.welcome)
    await asyncio.sleep(2.5)
    fresh = await clients.join(a.url, room.spectator, "fresh-a")
    assert player.id in member_ids(fresh.welcome)
    records = await stored(nats.store, room.id)
    assert counted(records, "leave")[player.id] == 1
    assert counted(records, "join")[player.id] == 2
