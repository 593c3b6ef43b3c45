"""Members across relay nodes (relay.shell.cluster.presence): a killed node's participants are taken off every
member list within seconds, once each, by the survivors; a node restarted under its name clears up after
itself."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import nats.js.errors
from nats.js.kv import KeyValue

from relay.shell.cluster.presence import NODES_BUCKET, PRESENCE_BUCKET
from relay.storage.nats.log import NatsLog
from tests.cluster.conftest import Nodes
from tests.cluster.natsd import NatsCluster
from tests.cluster.test_cluster import stored
from tests.e2e.wire import Client

#: A hang guard for each wait below, not a bound on how soon anything happens (a dead node's key expires
#: after 4 s and the janitor looks every second; this machine is shared): what is asserted is what
#: happened and in which order, never how long it took.
GUARD = 60.0


def member_ids(welcome: dict[str, Any]) -> set[str]:
    return {m["id"] for m in welcome["state"]["members"]}


async def left(client: Client, pids: set[str]) -> None:
    """Until ``client`` has received a leave event for each of ``pids``."""
    for pid in pids:

        def leaves(frame: dict[str, Any], pid: str = pid) -> bool:
            return bool(frame["member"]["id"] == pid)

        await client.next("event", kind="leave", where=leaves, timeout=GUARD)


class Buckets:
    """The presence and heartbeat buckets as the nodes write them, read with the store's own connection."""

    def __init__(self, log: NatsLog, board: KeyValue, nodes: KeyValue) -> None:
        self.log, self.board, self.nodes = log, board, nodes

    @classmethod
    async def open(cls, store: str) -> Buckets:
        log = await NatsLog.connect(store, follow=False)
        return cls(log, await log.js.key_value(PRESENCE_BUCKET), await log.js.key_value(NODES_BUCKET))

    async def close(self) -> None:
        await self.log.close()

    async def _entries(self, kv: KeyValue) -> dict[str, Any]:
        try:
            keys = await kv.keys()
        except nats.js.errors.NoKeysError:
            return {}
        out = {}
        for key in keys:
            with contextlib.suppress(nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
                out[key] = await kv.get(key)
        return out

    async def listed(self) -> dict[str, set[str]]:
        """Each presence key (a node run and room) with the participants it lists."""
        return {k: set(json.loads(e.value or b"[]")) for k, e in (await self._entries(self.board)).items()}

    async def passes(self) -> dict[str, int]:
        """Each live run's clear-up passes finished so far (its heartbeat's value)."""
        return {k: int(e.value or b"0") for k, e in (await self._entries(self.nodes)).items()}

    async def until(self, condition: Callable[[], Awaitable[bool]], what: str) -> None:
        """Read ``condition`` again every half second until it holds (GUARD against a hang)."""
        for _ in range(int(GUARD * 2)):
            if await condition():
                return
            await asyncio.sleep(0.5)
        raise AssertionError(f"never: {what}")

    async def passes_after_now(self) -> None:
        """Until every live run has begun a clear-up pass after this call and finished it: its count of
        passes two more."""
        now = await self.passes()

        async def done() -> bool:
            later = await self.passes()
            return all(later.get(run, 0) >= beat + 2 for run, beat in now.items() if run in later)

        await self.until(done, "every live node ran a pass of its loop")


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
    buckets = await Buckets.open(nats.store)
    try:

        async def published() -> bool:
            listed = await buckets.listed()
            keys_of = Counter(pid for pids in listed.values() for pid in pids)
            return all(keys_of[pid] >= 1 for pid in gone | {survivor.id}) and keys_of[both.id] >= 2

        # Every node has published its sockets' participants (the two-tab participant by A and C both).
        await buckets.until(published, "every socket's participant listed by its node")

        c.kill()
        await left(watcher, gone)
        fresh = await clients.join(b.url, room.spectator, "fresh-b")
        members = member_ids(fresh.welcome)
        assert not gone & members, f"{gone & members} still listed after their node died and they left"
        assert {watcher.id, both.id, survivor.id} <= members
        # The surviving participant's socket on A still works, and nobody else was taken off.
        ack = await also.roll({"system": "drawsteel.power", "characteristic": 1}, "public", "still here")
        await watcher.event(ack["seq"])

        async def cleared() -> bool:
            return not any(gone & pids for pids in (await buckets.listed()).values())

        # The janitor removes the dead run's keys once their leaves are stored; both survivors then run a
        # whole pass of their own, which could store a second leave if anything did.
        await buckets.until(cleared, "the dead node's keys removed")
        await buckets.passes_after_now()
    finally:
        await buckets.close()
    records = await stored(nats.store, room.id)
    leaves = counted(records, "leave")
    assert leaves == Counter(dict.fromkeys(gone, 1)), f"one leave per dead socket's member: {leaves}"
    # This room's only: a node named as one of an earlier test's (the NATS servers serve every test of a
    # worker) clears that run's keys, in that test's rooms, as it starts.
    lines = [line for line in nodes.log_lines if "presence_cleared" in line and room.id in line]
    # On a failure, what each node saw: the runs it missed and took for dead, and its failed puts.
    seen = [line for line in nodes.log_lines if '"presence_' in line and "presence_cleared" not in line]
    assert len(lines) == 1, (lines, seen)


async def test_a_node_restarted_under_its_name_clears_its_previous_runs_members(
    nats: NatsCluster, nodes_factory: Any, clients: Any
) -> None:
    nodes: Nodes = nodes_factory(nats, 2)
    a, b = nodes.nodes
    room = await nodes.acreate_room("Restart")
    watcher = await clients.join(a.url, room.spectator, "watch-a")
    player = await clients.join(b.url, room.player, "p-b")
    buckets = await Buckets.open(nats.store)
    try:

        async def published() -> bool:
            return any(player.id in pids for pids in (await buckets.listed()).values())

        await buckets.until(published, "the player listed by B")
        b.kill()
        again = nodes.restart(1)
        await left(watcher, {player.id})
        # Back through the restarted node: present again, once.
        back = await clients.join(again.url, player.welcome["session"], "p-back")
        assert back.id == player.id
        assert player.id in member_ids(back.welcome)
        # Both nodes run a whole pass after the player is back: a leave they would wrongly store for it
        # (the previous run's key) would be stored by then.
        await buckets.passes_after_now()
    finally:
        await buckets.close()
    fresh = await clients.join(a.url, room.spectator, "fresh-a")
    assert player.id in member_ids(fresh.welcome)
    records = await stored(nats.store, room.id)
    assert counted(records, "leave")[player.id] == 1
    assert counted(records, "join")[player.id] == 2
