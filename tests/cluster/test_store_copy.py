"""``tablerelay store copy``: a room log moved from the data folder's SQLite file into the NATS store."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import msgpack

from relay.storage.nats.log import NatsLog
from relay.storage.nats.stream import STREAM, subject
from tests.cluster.conftest import Nodes
from tests.cluster.natsd import NatsCluster
from tests.console import tablerelay_bin
from tests.e2e.servers import arunning_server

POWER = {"system": "drawsteel.power", "characteristic": 1}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tablerelay_bin(), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


async def test_a_sqlite_room_log_moves_to_nats_exactly_and_clients_resume_on_the_nodes(
    nats: NatsCluster, nodes_factory: Any, clients: Any, tmp_path: Path
) -> None:
    # Fair dice on both sides: the room's open seed must move with its events, or the nodes would roll
    # from a new seed under the old one's commitment and every roll after the move would fail its check.
    nodes: Nodes = nodes_factory(nats, TABLERELAY_FAIR_DICE="true")
    data = tmp_path / "single"
    shared = {"TABLERELAY_SIGNING_KEY": nodes.key, "TABLERELAY_FAIR_DICE": "true"}
    # The single node has the cluster's secret and key, so its tokens and signatures hold on the nodes.
    env = {**nodes.env, "TABLERELAY_STORE": "sqlite"}
    async with arunning_server(data, {**shared, "TABLERELAY_SECRET": nodes.secret}) as single:
        room = await single.acreate_room("Moving house")
        gm = await clients.join(single.url, room.gm, "gm")
        player = await clients.join(single.url, room.player, "p")
        for vis in ("public", "gm", "blind", "self", "public"):
            await player.roll(POWER, vis, f"before the move {vis}")
        hidden = await player.roll(POWER, "gm", "revealed later")
        await gm.request({"t": "reveal", "seq": hidden["seq"]})
        await gm.request({"t": "resource", "name": "fear", "op": "set", "n": 4})
        last = await gm.roll(POWER, "public", "last on sqlite")
        await player.event(last["seq"])
        resume = {"epoch": player.welcome["epoch"], "seq": player.welcome["seq"]}
        session = player.welcome["session"]
        await gm.close()
        await player.close()

    copied = await asyncio.to_thread(
        run, env, "store", "copy", "--from", "sqlite", "--to", nats.store, "--data", str(data)
    )
    assert copied.returncode == 0, copied.stderr
    assert f"room {room.id}" in copied.stdout
    again = await asyncio.to_thread(
        run, env, "store", "copy", "--from", "sqlite", "--to", nats.store, "--data", str(data)
    )
    assert again.returncode == 0, again.stderr
    assert f"room {room.id} (Moving house): 0 events copied" in again.stdout, "a second copy changes nothing"

    # Byte for byte: every record blob in the stream is the one the SQLite file holds.
    with sqlite3.connect(data / "tablerelay.sqlite3") as conn:
        rows = [
            bytes(r[0])
            for r in conn.execute("SELECT data FROM events WHERE room = ? ORDER BY seq", (room.id,))
        ]
    log = await NatsLog.connect(nats.store, follow=False)
    try:
        blobs: list[bytes] = []
        seq = 0
        while True:
            try:
                msg = await log.js.get_msg(STREAM, seq=seq + 1, subject=subject(room.id), next=True)
            except Exception:
                break
            assert msg.data is not None
            assert msg.seq is not None
            blobs.extend(msgpack.unpackb(msg.data, raw=False))
            seq = msg.seq
    finally:
        await log.close()
    assert blobs == rows

    # The room, served by the nodes: a resume from before the move is recovered with exactly the gap.
    a, b = nodes.nodes
    back = await clients.join(b.url, session, "p-back", resume=resume)
    assert back.welcome["recovered"] is True
    assert [ev["seq"] for ev in back.welcome["history"]] == list(
        range(resume["seq"] + 1, back.welcome["seq"] + 1)
    )
    assert back.welcome["state"]["fear"] == 4
    more = await back.roll(POWER, "public", "first on nats")
    assert more["seq"] == len(rows) + 2, "after the copied events: p's join on the node, then this roll"

    # And back: the cluster store copied into a SQLite file (a backup a single node can serve) holds the
    # same records.
    backup = tmp_path / "backup"
    saved = await asyncio.to_thread(
        run, env, "store", "copy", "--from", nats.store, "--to", "sqlite", "--data", str(backup)
    )
    assert saved.returncode == 0, saved.stderr
    with sqlite3.connect(backup / "tablerelay.sqlite3") as conn:
        restored = [
            bytes(r[0])
            for r in conn.execute("SELECT data FROM events WHERE room = ? ORDER BY seq", (room.id,))
        ]
        (epoch,) = conn.execute("SELECT epoch FROM rooms WHERE id = ?", (room.id,)).fetchone()
    assert restored[: len(rows)] == rows
    assert len(restored) == more["seq"]
    assert epoch == resume["epoch"]

    # The GM reveals the seed on a node: the rolls before and after the move recompute from it.
    gm_node = await clients.join(a.url, room.gm, "gm-node")
    revealed = await gm_node.request({"t": "seed", "op": "reveal"})
    assert revealed["t"] == "ack", revealed

    # Exported from the NATS store, every event verifies offline, dice included.
    out = tmp_path / "export.jsonl"
    made = await asyncio.to_thread(
        run, nodes.env, "room", "export", room.id, "-o", str(out), "--data", str(a.data)
    )
    assert made.returncode == 0, made.stderr
    checked = await asyncio.to_thread(run, nodes.env, "verify", str(out))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "verify" in checked.stdout
    fair = await asyncio.to_thread(run, nodes.env, "verify", str(out), "--fair")
    assert fair.returncode == 0, fair.stdout + fair.stderr
    assert "failed" not in fair.stdout, fair.stdout
