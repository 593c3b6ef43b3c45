"""A room moved between relays with ``room export --stored`` and ``room import``, fair dice on, on real
``tablerelay`` processes and files (docs/fairness.md, "Where this differs", (7)).

With ``--with-secrets`` the file carries the room's dice seeds and its open witnessed roll's secret, as
``store copy`` does: the importing relay completes that roll, rolls on from the same seed, and after a GM's
reveal every roll checks with ``verify_fair`` and the spec-only verifier. Without them the importing relay
abandons the open seed: its rolls stay "awaiting seed", the rolls after the move verify, nothing fails. No
export but the one made ``--with-secrets`` holds a byte of a secret seed.
"""

from __future__ import annotations

import asyncio
import base64
import sqlite3
from pathlib import Path
from typing import Any

from relay.fairness import verify_fair
from relay.storage.exports import read, revealed_bodies
from tests import spec_fairness
from tests.e2e.servers import Room, Server
from tests.e2e.test_fair_dice import DICE, FAIR, answer_pending, cli, fair_roll, witness_client
from tests.e2e.wire import Client


def secret_seeds(server: Server, room_id: str) -> dict[int, bytes]:
    """The room's dice seeds as the source's store holds them (the open one, and the next, drawn ahead)."""
    with sqlite3.connect(server.data / "tablerelay.sqlite3") as conn:
        rows = conn.execute("SELECT n, seed FROM seeds WHERE room = ?", (room_id,)).fetchall()
    return {int(n): bytes(seed) for n, seed in rows}


def assert_no_secret(path: Path, seeds: dict[int, bytes]) -> None:
    data = path.read_bytes()
    for n, seed in seeds.items():
        for form in (seed, seed.hex().encode(), base64.b64encode(seed)):
            assert form not in data, f"{path.name} holds dice seed {n}"


async def export(server: Server, room_id: str, out: Path, *flags: str) -> list[dict[str, Any]]:
    """The room exported from ``server``'s data folder into ``out``; its events, revealed rolls opened."""
    fmt = "jsonl" if out.suffix == ".jsonl" else "msgpack"
    made = await cli(server, "room", "export", room_id, "--format", fmt, "-o", str(out), *flags)
    assert made.returncode == 0, made.stderr
    return revealed_bodies(read(out.read_bytes()).events)


async def die_with_a_roll_open(
    clients: Any, source: Server, room: Room, gm: Client, witness: Client, value: bytes
) -> dict[str, Any]:
    """A hidden GM roll left open, ``witness``'s value stored for it: asked of a second witness who never
    answers, the relay (its witness wait longer than this takes) is killed while it waits. Its pending."""
    await witness_client(clients, source, room.player, "silent")
    await gm.send({"t": "roll", "id": "open", "intent": DICE, "visibility": "gm", "seed": bytes(16)})
    pending = await witness.next("event", kind="pending")
    witnessed = await witness.request({"t": "witness", "pending": pending["seq"], "value": value})
    assert witnessed["t"] == "ack", witnessed
    await asyncio.to_thread(source.kill)
    return pending


def verdicts(events: list[dict[str, Any]], room_id: str) -> dict[int, str]:
    """Each roll's verdict, the relay's verifier and the spec-only one agreeing."""
    ours = {seq: v.verdict for seq, v in verify_fair(events, room_id).items()}
    assert ours == spec_fairness.verdicts(events, room_id), "the spec-only verifier agrees"
    return ours


async def test_a_move_with_secrets_rolls_on_from_the_open_seed_and_makes_its_open_roll(
    server_factory: Any, clients: Any, tmp_path: Path
) -> None:
    source: Server = server_factory(**FAIR, TABLERELAY_WITNESS_WAIT_MS="4000")
    room = await source.acreate_room("Moving with secrets")
    gm = await clients.join(source.url, room.gm, "gm")
    ana = await witness_client(clients, source, room.player, "ana")
    before = [await fair_roll(ana, DICE, "a1", bytes(range(16)))]
    answered = asyncio.ensure_future(answer_pending(ana, b"a" * 16))
    before.append(await fair_roll(gm, DICE, "g1", bytes(16)))
    assert (await answered)["t"] == "ack"
    pending = await die_with_a_roll_open(clients, source, room, gm, ana, b"b" * 16)
    seeds = secret_seeds(source, room.id)
    assert set(seeds) == {1, 2}, "the open seed, and the next one drawn ahead"

    refused = await cli(source, "room", "export", room.id, "--with-secrets", "-o", str(tmp_path / "x"))
    assert refused.returncode == 2
    assert "--with-secrets goes with --stored" in refused.stderr
    moved = tmp_path / "moved.jsonl"
    await export(source, room.id, moved, "--stored", "--with-secrets")
    carried = read(moved.read_bytes()).secrets
    assert carried is not None
    assert [n for n, _ in carried["seeds"]] == [1, 2]
    assert [k["pending"] for k in carried["kept"]] == [pending["seq"]]
    checked = await cli(source, "verify", str(moved))
    assert checked.returncode == 0, checked.stdout + checked.stderr

    target: Server = server_factory(**FAIR)
    imported = await asyncio.to_thread(target.cli, "room", "import", str(moved))
    assert "Its 2 dice seeds came with it, with the secrets of 1 open witnessed roll:" in imported.stdout
    gm = await clients.join(target.url, target.token(room.id, "gm"), "gm-target")
    assert gm.welcome["seed"]["n"] == 1, "the same seed is open on the importing relay"
    # The open roll is made from the carried secret once its wait is over (counted from its pending).
    made = next(
        (e for e in gm.welcome["history"] if e.get("fair", {}).get("pending") == pending["seq"]), None
    )
    if made is None:
        made = await gm.next(
            "event", where=lambda e: e.get("fair", {}).get("pending") == pending["seq"], timeout=30
        )
    assert made["fair"]["n"] == 1
    assert made["fair"]["witnesses"] == [[ana.id, b"b" * 16]], "with the value the source had stored"
    ana = await clients.join(target.url, target.token(room.id, "player"), "ana-target")
    after = await fair_roll(ana, DICE, "a2", bytes(range(16, 32)))
    assert (await ana.event(after))["fair"]["n"] == 1, "rolls go on with the seed the room moved with"
    assert (await gm.request({"t": "seed", "op": "reveal"}))["t"] == "ack"
    await gm.ping()

    out = tmp_path / "after.msgpack"
    events = await export(target, room.id, out, "--stored")
    rolls = {e["seq"]: e for e in events if e["kind"] == "roll"}
    assert set(rolls) == {*before, made["seq"], after}
    judged = verdicts(events, room.id)
    assert [judged[seq] for seq in sorted(rolls)] == ["fair"] * 4, judged
    revealed = next(e for e in events if e["kind"] == "seed_reveal")
    assert (revealed["n"], revealed["seed"]) == (1, seeds[1]), "the reveal is the source's own seed"
    fair = await cli(target, "verify", str(out), "--fair")
    assert fair.returncode == 0, fair.stdout + fair.stderr
    assert "failed" not in fair.stdout


async def test_a_move_without_secrets_abandons_the_open_seed_and_no_roll_fails(
    server_factory: Any, clients: Any, tmp_path: Path
) -> None:
    source: Server = server_factory(**FAIR)
    room = await source.acreate_room("Moving without secrets")
    gm = await clients.join(source.url, room.gm, "gm")
    ana = await clients.join(source.url, room.player, "ana")
    before = [await fair_roll(ana, DICE, f"a{i}", bytes([i]) * 16) for i in range(2)]
    before.append(await fair_roll(gm, DICE, "g1", bytes(16)))  # no witness online: unwitnessed
    await source.astop()
    seeds = secret_seeds(source, room.id)
    assert 1 in seeds

    plain = tmp_path / "plain.msgpack"
    for path, flags in (
        (plain, ["--stored"]),
        (tmp_path / "plain.jsonl", ["--stored"]),
        (tmp_path / "public.msgpack", []),
    ):
        events = await export(source, room.id, path, *flags)
        assert read(path.read_bytes()).secrets is None
        assert_no_secret(path, seeds)
    assert {verdicts(events, room.id)[seq] for seq in before} == {"awaiting seed"}

    target: Server = server_factory(**FAIR)
    imported = await asyncio.to_thread(target.cli, "room", "import", str(plain))
    said = imported.stdout
    assert "so seed 1 is abandoned here: its 3 rolls stay 'awaiting seed' for good" in said, said
    for words in ("seed 2 is committed now", "--stored --with-secrets", "store copy"):
        assert words in said, said
    ana = await clients.join(target.url, target.token(room.id, "player"), "ana-target")
    assert ana.welcome["seed"]["n"] == 2
    after = await fair_roll(ana, DICE, "a9", bytes(range(16)))
    assert (await ana.event(after))["fair"]["n"] == 2
    gm = await clients.join(target.url, target.token(room.id, "gm"), "gm-target")
    assert (await gm.request({"t": "seed", "op": "reveal"}))["t"] == "ack"
    await gm.ping()

    out = tmp_path / "after.msgpack"
    events = await export(target, room.id, out, "--stored")
    commits = [(e["n"], e["actor"]["id"]) for e in events if e["kind"] == "seed_commit"]
    assert [n for n, _ in commits] == [1, 2, 3], "seed 2 committed at the import; 3 after 2's reveal"
    assert commits[1][1] == "operator", "the import commits seed 2, as the command line"
    judged = verdicts(events, room.id)
    assert [judged[seq] for seq in before] == ["awaiting seed"] * 3
    assert judged[after] == "fair"
    assert "failed" not in judged.values(), judged
    reasons = verify_fair(events, room.id)
    assert "abandoned unrevealed" in reasons[before[0]].reason
    fair = await cli(target, "verify", str(out), "--fair")
    assert fair.returncode == 0, fair.stdout + fair.stderr
    assert f"Fairness of room {room.id}: 3 awaiting seed, 1 fair." in fair.stdout, fair.stdout
