"""Online backup under write load, and a restore that gives every room a new epoch: a client resuming with
the old epoch starts afresh, and every event acknowledged before the backup is in the restored log."""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack

from tests.console import run_cli, tablerelay_bin
from tests.e2e.servers import Server
from tests.e2e.wire import Client, assert_sentence

POWER = {"system": "drawsteel.power", "characteristic": 2}


def stored(db: Path, room: str) -> dict[int, dict[str, Any]]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT seq, data FROM events WHERE room = ? ORDER BY seq", (room,)).fetchall()
    finally:
        conn.close()
    return {int(seq): msgpack.unpackb(data, raw=False) for seq, data in rows}


def restore(srv: Server, src: Path) -> subprocess.CompletedProcess[str]:
    """``tablerelay restore`` on the server's data folder, whatever its exit status."""
    return subprocess.run(
        [tablerelay_bin(), "restore", str(src), "--data", str(srv.data)],
        env=srv.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_backup_while_rolling_then_restore_bumps_every_epoch(
    server_factory: Callable[..., Server], tmp_path: Path
) -> None:
    secret = secrets.token_hex(24)
    rates = {"TABLERELAY_RATE": "1000", "TABLERELAY_BURST": "1000"}
    srv = server_factory(secret=secret, **rates)
    room = await srv.acreate_room("Backed up")
    other = await srv.acreate_room("Another table")
    gm = await Client.join(srv.url, room.gm, "gm")
    players = [await Client.join(srv.url, room.player, f"p{i}") for i in range(3)]
    everyone = [gm, *players]
    acks: list[tuple[str, int, Client]] = []  # (roll id, seq, roller), in the order they arrived
    stop = asyncio.Event()

    async def roll_on(client: Client) -> None:
        while not stop.is_set():
            rid = client.new_id("bk")
            visibility = "gm" if len(acks) % 3 == 0 else "public"
            ack = await client.roll(POWER, visibility, rid, request_id=rid)
            acks.append((rid, ack["seq"], client))

    rolling = [asyncio.create_task(roll_on(c)) for c in everyone]
    while len(acks) < 60:
        await asyncio.sleep(0.01)
    before = list(acks)  # acknowledged before the backup began
    dest = tmp_path / "backup.sqlite3"
    done = await asyncio.to_thread(srv.cli, "backup", str(dest), "--json")
    summary = json.loads(done.stdout)
    returned = len(acks)  # counted from here: the CLI's start-up alone may outlast 60 rolls
    while len(acks) < returned + 60:  # and the table goes on rolling after it
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.gather(*rolling)

    # The copy: a consistent state, every acknowledged roll from before it, seqs dense.
    assert summary["backup"] == str(dest)
    assert summary["rooms"] == 2
    copied = stored(dest, room.id)
    assert list(copied) == list(range(1, len(copied) + 1)), "the copy's seqs are dense"
    for rid, seq, client in before:
        assert seq in copied, f"{rid} (seq {seq}) was acknowledged before the backup and is not in it"
        assert copied[seq]["request"] == rid
        assert copied[seq]["actor"]["id"] == client.id
    backup_top = max(copied)
    after = [seq for _, seq, _ in acks if seq > backup_top]
    assert after, (
        "rolls acknowledged after the backup are not in it (the restore will lose them): "
        f"backup's top seq {backup_top}, acks {len(before)} before it, {returned} when it returned, "
        f"{len(acks)} in all, the last acked seq {max(seq for _, seq, _ in acks)}"
    )
    conn = sqlite3.connect(dest)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete", "one self-contained file"
    finally:
        conn.close()

    # A restore refuses while the server runs.
    refused = restore(srv, dest)
    assert refused.returncode == 1
    assert "stop it first" in refused.stderr, refused.stderr
    assert_sentence(refused.stderr.strip().removeprefix("tablerelay: "))

    old_epoch = gm.welcome["epoch"]
    other_epoch = (await Client.join(srv.url, other.gm, "other")).welcome["epoch"]
    last_seen = max(ev["seq"] for ev in players[0].events())
    for c in everyone:
        await c.close()
    assert await srv.astop(signal.SIGTERM) == 0
    done = await asyncio.to_thread(srv.cli, "restore", str(dest), "--json")
    restored = json.loads(done.stdout)
    assert restored["new_epochs"] == 2
    assert restored["kept"], "the replaced database is kept"
    assert Path(restored["kept"]).is_file()
    assert max(stored(Path(restored["kept"]), room.id)) > backup_top, "the kept one has the later events"

    srv = server_factory(srv.data, secret=secret, **rates)
    back = await Client.join(
        srv.url, players[0].welcome["session"], "back", resume={"epoch": old_epoch, "seq": last_seen}
    )
    try:
        welcome = back.welcome
        assert welcome["epoch"] != old_epoch, "a restored room has a new epoch"
        assert welcome["recovered"] is False, "a resume from before the restore is not recovered"
        # The restored log and nothing after it: everyone it lists as present has rejoin_grace to come
        # back, and this player, listed there, comes back without a join.
        live = stored(srv.data / "tablerelay.sqlite3", room.id)
        assert [live[seq] for seq in range(1, backup_top + 1)] == [
            copied[seq] for seq in range(1, backup_top + 1)
        ]
        assert welcome["seq"] == backup_top, "nothing stored after the restored log"
        assert {c.id for c in everyone} <= {m["id"] for m in welcome["state"]["members"]}
        history = [ev["seq"] for ev in welcome["history"]]
        assert history == list(range(welcome["seq"] - len(history) + 1, welcome["seq"] + 1))
        ack = await back.roll(POWER)
        assert ack["seq"] == welcome["seq"] + 1, "the room goes on from the restored log"
        again = await Client.join(srv.url, other.gm, "other-back", resume={"epoch": other_epoch, "seq": 1})
        assert again.welcome["epoch"] != other_epoch, "every room's epoch changed"
        assert again.welcome["recovered"] is False
        await again.close()
    finally:
        await back.close()
    for rid, seq, _ in before:
        assert stored(srv.data / "tablerelay.sqlite3", room.id)[seq]["request"] == rid

    # The restored room's log now holds events of two epochs: those from before the restore keep theirs.
    # Its stored export moves it to another server all the same (import once refused the older events).
    export = tmp_path / "restored.jsonl"
    await asyncio.to_thread(srv.cli, "room", "export", room.id, "--stored", "-o", str(export))
    events = [json.loads(line) for line in export.read_text().splitlines()[1:]]
    assert len({e["epoch"] for e in events}) == 2, "the old epoch and the restore's"
    target = server_factory()
    await asyncio.to_thread(target.cli, "room", "import", str(export))

    # A backup with a damaged row is refused before anything is replaced: the room would not load.
    damaged = tmp_path / "damaged.sqlite3"
    damaged.write_bytes(dest.read_bytes())
    conn = sqlite3.connect(damaged)
    try:
        conn.execute("UPDATE events SET data = ? WHERE room = ? AND seq = 3", (b"\xc1\xc1", room.id))
        conn.commit()
    finally:
        conn.close()
    await srv.astop(signal.SIGTERM)
    before_restore = (srv.data / "tablerelay.sqlite3").read_bytes()
    refused = restore(srv, damaged)
    assert refused.returncode == 1
    assert f"holds a room that cannot be served: room {room.id}, event 3 cannot be read" in refused.stderr
    assert_sentence(refused.stderr.strip().removeprefix("tablerelay: "))
    assert (srv.data / "tablerelay.sqlite3").read_bytes() == before_restore, "nothing was replaced"


def test_a_backup_replaces_only_an_earlier_backup(tmp_path: Path) -> None:
    def backup(dest: Path) -> subprocess.CompletedProcess[str]:
        return run_cli("backup", str(dest), data=data)

    data = tmp_path / "data"
    made = run_cli("room", "create", "--name", "t", data=data)
    assert made.returncode == 0, made.stderr
    live = data / "tablerelay.sqlite3"
    before = live.read_bytes()
    # The live database named as the backup (it would be replaced by its own copy, under a running server).
    refused = backup(data / ".." / "data" / "tablerelay.sqlite3")
    assert refused.returncode == 1, refused.stdout
    assert refused.stderr.endswith("is the database being backed up; give the backup another name.\n")
    assert live.read_bytes() == before
    # A file that is not a tablerelay database: a mistyped name is not overwritten.
    notes = tmp_path / "notes.txt"
    notes.write_text("the GM's notes\n")
    refused = backup(notes)
    assert refused.returncode == 1, refused.stdout
    assert_sentence(refused.stderr.strip().removeprefix("tablerelay: "))
    assert "is not a tablerelay backup, so it is left as it is" in refused.stderr
    assert notes.read_text() == "the GM's notes\n"
    # An earlier backup under the same name (a nightly job) is replaced; a name that would be a URI's query
    # and fragment (`?`, `#`) is a file name like any other, to back up to and to restore from.
    nightly = tmp_path / "nightly?run=1#a.sqlite3"
    for _ in range(2):
        done = backup(nightly)
        assert done.returncode == 0, done.stderr
    assert sqlite3.connect(nightly).execute("SELECT COUNT(*) FROM rooms").fetchone() == (1,)
    restored = run_cli("restore", str(nightly), data=tmp_path / "elsewhere")
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout.startswith(f"Restored 1 rooms and 0 events from {nightly};"), restored.stdout
