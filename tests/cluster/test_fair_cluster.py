"""Witnessed rolls across relay nodes (spec/fairness.md, spec/cluster.md), real nodes on a real NATS cluster:
a witness's value stored through a node that does not hold the roll is kept in the shared store, and when
the node that made the pending dies, another node makes its roll from the store, once, with that value;
the roller's retry through the other node gets that roll's seq; both verifiers call it fair.

No timed assertions: the checks are on what was stored and in which order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from relay.fairness import verify_fair
from tests import spec_fairness
from tests.cluster.conftest import Nodes
from tests.cluster.natsd import NatsCluster
from tests.cluster.test_cluster import stored
from tests.e2e.servers import Server
from tests.e2e.test_fair_dice import DICE, FAIR, witness_client


async def seen(node: Server, room_id: str, witnesses: int) -> None:
    """Wait until ``node`` has heard of ``witnesses`` witnesses of the room on the other node (as ``alogged``
    waits for a line: the publication travels through NATS)."""
    for _ in range(400):
        if any(r.get("count") == witnesses for r in node.logged("witnesses_seen", room_id)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"node never heard of {witnesses} witnesses:\n{node.log_text()[-3000:]}")


def roll_frame(rid: str) -> dict[str, Any]:
    return {"t": "roll", "id": rid, "intent": DICE, "visibility": "public", "seed": bytes(16)}


async def test_a_pending_made_on_one_node_is_completed_by_another_when_the_first_dies(
    nats: NatsCluster, nodes_factory: Callable[..., Nodes], clients: Any
) -> None:
    nodes = nodes_factory(nats, **FAIR, TABLERELAY_WITNESS_WAIT_MS="3000")
    a, b = nodes.nodes
    room = await nodes.acreate_room("A node dies mid-roll")
    gm = await clients.join(a.url, room.gm, "gm-a")
    # A roll asks the witnesses connected to the node that takes it; ana is on A, and on B with a second
    # socket (her session token: the same participant), through which she answers.
    ana_a = await witness_client(clients, a, room.player, "ana-a")
    ana = await witness_client(clients, b, ana_a.welcome["session"], "ana-b")
    assert ana.id == ana_a.id
    await witness_client(clients, a, room.player, "bo-a")  # asked, never answers
    watch = await clients.join(b.url, room.spectator, "watch-b")
    await gm.send(roll_frame("g1"))
    pending = await ana.next("event", kind="pending")
    assert pending["roller"] == gm.id
    answer = await ana.request({"t": "witness", "id": "w1", "pending": pending["seq"], "value": b"a" * 16})
    assert answer == {"t": "ack", "id": "w1", "seq": pending["seq"]}, (
        "stored through B, which does not hold it"
    )
    await asyncio.to_thread(a.kill)  # node A, which holds the roll in memory, dies (SIGKILL)

    made = await watch.next("event", kind="roll", timeout=30)
    assert made["fair"]["pending"] == pending["seq"]
    assert made["fair"]["witnesses"] == [[ana.id, b"a" * 16]], "the value stored through B"
    gm = await clients.join(b.url, room.gm, "gm-b")
    again = await gm.request(roll_frame("g1"))
    assert again == {"t": "ack", "id": "g1", "seq": made["seq"]}, "the roller's retry is that roll"
    assert (await gm.request({"t": "seed", "id": "s1", "op": "reveal"}))["t"] == "ack"
    await gm.ping()

    records = await stored(nats.store, room.id)
    naming = [r["seq"] for r in records if r["kind"] == "roll" and r["fair"]["pending"] == pending["seq"]]
    assert naming == [made["seq"]], "exactly one roll names the pending"
    assert [r["kind"] for r in records].count("roll") == 1
    assert verify_fair(records, room.id)[made["seq"]].verdict == "fair"
    assert spec_fairness.verdicts(records, room.id)[made["seq"]] == "fair"
    assert made["fair"]["nonce"].hex() not in b.log_text(), "no nonce in a log line"


async def test_the_node_holding_a_roll_merges_a_value_stored_through_another_and_the_roll_is_made_once(
    nats: NatsCluster, nodes_factory: Callable[..., Nodes], clients: Any
) -> None:
    nodes = nodes_factory(nats, **FAIR, TABLERELAY_WITNESS_WAIT_MS="2000")
    a, b = nodes.nodes
    room = await nodes.acreate_room("Two live nodes")
    gm = await clients.join(a.url, room.gm, "gm-a")
    ana_a = await witness_client(clients, a, room.player, "ana-a")
    ana = await witness_client(clients, b, ana_a.welcome["session"], "ana-b")
    bo = await witness_client(clients, a, room.player, "bo-a")
    watch = await clients.join(b.url, room.spectator, "watch-b")
    await gm.send(roll_frame("g1"))
    pending = await ana.next("event", kind="pending")
    answer = await ana.request({"t": "witness", "id": "w1", "pending": pending["seq"], "value": b"a" * 16})
    assert answer["t"] == "ack", answer
    twice = await ana_a.request({"t": "witness", "id": "w2", "pending": pending["seq"], "value": b"c" * 16})
    assert twice["t"] == "error", "one value per witness, whichever node it reaches"
    assert twice["code"] == "conflict", twice
    made = await gm.answer("g1", timeout=30)
    assert made["t"] == "ack", made
    event = await watch.event(made["seq"])
    assert event["fair"]["witnesses"] == [[ana.id, b"a" * 16]], "node A merged the value stored through B"
    # A value after the roll is refused; the retry through B is that roll; B rolls nothing of its own.
    late = await bo.request({"t": "witness", "id": "late", "pending": pending["seq"], "value": b"b" * 16})
    assert late["t"] == "error", late
    again = await clients.join(b.url, room.gm, "gm-b")
    assert (await again.request(roll_frame("g1"))) == {"t": "ack", "id": "g1", "seq": made["seq"]}
    extra = await again.request({"t": "roll", "id": "g2", "intent": DICE, "visibility": "public"})
    assert extra["t"] == "ack", extra
    records = await stored(nats.store, room.id)
    assert [r["seq"] for r in records if r["kind"] == "roll" and r["fair"]["pending"] == pending["seq"]] == [
        made["seq"]
    ]


async def test_a_witness_on_another_node_is_asked_and_answers_through_it(
    nats: NatsCluster, nodes_factory: Callable[..., Nodes], clients: Any
) -> None:
    nodes = nodes_factory(nats, **FAIR, TABLERELAY_WITNESS_WAIT_MS="2000")
    a, b = nodes.nodes
    room = await nodes.acreate_room("Witness elsewhere")
    gm = await clients.join(a.url, room.gm, "gm-a")
    ana = await witness_client(clients, b, room.player, "ana-b")  # only on node B
    await a.alogged("witnesses_seen", room.id)  # node A has heard that B holds a witness of the room
    await gm.send(roll_frame("g1"))
    pending = await ana.next("event", kind="pending")
    assert pending["asked"] == [ana.id], "asked by node A though her socket is on node B"
    answer = await ana.request({"t": "witness", "id": "w1", "pending": pending["seq"], "value": b"a" * 16})
    assert answer["t"] == "ack", answer
    made = await gm.answer("g1", timeout=30)
    assert made["t"] == "ack", made
    event = await gm.event(made["seq"])
    assert event["fair"]["witnesses"] == [[ana.id, b"a" * 16]]
    assert (await gm.request({"t": "seed", "id": "s1", "op": "reveal"}))["t"] == "ack"
    await gm.ping()
    records = await stored(nats.store, room.id)
    assert verify_fair(records, room.id)[made["seq"]].verdict == "fair"
    assert spec_fairness.verdicts(records, room.id)[made["seq"]] == "fair"


async def test_a_roll_is_made_once_every_witness_has_answered_through_another_node(
    nats: NatsCluster, nodes_factory: Callable[..., Nodes], clients: Any
) -> None:
    """With a wait far longer than any test, the roll is made only because every value stored through node
    B reached node A, which holds the roll."""
    nodes = nodes_factory(nats, **FAIR, TABLERELAY_WITNESS_WAIT_MS="600000")
    a, b = nodes.nodes
    room = await nodes.acreate_room("Everyone elsewhere")
    gm = await clients.join(a.url, room.gm, "gm-a")
    ana = await witness_client(clients, b, room.player, "ana-b")
    bo = await witness_client(clients, b, room.player, "bo-b")
    await seen(a, room.id, 2)
    # Node A asks only members its room's state holds: the players' joins come through the log, apart from
    # the witness board, so A has them once its GM has seen the last (seq 3: the GM's, Ana's, Bo's joins).
    await gm.event(3)
    await gm.send(roll_frame("g1"))
    pending = await ana.next("event", kind="pending")
    assert pending["asked"] == sorted([ana.id, bo.id])
    for client, value in ((ana, b"a" * 16), (bo, b"b" * 16)):
        answer = await client.request({"t": "witness", "pending": pending["seq"], "value": value})
        assert answer["t"] == "ack", answer
    made = await gm.answer("g1")
    assert made["t"] == "ack", made
    event = await gm.event(made["seq"])
    assert event["fair"]["witnesses"] == sorted([[ana.id, b"a" * 16], [bo.id, b"b" * 16]])


async def test_the_fear_a_pending_holds_on_one_node_is_not_spent_through_another(
    nats: NatsCluster, nodes_factory: Callable[..., Nodes], clients: Any
) -> None:
    """docs/fairness.md, "A witnessed roll holds what it will spend": node B folds the hold from the log."""
    nodes = nodes_factory(nats, **FAIR, TABLERELAY_WITNESS_WAIT_MS="600000")
    a, b = nodes.nodes
    room = await nodes.acreate_room("Held across nodes")
    gm = await clients.join(a.url, room.gm, "gm-a")
    ana = await witness_client(clients, a, room.player, "ana-a")
    gm_b = await clients.join(b.url, room.gm, "gm-b")
    assert (await gm.request({"t": "resource", "name": "fear", "op": "set", "n": 1}))["t"] == "ack"
    attack = {"system": "daggerheart.attack", "modifier": 1, "experience": 2, "spend_fear": True}
    await gm.send({"t": "roll", "id": "atk", "intent": attack, "visibility": "public"})
    pending = await gm_b.next("event", kind="pending")  # node B has folded it
    assert pending["holds"] == {"fear": 1}, pending
    spend = await gm_b.request({"t": "resource", "name": "fear", "op": "spend", "n": 1})
    assert (spend["t"], spend.get("code")) == ("error", "insufficient"), spend
    answer = await ana.request({"t": "witness", "pending": pending["seq"], "value": b"a" * 16})
    assert answer["t"] == "ack", answer
    made = await gm.answer("atk")
    assert made["t"] == "ack", made
    spent = await gm_b.next("event", kind="resource", where=lambda f: f.get("cause") == made["seq"])
    assert (spent["delta"], spent["value"]) == (-1, 0), "the roll spent it, once"
    records = await stored(nats.store, room.id)
    assert [r["delta"] for r in records if r["kind"] == "resource" and r["delta"] < 0] == [-1]
