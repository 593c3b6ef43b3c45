"""A witnessed roll holds what it will spend (docs/fairness.md, "How it runs"; spec/fairness.md: "Every
`pending` is followed by exactly one roll naming it"), on a real server process: a GM's attack paid with the
last Fear is announced with ``holds``; while its witness delays, a spend of that Fear (a resource frame, a
second attack) is refused ``insufficient`` and nothing of it is stored; the roll is then made and spends the
Fear once. An attack that cannot be paid is refused at once, before any pending is stored. The hold is folded
from the log, so it outlives a SIGKILL and a restart.

No timed assertions: each roll waits for a witness that answers when the test says, never for its timer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from relay.fairness import verify_fair
from tests import spec_fairness
from tests.e2e.servers import Room, Server
from tests.e2e.test_fair_dice import FAIR, witness_client
from tests.e2e.test_fair_recovery import stored_events
from tests.e2e.test_fear import ATTACK
from tests.e2e.wire import Client

#: The roll waits for its witnesses until they answer: the test decides when, the timer never does.
LONG_WAIT = {**FAIR, "TABLERELAY_WITNESS_WAIT_MS": "600000"}


async def fair_table(server_factory: Any, clients: Any, name: str) -> tuple[Server, Room, Client, Client]:
    """A relay whose witnessed rolls wait for their witnesses, a room on it, its GM, and a witness (Ana)."""
    server: Server = server_factory(**LONG_WAIT)
    room = await server.acreate_room(name)
    gm = await clients.join(server.url, room.gm, "gm")
    ana = await witness_client(clients, server, room.player, "ana")
    return server, room, gm, ana


def attack(rid: str) -> dict[str, Any]:
    return {"t": "roll", "id": rid, "intent": ATTACK, "visibility": "public"}


def spend_fear(rid: str) -> dict[str, Any]:
    return {"t": "resource", "id": rid, "name": "fear", "op": "spend", "n": 1}


async def set_fear(gm: Client, n: int) -> None:
    reply = await gm.request({"t": "resource", "name": "fear", "op": "set", "n": n})
    assert reply["t"] == "ack", reply


def refused_for_want_of_fear(reply: dict[str, Any]) -> None:
    assert reply["t"] == "error", reply
    assert reply["code"] == "insufficient", reply
    assert "Fear" in reply["message"], reply


async def fear_now(server: Server, token: str, clients: Any) -> int:
    """The room's Fear as a fresh welcome shows it: what is stored, held or not."""
    watcher = await clients.join(server.url, token, "watcher")
    fear = watcher.welcome["state"]["fear"]
    await watcher.close()
    return int(fear)


async def test_a_witnessed_roll_holds_the_last_fear_until_its_roll_spends_it(
    server_factory: Any, clients: Any, tmp_path: Path
) -> None:
    server, room, gm, ana = await fair_table(server_factory, clients, "Held Fear")
    other_gm = await clients.join(server.url, room.gm, "gm-tab")
    await set_fear(gm, 1)
    await gm.send(attack("atk1"))
    pending = await ana.next("event", kind="pending")
    assert pending["holds"] == {"fear": 1}, pending

    refused_for_want_of_fear(await other_gm.request(spend_fear("spend")))
    refused_for_want_of_fear(await other_gm.request(attack("atk2")))
    refused_for_want_of_fear(await gm.request({"t": "resource", "name": "fear", "op": "set", "n": 0}))
    assert await fear_now(server, room.spectator, clients) == 1, "held, not spent: the welcome shows 1"

    answer = await ana.request({"t": "witness", "id": "w", "pending": pending["seq"], "value": b"a" * 16})
    assert answer == {"t": "ack", "id": "w", "seq": pending["seq"]}
    made = await gm.answer("atk1")
    assert made["t"] == "ack", made
    spent = await gm.next("event", kind="resource", where=lambda f: f.get("cause") == made["seq"])
    assert (spent["name"], spent["delta"], spent["value"]) == ("fear", -1, 0), spent
    assert await fear_now(server, room.spectator, clients) == 0, "spent once, by the roll"
    refused_for_want_of_fear(await other_gm.request(spend_fear("spend-after")))
    assert (await gm.request({"t": "resource", "name": "fear", "op": "gain", "n": 1}))["t"] == "ack"
    assert (await other_gm.request(spend_fear("spend-freed")))["t"] == "ack", "nothing held any more"

    assert (await gm.request({"t": "seed", "id": "s1", "op": "reveal"}))["t"] == "ack"
    await gm.ping()
    events = await stored_events(server, room.id, tmp_path / "export.msgpack")
    assert [e["seq"] for e in events if e["kind"] == "pending"] == [pending["seq"]], "no pending for atk2"
    rolls = [e for e in events if e["kind"] == "roll"]
    assert [e["seq"] for e in rolls] == [made["seq"]], "the refused attack stored nothing"
    assert rolls[0]["fair"]["pending"] == pending["seq"], "the pending has its roll"
    spends = [e["seq"] for e in events if e["kind"] == "resource" and e["delta"] < 0]
    assert len(spends) == 2, "the roll's spend and the one after the gain: the refused ones stored nothing"
    assert verify_fair(events, room.id)[made["seq"]].verdict == "fair"
    assert spec_fairness.verdicts(events, room.id)[made["seq"]] == "fair"


async def test_a_witnessed_roll_that_cannot_be_paid_is_refused_before_any_pending(
    server_factory: Any, clients: Any, tmp_path: Path
) -> None:
    server, room, gm, ana = await fair_table(server_factory, clients, "No Fear")
    # Answered within the request's few seconds: not at the end of a wait for ana, who would be asked.
    refused_for_want_of_fear(await gm.request(attack("atk1")))
    await ana.ping()
    assert not [e for e in ana.events() if e["kind"] == "pending"], "nobody was asked to witness it"
    await set_fear(gm, 1)
    await gm.send(attack("atk2"))  # paid now: witnessed as usual
    pending = await ana.next("event", kind="pending")
    answer = await ana.request({"t": "witness", "id": "w", "pending": pending["seq"], "value": b"a" * 16})
    assert answer["t"] == "ack", answer
    assert (await gm.answer("atk2"))["t"] == "ack"
    await gm.ping()
    events = await stored_events(server, room.id, tmp_path / "export.msgpack")
    assert [e["seq"] for e in events if e["kind"] == "pending"] == [pending["seq"]], "none for the refused"
    assert [e["fair"]["pending"] for e in events if e["kind"] == "roll"] == [pending["seq"]]


async def test_the_hold_is_folded_again_after_a_restart_with_its_pending_open(
    server_factory: Any, clients: Any, tmp_path: Path
) -> None:
    server, room, gm, ana = await fair_table(server_factory, clients, "Held through a crash")
    bo = await witness_client(clients, server, room.player, "bo")
    await set_fear(gm, 1)
    await gm.send(attack("atk1"))
    pending = await ana.next("event", kind="pending")
    assert pending["asked"] == sorted([ana.id, bo.id])
    answer = await ana.request({"t": "witness", "id": "w", "pending": pending["seq"], "value": b"a" * 16})
    assert answer["t"] == "ack", answer
    await asyncio.to_thread(server.kill)  # SIGKILL between the pending and its roll
    await asyncio.to_thread(server.start)

    gm = await clients.join(server.url, room.gm, "gm-again")
    assert gm.welcome["state"]["fear"] == 1
    refused_for_want_of_fear(await gm.request(spend_fear("spend")))
    refused_for_want_of_fear(await gm.request(attack("atk2")))
    bo = await witness_client(clients, server, bo.welcome["session"], "bo-again")
    answer = await bo.request({"t": "witness", "id": "w", "pending": pending["seq"], "value": b"b" * 16})
    assert answer["t"] == "ack", answer
    made = await gm.request(attack("atk1"))  # the roller's retry: answered with the roll the witnesses ended
    assert made["t"] == "ack", made
    await gm.ping()
    assert await fear_now(server, room.spectator, clients) == 0

    assert (await gm.request({"t": "seed", "id": "s1", "op": "reveal"}))["t"] == "ack"
    await gm.ping()
    events = await stored_events(server, room.id, tmp_path / "export.msgpack")
    rolls = [e for e in events if e["kind"] == "roll"]
    assert [e["fair"]["pending"] for e in rolls] == [pending["seq"]], "exactly one roll, naming the pending"
    assert sorted(w[0] for w in rolls[0]["fair"]["witnesses"]) == sorted([ana.id, bo.id])
    assert [e["delta"] for e in events if e["kind"] == "resource" and e["delta"] < 0] == [-1]
    assert verify_fair(events, room.id)[rolls[0]["seq"]].verdict == "fair"
    assert spec_fairness.verdicts(events, room.id)[rolls[0]["seq"]] == "fair"
