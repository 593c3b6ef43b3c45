"""Fair dice on a real server (spec/fairness.md, ``fair_dice`` on): every roll's dice follow from a committed
seed and the roller's seed; a GM reveals the seed; an export checks offline with ``tablerelay verify --fair``,
the Python verifier and the spec-only one (tests/spec_fairness.py) agreeing; a changed draw fails; a retried
roll is stored once with its first dice; the open seed outlives a restart; no seed reaches a socket or a log
line before its reveal."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import msgpack

from relay.fairness import verify_fair
from relay.storage.exports import read, revealed_bodies
from tests import spec_fairness
from tests.console import tablerelay_bin
from tests.e2e.servers import Server
from tests.e2e.wire import Client

FAIR = {"TABLERELAY_FAIR_DICE": "true"}
DICE = {"system": "dice", "formula": "4d6kh3+1d20"}
DUALITY = {"system": "daggerheart.duality", "modifier": 2, "difficulty": 12}


async def cli(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    run = [tablerelay_bin(), *args] + ([] if args[0] == "verify" else ["--data", str(server.data)])
    return await asyncio.to_thread(
        subprocess.run, run, env=server.env, capture_output=True, text=True, timeout=60
    )


async def fair_roll(
    client: Client, intent: dict[str, Any], rid: str, seed: bytes, vis: str = "public"
) -> int:
    reply = await client.request({"t": "roll", "id": rid, "intent": intent, "visibility": vis, "seed": seed})
    assert reply["t"] == "ack", reply
    return int(reply["seq"])


async def test_a_fair_session_checks_offline_and_a_changed_draw_fails(
    server_factory: Any, clients: Any, tmp_path: Path
) -> None:
    server: Server = server_factory(**FAIR)
    room = await server.acreate_room("Fair table")
    gm = await clients.join(server.url, room.gm, "gm")
    ana = await clients.join(server.url, room.player, "ana")
    seqs = [await fair_roll(ana, DICE, "a1", bytes(range(16)))]
    again = await ana.request(
        {"t": "roll", "id": "a1", "intent": DICE, "visibility": "public", "seed": bytes(16)}
    )
    assert again == {"t": "ack", "id": "a1", "seq": seqs[0]}, "a retried id is the first roll, its dice kept"
    seqs.append(await fair_roll(ana, DUALITY, "a2", bytes(range(16, 32)), "gm"))
    seqs.append(await fair_roll(gm, DICE, "g1", bytes(range(32, 48))))
    event = await ana.event(seqs[0])
    assert event["fair"]["n"] == 1
    assert event["fair"]["seed"] == bytes(range(16))
    reveal = await gm.request({"t": "seed", "id": "s1", "op": "reveal"})
    assert reveal["t"] == "ack", reveal
    await gm.request({"t": "reveal", "id": "v1", "seq": seqs[1]})
    await fair_roll(ana, DICE, "a3", bytes(range(48, 64)))  # on seed 2, not revealed yet
    await gm.ping()
    for frame in ana.raw + gm.raw:
        if isinstance(frame, bytes):
            decoded = msgpack.unpackb(frame, raw=False, strict_map_key=False)
            if decoded.get("kind") == "seed_reveal":
                assert decoded["seq"] > seqs[-1], "no seed reached a socket before its reveal"

    for form in ("--stored", None):
        out = tmp_path / f"export{form or ''}.msgpack"
        args = ["room", "export", room.id, "--format", "msgpack", "-o", str(out)] + ([form] if form else [])
        made = await cli(server, *args)
        assert made.returncode == 0, made.stderr
        export = read(out.read_bytes())
        events = revealed_bodies(export.events)
        verdicts = {seq: v.verdict for seq, v in verify_fair(events, room.id).items()}
        assert verdicts == spec_fairness.verdicts(events, room.id), "the spec-only verifier agrees"
        rolls = [e["seq"] for e in events if e["kind"] == "roll"]
        assert [verdicts[s] for s in rolls] == ["fair", "fair", "unwitnessed", "awaiting seed"], verdicts
        checked = await cli(server, "verify", str(out), "--fair")
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert f"{seqs[0]}  fair" in checked.stdout

    tampered = tmp_path / "tampered.jsonl"
    made = await cli(server, "room", "export", room.id, "--stored", "--format", "jsonl", "-o", str(tampered))
    assert made.returncode == 0, made.stderr
    lines = tampered.read_text().splitlines()
    for i, line in enumerate(lines):
        item = json.loads(line)
        if item.get("seq") == seqs[0]:
            item["fair"]["draws"][0][1] = item["fair"]["draws"][0][1] % 6 + 1
            lines[i] = json.dumps(item)
    tampered.write_text("\n".join(lines) + "\n")
    events = revealed_bodies(read(tampered.read_bytes()).events)
    assert verify_fair(events, room.id)[seqs[0]].failed
    assert spec_fairness.verdicts(events, room.id)[seqs[0]] == "failed"
    revealed = next(e["seed"] for e in events if e["kind"] == "seed_reveal")
    logged = "\n".join(server.log_lines)
    assert revealed.hex() not in logged, "no seed in a log line"
    assert repr(revealed) not in logged


async def test_the_open_seed_outlives_a_restart(server_factory: Any, clients: Any, tmp_path: Path) -> None:
    server: Server = server_factory(**FAIR)
    room = await server.acreate_room("Fair table")
    ana = await clients.join(server.url, room.player, "ana")
    first = await fair_roll(ana, DICE, "a1", bytes(range(16)))
    await ana.close()
    await server.astop()
    await asyncio.to_thread(server.start)
    ana = await clients.join(server.url, room.player, "ana-again")
    second = await fair_roll(ana, DICE, "a2", bytes(range(16)))
    gm = await clients.join(server.url, room.gm, "gm")
    assert (await gm.request({"t": "seed", "id": "s1", "op": "reveal"}))["t"] == "ack"
    await gm.ping()
    assert gm.welcome["seed"]["n"] == 1, "the welcome names the open seed"
    out = tmp_path / "export.msgpack"
    made = await cli(server, "room", "export", room.id, "--stored", "--format", "msgpack", "-o", str(out))
    assert made.returncode == 0, made.stderr
    log = read(out.read_bytes()).events
    assert [e["kind"] for e in log].count("seed_commit") == 2, "one seed before, the next after the reveal"
    verdicts = verify_fair(log, room.id)
    assert verdicts[first].verdict == "fair"
    assert verdicts[second].verdict == "fair", "the second roll used the same seed, restored from the store"


async def witness_client(clients: Any, server: Server, token: str, label: str) -> Client:
    client: Client = await clients.open(server.url, label)
    await client.send({"t": "hello", "v": 1, "token": token, "witness": True})
    client.welcome = await client.next("welcome")
    return client


async def answer_pending(client: Client, value: bytes) -> dict[str, Any]:
    pending = await client.next("event", kind="pending")
    return await client.request({"t": "witness", "pending": pending["seq"], "value": value})


async def test_a_gm_roll_is_witnessed_by_the_players_online_and_checks_fair_offline(
    server_factory: Any, clients: Any, tmp_path: Path
) -> None:
    server: Server = server_factory(**FAIR, TABLERELAY_WITNESS_WAIT_MS="10000")
    room = await server.acreate_room("Witnessed table")
    gm = await clients.join(server.url, room.gm, "gm")
    ana = await witness_client(clients, server, room.player, "ana")
    bo = await witness_client(clients, server, room.player, "bo")
    quiet = await clients.join(server.url, room.player, "quiet")  # no witness flag: never asked
    answers = asyncio.gather(answer_pending(ana, b"a" * 16), answer_pending(bo, b"b" * 24))
    seq = await fair_roll(gm, DICE, "g1", bytes(16), "gm")
    acks = await answers
    assert [a["t"] for a in acks] == ["ack", "ack"]
    event = await gm.event(seq)
    assert sorted(w[0] for w in event["fair"]["witnesses"]) == sorted([ana.id, bo.id])
    placeholder = await quiet.event(seq)
    assert placeholder.get("sealed") is True
    assert placeholder["fair"]["witnesses"] == event["fair"]["witnesses"], "each witness checks its value"
    assert "draws" not in placeholder["fair"]
    assert not [f for f in quiet.frames if isinstance(f, dict) and f.get("t") == "error"]
    assert (await gm.request({"t": "seed", "id": "s1", "op": "reveal"}))["t"] == "ack"
    await gm.request({"t": "reveal", "id": "v1", "seq": seq})
    out = tmp_path / "export.msgpack"
    made = await cli(server, "room", "export", room.id, "--format", "msgpack", "-o", str(out))
    assert made.returncode == 0, made.stderr
    events = revealed_bodies(read(out.read_bytes()).events)
    verdicts = verify_fair(events, room.id)
    assert verdicts[seq].verdict == "fair"
    assert verdicts[seq].witnesses == 2
    assert spec_fairness.verdicts(events, room.id)[seq] == "fair"
    checked = await cli(server, "verify", str(out), "--fair")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{seq}  fair (2 witnesses)" in checked.stdout


async def test_a_witness_that_never_answers_costs_only_the_wait(server_factory: Any, clients: Any) -> None:
    server: Server = server_factory(**FAIR, TABLERELAY_WITNESS_WAIT_MS="300")
    room = await server.acreate_room("Slow witness")
    gm = await clients.join(server.url, room.gm, "gm")
    ana = await witness_client(clients, server, room.player, "ana")
    await witness_client(clients, server, room.player, "silent")
    answered = asyncio.ensure_future(answer_pending(ana, b"a" * 16))
    seq = await fair_roll(gm, DICE, "g1", bytes(16))
    assert (await answered)["t"] == "ack"
    event = await gm.event(seq)
    assert [w[0] for w in event["fair"]["witnesses"]] == [ana.id], "made with the value it had"
