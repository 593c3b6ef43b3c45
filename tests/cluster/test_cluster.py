"""Several relay nodes on one NATS JetStream cluster (spec/cluster.md), with real processes only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import pytest

from relay.storage.nats.log import NatsLog
from relay.storage.nats.stream import STREAM
from relay.trust import signing
from tests.cluster.conftest import Nodes
from tests.cluster.natsd import NatsCluster, running_cluster
from tests.e2e.servers import Room
from tests.e2e.wire import Client, without_sig

POWER = {"system": "drawsteel.power", "characteristic": 1}
SPEND = {"t": "resource", "name": "fear", "op": "spend", "n": 1}


def seqs_of(client: Client) -> list[int]:
    return [int(ev["seq"]) for ev in client.events()]


async def stored(store: str, room: str) -> list[dict[str, Any]]:
    """Every record of ``room`` as the stream holds it, read with the store's own reader."""
    log = await NatsLog.connect(store, follow=False)
    try:
        return await log.read(room, 0, 100_000)
    finally:
        await log.close()


async def test_clients_on_different_nodes_see_one_ordered_stream(
    server: Nodes, room: Room, clients: Any
) -> None:
    a, b = server.nodes
    gm = await clients.join(a.url, room.gm, "gm-a")
    p1 = await clients.join(b.url, room.player, "p1-b")
    p2 = await clients.join(a.url, room.player, "p2-a")
    watch_a = await clients.join(a.url, room.spectator, "watch-a")
    watch_b = await clients.join(b.url, room.spectator, "watch-b")

    async def play(client: Client, n: int) -> list[int]:
        return [(await client.roll(POWER, "public", f"{client.label} {i}"))["seq"] for i in range(n)]

    done = await asyncio.gather(play(gm, 15), play(p1, 15), play(p2, 15))
    acked = sorted(s for seqs in done for s in seqs)
    assert len(set(acked)) == 45, "no two rolls got the same seq"
    top = acked[-1]
    for watcher in (watch_a, watch_b, gm, p1, p2):
        await watcher.event(top)
    for watcher in (watch_a, watch_b):
        first = watcher.welcome["seq"] + 1
        assert seqs_of(watcher) == list(range(first, top + 1)), f"{watcher.label}: dense, ordered, once each"
    # The same events whichever node delivered them, each node's signature good (each node signs what it
    # sends, with nonces of its own: docs/verification.md).
    keys = watch_a.welcome["keys"]
    assert [without_sig(ev) for ev in watch_a.events()[1:]] == [without_sig(ev) for ev in watch_b.events()]
    for ev in (*watch_a.events(), *watch_b.events()):
        assert signing.verify(ev, room.id, keys), ev
    records = await stored(server.nats.store, room.id)
    assert [r["seq"] for r in records] == list(range(1, top + 1))
    # The command line sees the same store while the nodes run.
    listed = json.loads((await asyncio.to_thread(server.cli, "room", "list", "--json")).stdout)
    assert {"id": room.id, "events": top} in [{"id": r["id"], "events": r["events"]} for r in listed]


async def test_fear_spends_split_over_two_nodes_succeed_exactly_as_often_as_there_was_fear(
    server: Nodes, room: Room, clients: Any
) -> None:
    a, b = server.nodes
    gm_a = await clients.join(a.url, room.gm, "gm-a")
    gm_b = await clients.join(b.url, room.gm, "gm-b")
    watcher = await clients.join(a.url, room.spectator, "watch")
    ack = await gm_a.request({"t": "resource", "name": "fear", "op": "set", "n": 12})
    assert ack["t"] == "ack", ack
    await gm_b.event(ack["seq"])

    ids_a = [gm_a.new_id("spend") for _ in range(25)]
    ids_b = [gm_b.new_id("spend") for _ in range(25)]
    # Every frame on the wire before any answer: the two nodes race for the same Fear.
    await asyncio.gather(
        *(gm_a.send({**SPEND, "id": rid}) for rid in ids_a),
        *(gm_b.send({**SPEND, "id": rid}) for rid in ids_b),
    )
    answers = await asyncio.gather(
        *(gm_a.answer(rid, timeout=30) for rid in ids_a), *(gm_b.answer(rid, timeout=30) for rid in ids_b)
    )
    acks = [x for x in answers if x["t"] == "ack"]
    errors = [x for x in answers if x["t"] == "error"]
    assert len(acks) == 12, answers
    assert {e["code"] for e in errors} == {"insufficient"}, errors
    assert len({x["seq"] for x in acks}) == 12
    top = max(x["seq"] for x in acks)
    await watcher.event(top)
    spends = [ev for ev in watcher.events() if ev["kind"] == "resource" and ev["delta"] == -1]
    assert [ev["value"] for ev in spends] == list(range(11, -1, -1)), "Fear went 12 -> 0, one at a time"
    late = await clients.join(b.url, room.spectator, "late")
    assert late.welcome["state"]["fear"] == 0


async def test_a_roll_id_retried_on_the_other_node_returns_the_first_ack(
    server: Nodes, room: Room, clients: Any
) -> None:
    a, b = server.nodes
    watcher = await clients.join(a.url, room.spectator, "watch")
    player = await clients.join(a.url, room.player, "p-a")
    rid = player.new_id("retry")
    first = await player.roll(POWER, "public", "once", request_id=rid)
    await watcher.event(first["seq"])
    session = player.welcome["session"]
    await player.close()
    again = await clients.join(b.url, session, "p-b")
    assert again.id == player.id
    second = await again.roll(POWER, "public", "once", request_id=rid)
    assert second["seq"] == first["seq"], "the other node answered with the first roll's ack"
    fence = await again.roll(POWER, "public", "fence")
    await watcher.event(fence["seq"])
    labelled = [ev["seq"] for ev in watcher.events() if ev.get("label") == "once"]
    assert labelled == [first["seq"]], "rolled once"


async def test_a_room_unloaded_on_one_node_is_let_go_there_while_another_node_serves_it(
    nats: NatsCluster, nodes_factory: Any, clients: Any
) -> None:
    # Node a unloads the room once nobody is in it there (1 s idle); node b goes on serving it. Node a must
    # stop folding the room's events (its events counter shows what it folds), then load it again on the
    # next hello with everything stored meanwhile.
    server = nodes_factory(nats, TABLERELAY_ROOM_IDLE="1")
    a, b = server.nodes
    room = await server.acreate_room("Unloaded on one node")
    visitor = await clients.join(a.url, room.player, "visitor-a")
    player = await clients.join(b.url, room.player, "p-b")
    await visitor.roll(POWER, "public", "while both hold it")
    await visitor.close()
    await a.alogged("room_unloaded", room.id, timeout=15)  # node a unloads the idle room
    folded = await events_counted(a)
    last = 0
    for i in range(5):
        last = (await player.roll(POWER, "public", f"only b holds it {i}"))["seq"]
    await asyncio.sleep(0.5)
    assert await events_counted(a) == folded, "node a folded events of a room it had unloaded"
    back = await clients.join(a.url, room.spectator, "back-a")
    assert back.welcome["seq"] >= last, "loaded again with what was stored meanwhile"
    after = await player.roll(POWER, "public", "both hold it again")
    await back.event(after["seq"])
    assert len(await a.alogged("room_loaded", room.id, count=2)) == 2


async def events_counted(node: Any) -> float:
    """The node's tablerelay_events_total, all kinds together."""
    _, _, text = await node.aget("/metrics")
    lines = [line for line in text.splitlines() if line.startswith("tablerelay_events_total")]
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines)


async def stream_leader(store: str) -> str:
    log = await NatsLog.connect(store, follow=False)
    try:
        info = await log.js.stream_info(STREAM)
        assert info.cluster is not None
        assert info.cluster.leader
        return str(info.cluster.leader)
    finally:
        await log.close()


async def roll_until(client: Client, stop: asyncio.Event, acked: dict[str, int], errors: list[str]) -> None:
    """Roll one at a time; an error is retried with the same id (as a client does) until acknowledged."""
    while not stop.is_set():
        rid = client.new_id("burst")
        while True:
            reply = await client.request(
                {"t": "roll", "id": rid, "intent": POWER, "visibility": "public", "label": rid}, timeout=30
            )
            if reply["t"] == "ack":
                acked[rid] = int(reply["seq"])
                break
            errors.append(reply["code"])
            await asyncio.sleep(0.05)


@pytest.fixture
def own_cluster(tmp_path: Any) -> Any:
    with running_cluster(tmp_path / "nats") as cluster:
        yield cluster


async def test_killing_the_stream_leader_loses_no_acknowledged_roll(
    own_cluster: NatsCluster, nodes_factory: Any, clients: Any
) -> None:
    nodes = nodes_factory(own_cluster, TABLERELAY_RATE="1000", TABLERELAY_BURST="1000")
    a, b = nodes.nodes
    room = await nodes.acreate_room("Failover")
    rollers = [
        await clients.join(node.url, room.player, f"p{i}-{j}")
        for i, node in enumerate((a, b))
        for j in range(2)
    ]
    watcher = await clients.join(b.url, room.spectator, "watch")
    leader = await stream_leader(own_cluster.store)
    stop = asyncio.Event()
    acked: dict[str, int] = {}
    errors: list[str] = []
    burst = [asyncio.create_task(roll_until(c, stop, acked, errors)) for c in rollers]
    await asyncio.sleep(1.5)
    before = len(acked)
    own_cluster.by_name(leader).kill()
    killed_at = time.monotonic()
    while len(acked) < before + 40 and time.monotonic() - killed_at < 40:
        await asyncio.sleep(0.1)
    stop.set()
    await asyncio.gather(*burst)
    assert len(acked) >= before + 40, (
        f"rolls stopped after the leader died: {len(acked)} acked, errors {errors}"
    )
    assert set(errors) <= {"internal"}, errors

    new_leader = await stream_leader(own_cluster.store)
    assert new_leader != leader
    records = await stored(own_cluster.store, room.id)
    seqs = [r["seq"] for r in records]
    assert seqs == list(range(1, len(seqs) + 1)), "dense seqs"
    by_request = {r["request"]: r["seq"] for r in records if r["kind"] == "roll"}
    for rid, seq in acked.items():
        assert by_request.get(rid) == seq, f"acknowledged roll {rid} at {seq} is not stored there"
    assert len([r for r in records if r["kind"] == "roll"]) == len(by_request), "no roll stored twice"

    # A client resumes after all this with exactly the gap.
    top = max(acked.values())
    await watcher.event(top, timeout=30)
    mark = seqs_of(watcher)[len(seqs_of(watcher)) // 2]
    back = await clients.join(
        a.url, room.spectator, "watch-back", resume={"epoch": watcher.welcome["epoch"], "seq": mark}
    )
    history = [ev["seq"] for ev in back.welcome["history"]]
    assert back.welcome["recovered"] is True
    assert history == list(range(mark + 1, back.welcome["seq"] + 1))


async def test_killing_a_relay_node_its_clients_resume_on_another_with_exactly_the_gap(
    nats: NatsCluster, nodes_factory: Any, clients: Any
) -> None:
    nodes = nodes_factory(nats)
    a, b = nodes.nodes
    room = await nodes.acreate_room("Node loss")
    roller = await clients.join(a.url, room.gm, "gm-a")
    watcher = await clients.join(b.url, room.spectator, "watch-b")
    for i in range(5):
        ack = await roller.roll(POWER, "public", f"before {i}")
    await watcher.event(ack["seq"])
    seen = max(seqs_of(watcher))
    b.kill()
    code, _ = await watcher.wait_closed()
    assert code in (None, 1006), code
    missed = [(await roller.roll(POWER, "public", f"missed {i}"))["seq"] for i in range(7)]
    back = await clients.join(
        a.url, room.spectator, "watch-back", resume={"epoch": watcher.welcome["epoch"], "seq": seen}
    )
    assert back.welcome["recovered"] is True
    history = [ev["seq"] for ev in back.welcome["history"]]
    assert history == list(range(seen + 1, back.welcome["seq"] + 1))
    assert set(missed) <= set(history)
    live = await roller.roll(POWER, "public", "after")
    await back.event(live["seq"])
    assert seqs_of(back) == [live["seq"]]


async def test_a_node_without_the_shared_keys_refuses_to_start(nats: NatsCluster, tmp_path: Any) -> None:
    import subprocess

    from tests.console import tablerelay_bin
    from tests.e2e.servers import server_env

    env = server_env("s" * 32, {"TABLERELAY_STORE": nats.store})
    proc = await asyncio.to_thread(
        subprocess.run,
        [tablerelay_bin(), "serve", "--port", "0", "--data", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "TABLERELAY_SIGNING_KEY" in lines[0]
    assert "Traceback" not in proc.stderr


async def test_the_stream_and_bucket_are_made_once_with_three_replicas(
    nats: NatsCluster, server: Nodes
) -> None:
    log = await NatsLog.connect(nats.store, follow=False)
    try:
        info = await log.js.stream_info(STREAM)
        assert info.config.num_replicas == 3
        kv = await log.js.stream_info("KV_tablerelay_rooms")
        assert kv.config.num_replicas == 3
        assert log.replicas == 3
    finally:
        with contextlib.suppress(Exception):
            await log.close()
