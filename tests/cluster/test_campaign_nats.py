"""``room import``, ``room archive`` and ``room delete`` with ``--store nats://...``: a stored export from a
single SQLite server moves into the cluster and the nodes serve it; archiving through the store makes the
nodes refuse writes; an archived room is deleted from the store (an active one is not). A room exported
``--with-secrets`` moves with its open dice seed and its open witnessed roll, which a node then makes, and
exports from the cluster store with them again."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

from relay.fairness import verify_fair
from relay.storage.exports import read, revealed_bodies
from relay.storage.nats.log import NatsLog
from tests import spec_fairness
from tests.cluster.conftest import Nodes
from tests.cluster.natsd import NatsCluster
from tests.console import tablerelay_bin
from tests.e2e.cli.test_room_move import die_with_a_roll_open
from tests.e2e.servers import arunning_server
from tests.e2e.test_fair_dice import DICE, fair_roll, witness_client

POWER = {"system": "drawsteel.power", "characteristic": 1}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tablerelay_bin(), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


async def arun(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(run, env, *args)


async def test_import_archive_and_delete_on_the_nats_store(
    nats: NatsCluster, nodes_factory: Any, clients: Any, tmp_path: Path
) -> None:
    nodes: Nodes = nodes_factory(nats)
    env = nodes.env  # TABLERELAY_STORE is the cluster: every command below works on it
    single = tmp_path / "single"
    sqlite_env = {"TABLERELAY_SIGNING_KEY": nodes.key, "TABLERELAY_SECRET": nodes.secret}
    async with arunning_server(single, sqlite_env) as source:
        room = await source.acreate_room("Imported table")
        gm = await clients.join(source.url, room.gm, "gm")
        player = await clients.join(source.url, room.player, "p")
        await player.roll(POWER, "public", "on sqlite")
        await gm.roll(POWER, "gm", "hidden on sqlite")
        await gm.request({"t": "resource", "name": "fear", "op": "set", "n": 2})
        await gm.close()
        await player.close()
    stored = tmp_path / "stored.jsonl"
    exported = await arun(
        {**env, "TABLERELAY_STORE": "sqlite"}, "room", "export", room.id, "--stored", "-o", str(stored),
        "--data", str(single),
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    events = len(stored.read_text().splitlines()) - 1

    imported = await arun(env, "room", "import", str(stored), "--data", str(tmp_path / "cli"))
    assert imported.returncode == 0, imported.stderr
    assert f"with {events} events" in imported.stdout
    again = await arun(env, "room", "import", str(stored), "--data", str(tmp_path / "cli"))
    assert again.returncode == 1
    assert "already exists" in again.stderr
    assert "Traceback" not in again.stderr

    # A node serves the imported room: its history, then new events after it.
    a, b = nodes.nodes
    player = await clients.join(b.url, nodes.token(room.id, "player"), "p-nats")
    assert player.welcome["state"]["fear"] == 2
    assert [e["seq"] for e in player.welcome["history"]][:events] == list(range(1, events + 1))
    more = await player.roll(POWER, "public", "on nats")
    # After the imported events: the next dice seed's commitment (the file left the open seed's secret
    # behind, so the import abandoned that seed), the join on the node, then this roll.
    assert more["seq"] == events + 3
    # Exported again from the NATS store, every event (imported and new) verifies offline.
    out = tmp_path / "from-nats.jsonl"
    made = await arun(env, "room", "export", room.id, "-o", str(out), "--data", str(a.data))
    assert made.returncode == 0, made.stderr
    checked = await arun(env, "verify", str(out))
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # Deleting an active room from the cluster store is refused, --yes or not.
    early = await arun(env, "room", "delete", room.id, "--yes", "--data", str(tmp_path / "cli"))
    assert early.returncode == 1
    assert "not archived" in early.stderr

    # Archived through the store: the node serving the room follows the stream and refuses a roll.
    archived = await arun(env, "room", "archive", room.id, "--data", str(tmp_path / "cli"))
    assert archived.returncode == 0, archived.stderr
    for _ in range(100):
        reply = await player.request(
            {"t": "roll", "intent": {"system": "dice", "formula": "1d6"}, "visibility": "public"}
        )
        if reply["t"] == "error":
            break
        await asyncio.sleep(0.05)  # a roll raced the archive event to the node: it is stored before it
    assert reply["code"] == "archived", reply
    twice = await arun(env, "room", "archive", room.id, "--data", str(tmp_path / "cli"))
    assert "already archived" in twice.stdout
    await player.close()

    listed = await arun(env, "room", "list", "--json", "--data", str(tmp_path / "cli"))
    assert room.id in [r["id"] for r in json.loads(listed.stdout)], listed.stdout

    # Without a terminal and without --yes, nothing is deleted; with --yes the room is gone from the store.
    unasked = await arun(env, "room", "delete", room.id, "--data", str(tmp_path / "cli"))
    assert unasked.returncode == 2
    assert "--yes" in unasked.stderr
    watcher = await NatsLog.connect(nats.store, follow=False)  # a node's log that has seen the room
    try:
        assert await watcher.get_room(room.id) is not None
        deleted = await arun(env, "room", "delete", room.id, "--yes", "--data", str(tmp_path / "cli"))
        assert deleted.returncode == 0, deleted.stderr
        assert await watcher.get_room(room.id) is None, "a log that saw the room before finds it no more"
        assert await watcher.last_seq(room.id) == 0, "the room's subject holds no event"
    finally:
        await watcher.close()
    listing = await arun(env, "room", "list", "--json", "--data", str(tmp_path / "cli"))
    assert listing.returncode == 0, listing.stderr
    assert room.id not in [r["id"] for r in json.loads(listing.stdout)]
    gone = await arun(env, "room", "delete", room.id, "--yes", "--data", str(tmp_path / "cli"))
    assert gone.returncode == 2
    assert "no room" in gone.stderr
    # The same file imports again after the delete: the store holds nothing of the old room.
    back = await arun(env, "room", "import", str(stored), "--data", str(tmp_path / "cli"))
    assert back.returncode == 0, back.stderr


async def test_a_room_moves_into_the_nats_store_with_its_secrets_and_rolls_on_from_its_open_seed(
    nats: NatsCluster, nodes_factory: Any, clients: Any, tmp_path: Path
) -> None:
    nodes: Nodes = nodes_factory(nats, TABLERELAY_FAIR_DICE="true")
    env = nodes.env
    single = tmp_path / "single"
    sqlite_env = {
        "TABLERELAY_SIGNING_KEY": nodes.key,
        "TABLERELAY_SECRET": nodes.secret,
        "TABLERELAY_FAIR_DICE": "true",
        "TABLERELAY_WITNESS_WAIT_MS": "4000",
    }
    async with arunning_server(single, sqlite_env) as source:
        room = await source.acreate_room("Moved with its secrets")
        gm = await clients.join(source.url, room.gm, "gm")
        ana = await witness_client(clients, source, room.player, "ana")
        first = await fair_roll(ana, DICE, "a1", bytes(range(16)))
        pending = await die_with_a_roll_open(clients, source, room, gm, ana, b"a" * 16)
    moved = tmp_path / "moved.msgpack"
    exported = await arun(
        {**env, "TABLERELAY_STORE": "sqlite"}, "room", "export", room.id, "--stored", "--with-secrets",
        "--format", "msgpack", "-o", str(moved), "--data", str(single),
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert "as private as a backup" in exported.stderr

    imported = await arun(env, "room", "import", str(moved), "--data", str(tmp_path / "cli"))
    assert imported.returncode == 0, imported.stderr
    assert "with the secrets of 1 open witnessed roll: it rolls on from its open seed." in imported.stdout
    a, b = nodes.nodes
    gm = await clients.join(b.url, nodes.token(room.id, "gm"), "gm-node")
    assert gm.welcome["seed"]["n"] == 1, "the cluster serves the seed the room moved with"

    def names_pending(event: dict[str, Any]) -> bool:
        return event.get("kind") == "roll" and event.get("fair", {}).get("pending") == pending["seq"]

    made = next((e for e in gm.welcome["history"] if names_pending(e)), None)
    made = made or await gm.next("event", where=names_pending, timeout=30)
    assert made["fair"]["witnesses"] == [[ana.id, b"a" * 16]], "made from the secret and value it moved with"
    player = await clients.join(a.url, nodes.token(room.id, "player"), "p-node")
    after = await fair_roll(player, DICE, "a2", bytes(range(16, 32)))
    assert (await player.event(after))["fair"]["n"] == 1

    # Exported from the cluster store with its secrets again: the seeds the nodes hold, no roll open.
    again = tmp_path / "again.msgpack"
    out = await arun(
        env, "room", "export", room.id, "--stored", "--with-secrets", "--format", "msgpack", "-o", str(again),
        "--data", str(a.data),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    carried = read(again.read_bytes()).secrets
    assert carried is not None
    assert [n for n, _ in carried["seeds"]][:2] == [1, 2]
    assert carried["kept"] == [], "the roll is made: nothing of it is kept"

    assert (await gm.request({"t": "seed", "op": "reveal"}))["t"] == "ack"
    await gm.ping()
    final = tmp_path / "final.msgpack"
    out = await arun(
        env,
        "room",
        "export",
        room.id,
        "--stored",
        "--format",
        "msgpack",
        "-o",
        str(final),
        "--data",
        str(a.data),
    )
    assert out.returncode == 0, out.stderr
    assert read(final.read_bytes()).secrets is None
    events = revealed_bodies(read(final.read_bytes()).events)
    verdicts = {seq: v.verdict for seq, v in verify_fair(events, room.id).items()}
    assert verdicts == spec_fairness.verdicts(events, room.id)
    assert [verdicts[seq] for seq in (first, made["seq"], after)] == ["fair", "fair", "fair"], verdicts
    assert "failed" not in verdicts.values(), verdicts
    checked = await arun(env, "verify", str(final), "--fair")
    assert checked.returncode == 0, checked.stdout + checked.stderr
