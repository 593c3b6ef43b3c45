"""``room import``, ``room archive`` and ``room delete`` with ``--store nats://...``: a stored export from a
single SQLite server moves into the cluster and the nodes serve it; archiving through the store makes the
nodes refuse writes; an archived room is deleted from the store (an active one is not)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

from relay.storage.nats.log import NatsLog
from tests.cluster.conftest import Nodes
from tests.cluster.natsd import NatsCluster
from tests.console import tablerelay_bin
from tests.e2e.servers import arunning_server

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
    assert more["seq"] == events + 2, "after the imported events: the join on the node, then this roll"
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
