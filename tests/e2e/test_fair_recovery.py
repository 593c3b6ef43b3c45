"""Witnessed rolls that outlive what happens to them (spec/fairness.md: "A pending roll interrupted by a
restart is completed on recovery with the values that were stored"; "Every pending is followed by exactly
one roll naming it"), on a real server process: SIGKILLed between its pending event and its roll and
restarted, the roll appears once with the value that was stored and checks fair with both verifiers; the
roller's retry gets that roll's seq; a witness that never answers delays only its roll, and one who drops
changes nothing else.

No timed assertions: what is checked is counts and order (seqs), never how long anything took.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from relay.fairness import verify_fair
from relay.storage.exports import read, revealed_bodies
from tests import spec_fairness
from tests.e2e.servers import Server
from tests.e2e.test_fair_dice import DICE, FAIR, cli, fair_roll, witness_client


def roll_frame(rid: str, visibility: str = "public") -> dict[str, Any]:
    return {"t": "roll", "id": rid, "intent": DICE, "visibility": visibility, "seed": bytes(16)}


async def stored_events(server: Server, room_id: str, out: Path) -> list[dict[str, Any]]:
    made = await cli(server, "room", "export", room_id, "--stored", "--format", "msgpack", "-o", str(out))
    assert made.returncode == 0, made.stderr
    return revealed_bodies(read(out.read_bytes()).events)


def kept_rows(server: Server) -> int:
    """What the store keeps apart from the log for open witnessed rolls (its ``pendings`` table)."""
    with sqlite3.connect(server.data / "tablerelay.sqlite3") as conn:
        return int(conn.execute("SELECT COUNT(*) FROM pendings").fetchone()[0])


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name} in:\n{text}")


async def test_a_roll_killed_between_its_pending_and_its_roll_is_made_on_restart_with_the_stored_value(
    server_factory: Any, clients: Any, tmp_path: Path
) -> None:
    server: Server = server_factory(**FAIR, TABLERELAY_WITNESS_WAIT_MS="4000")
    room = await server.acreate_room("Crash mid-roll")
    gm = await clients.join(server.url, room.gm, "gm")
    ana = await witness_client(clients, server, room.player, "ana")
    await witness_client(clients, server, room.player, "silent")  # asked, never answers
    await gm.send(roll_frame("g1", "gm"))
    pending = await ana.next("event", kind="pending")
    answer = await ana.request({"t": "witness", "id": "w1", "pending": pending["seq"], "value": b"a" * 16})
    assert answer == {"t": "ack", "id": "w1", "seq": pending["seq"]}, "acked once stored"
    assert kept_rows(server) == 1, "the open roll's secret is stored apart from the log"
    await asyncio.to_thread(server.kill)  # SIGKILL: no clean-up at all
    await asyncio.to_thread(server.start)

    gm = await clients.join(server.url, room.gm, "gm-again")
    assert [e["seq"] for e in gm.welcome["history"] if e["kind"] == "pending"] == [pending["seq"]]
    # The roller's retry of the same roll id: answered with the roll made from what was stored.
    again = await gm.request(roll_frame("g1", "gm"), timeout=30)
    assert again["t"] == "ack", again
    seq = again["seq"]
    # Made once the restarted relay's wait was over: before this GM's welcome (then in its history) or after.
    earlier = [e for e in gm.welcome["history"] if e["seq"] == seq]
    made = earlier[0] if earlier else await gm.event(seq)
    assert made["fair"]["pending"] == pending["seq"]
    assert made["fair"]["witnesses"] == [[ana.id, b"a" * 16]], "the stored value, and only it"
    third = await gm.request(roll_frame("g1", "gm"))
    assert third == {"t": "ack", "id": "g1", "seq": seq}, "a retry after the roll is that roll"
    assert (await gm.request({"t": "seed", "id": "s1", "op": "reveal"}))["t"] == "ack"
    await gm.ping()

    events = await stored_events(server, room.id, tmp_path / "export.msgpack")
    naming = [e["seq"] for e in events if e["kind"] == "roll" and e["fair"]["pending"] == pending["seq"]]
    assert naming == [seq], "exactly one roll names the pending"
    assert [e["kind"] for e in events].count("roll") == 1, "the retries rolled nothing more"
    assert verify_fair(events, room.id)[seq].verdict == "fair"
    assert spec_fairness.verdicts(events, room.id)[seq] == "fair"
    assert kept_rows(server) == 0, "retired once its roll is stored"
    nonce = made["fair"]["nonce"]
    assert nonce.hex() not in server.log_text(), "no nonce in a log line"


async def test_a_silent_witness_delays_only_its_roll_and_one_who_drops_changes_nothing_else(
    server_factory: Any, clients: Any, tmp_path: Path
) -> None:
    server: Server = server_factory(**FAIR, TABLERELAY_WITNESS_WAIT_MS="3000")
    room = await server.acreate_room("Slow and gone")
    gm = await clients.join(server.url, room.gm, "gm")
    ana = await witness_client(clients, server, room.player, "ana")
    bo = await witness_client(clients, server, room.player, "bo")  # asked, never answers in time
    cy = await clients.join(server.url, room.player, "cy")  # no witness flag
    await gm.send(roll_frame("g1"))
    pending = await ana.next("event", kind="pending")
    assert pending["asked"] == sorted([ana.id, bo.id])
    assert (await ana.request({"t": "witness", "id": "w", "pending": pending["seq"], "value": b"a" * 16}))[
        "t"
    ] == "ack"
    await ana.close()  # drops while the roll waits for bo
    others = [await fair_roll(cy, DICE, f"c{i}", bytes([i]) * 16) for i in range(3)]
    made = await gm.answer("g1", timeout=30)
    assert made["t"] == "ack", made
    assert pending["seq"] < others[0] < others[1] < others[2] < made["seq"], "the others went on meanwhile"
    event = await gm.event(made["seq"])
    assert event["fair"]["witnesses"] == [[ana.id, b"a" * 16]], "the dropped witness's value still counts"
    late = await bo.request({"t": "witness", "id": "late", "pending": pending["seq"], "value": b"b" * 16})
    assert late["t"] == "error", late
    assert late["code"] == "not_found", late

    _, _, text = await server.aget("/metrics")
    assert metric(text, "tablerelay_witness_wait_seconds_count") == 1
    assert metric(text, "tablerelay_witness_missing_total") == 1, "bo never answered"
    assert metric(text, "tablerelay_witness_late_total") == 1, "bo's value came after the roll"

    assert (await gm.request({"t": "seed", "id": "s1", "op": "reveal"}))["t"] == "ack"
    await gm.ping()
    events = await stored_events(server, room.id, tmp_path / "export.msgpack")
    leaves = [e["seq"] for e in events if e["kind"] == "leave" and e["member"]["id"] == ana.id]
    assert len(leaves) == 1
    assert pending["seq"] < leaves[0] < made["seq"], "ana's leave is stored while the roll waits"
    verdicts = verify_fair(events, room.id)
    by_spec = spec_fairness.verdicts(events, room.id)
    for s in [*others, made["seq"]]:
        assert verdicts[s].verdict == "fair", (s, verdicts[s])
        assert by_spec[s] == "fair", (s, by_spec[s])


async def test_a_pending_with_nothing_kept_is_said_and_holds_neither_the_seed_nor_its_roller(
    server_factory: Any, clients: Any
) -> None:
    """A log written before secrets were kept (here: the kept row deleted while the relay was down)."""
    server: Server = server_factory(**FAIR, TABLERELAY_WITNESS_WAIT_MS="60000")
    room = await server.acreate_room("Nothing kept")
    gm = await clients.join(server.url, room.gm, "gm")
    ana = await witness_client(clients, server, room.player, "ana")
    await gm.send(roll_frame("g1"))
    pending = await ana.next("event", kind="pending")
    await asyncio.to_thread(server.kill)
    with sqlite3.connect(server.data / "tablerelay.sqlite3") as conn:
        assert conn.execute("DELETE FROM pendings").rowcount == 1
    server.env["TABLERELAY_WITNESS_WAIT_MS"] = "300"  # its wait, counted from the pending, is long over
    await asyncio.to_thread(server.start)
    gm = await clients.join(server.url, room.gm, "gm-again")
    logged = await server.alogged("pending_secret_missing")
    assert [line["pending"] for line in logged] == [pending["seq"]]
    other = await gm.request(roll_frame("g2"))
    assert other["t"] == "ack", other
    assert (await gm.request({"t": "seed", "id": "s1", "op": "reveal"}))["t"] == "ack", "the seed is free"
