"""A campaign's life cycle on the command line, against real ``tablerelay`` processes and real files:
export (public and stored), verify, import (and its refusals), archive (offline and through a running
server), delete (its confirmation), and the presence retention setting.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.console import tablerelay_bin
from tests.e2e.servers import Room, Server
from tests.e2e.wire import Client

pytestmark = pytest.mark.asyncio


def run(server: Server, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """A ``tablerelay`` command on the server's data folder, whatever its exit status."""
    data = [] if args[0] == "verify" else ["--data", str(server.data)]  # verify reads only its file
    return subprocess.run(
        [tablerelay_bin(), *args, *data],
        env=server.env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def arun(server: Server, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(run, server, *args, stdin=stdin)


async def played_room(server: Server, clients: Any) -> tuple[Room, dict[str, Any]]:
    """A room with rolls of every kind, a hidden roll left sealed, Fear and Hope, and a rename."""
    room = await server.acreate_room("Campaign table")
    gm = await clients.join(server.url, room.gm, "gm")
    ana = await clients.join(server.url, room.player, "ana", name="Ana")
    await ana.roll({"system": "drawsteel.power", "characteristic": 2}, label="Leap")
    hidden = await gm.roll({"system": "dice", "formula": "1d100"}, "gm", "Secret check")
    await gm.request({"t": "resource", "name": "fear", "op": "gain", "n": 3})
    await gm.request({"t": "rename", "participant": ana.id, "name": "Anastasia"})
    await gm.close()
    await ana.close()
    return room, {"hidden": hidden["seq"], "ana": ana.id, "ana_session": ana.welcome["session"]}


async def test_stored_export_verifies_and_imports_into_another_server(
    server_factory: Any, clients: Any
) -> None:
    source = server_factory()
    room, facts = await played_room(source, clients)
    status, _, published = source.get("/.well-known/tablerelay-keys.json")
    assert status == 200
    source_keys = source.data / "source-keys.json"
    source_keys.write_text(published)
    await source.astop()

    public = source.data / "public.jsonl"
    stored = source.data / "stored.jsonl"
    assert (await arun(source, "room", "export", room.id, "-o", str(public))).returncode == 0
    assert (await arun(source, "room", "export", room.id, "--stored", "-o", str(stored))).returncode == 0
    for path in (public, stored):
        checked = await arun(source, "verify", str(path))
        assert checked.returncode == 0, checked.stdout + checked.stderr
    lines = [json.loads(line) for line in stored.read_text().splitlines()]
    assert lines[0]["form"] == "stored"
    sealed = next(e for e in lines[1:] if e["seq"] == facts["hidden"])
    assert "nonce" in sealed["sealed"], "a stored export keeps what a later reveal needs"
    public_lines = public.read_text()
    assert "Secret check" not in public_lines, "the public export keeps the hidden roll sealed"

    target = server_factory()  # another data folder, another secret, another signing key
    refused = await arun(target, "room", "import", str(public))
    assert refused.returncode == 1
    assert "public export" in refused.stderr
    # With --keys, the file must have come from the server whose key set it is: the target's own is not it.
    target_keys = target.data / "target-keys.json"
    target_keys.write_text(target.get("/.well-known/tablerelay-keys.json")[2])
    foreign = await arun(target, "room", "import", str(stored), "--keys", str(target_keys))
    assert foreign.returncode == 1
    assert "is not in the key set" in foreign.stderr, foreign.stderr
    imported = await arun(target, "room", "import", str(stored), "--keys", str(source_keys))
    assert imported.returncode == 0, imported.stderr
    assert room.id in imported.stdout
    assert f"every signature verified with the key set in {source_keys}" in imported.stdout
    clash = await arun(target, "room", "import", str(stored))
    assert clash.returncode == 1
    assert "already exists" in clash.stderr

    # The imported room is the same room: same epoch and seqs, state, and the hidden roll still opens.
    gm_token = target.token(room.id, "gm")
    gm = await clients.join(target.url, gm_token, "gm-imported")
    assert gm.welcome["epoch"] == lines[0]["room"]["epoch"]
    # The imported events, the next dice seed's commitment (the file holds no secret, so the open seed is
    # abandoned: tests/e2e/cli/test_room_move.py), then this GM's join.
    assert gm.welcome["seq"] == lines[-1]["seq"] + 2
    assert [e["kind"] for e in gm.welcome["history"][-2:]] == ["seed_commit", "join"]
    assert gm.welcome["state"]["fear"] == 3
    commitment = sealed["sealed"]["commitment"]
    ack = await gm.request({"t": "reveal", "seq": facts["hidden"]})
    assert ack["t"] == "ack", ack
    reveal = await gm.event(ack["seq"])
    assert hashlib.sha256(reveal["nonce"] + reveal["blob"]).hexdigest() == commitment
    names = {p["id"]: p["name"] for p in gm.welcome["participants"]}
    assert names[facts["ana"]] == "Anastasia"


async def test_import_refuses_a_tampered_or_cut_export(
    server_factory: Any, clients: Any, tmp_path: Path
) -> None:
    source = server_factory()
    room, _ = await played_room(source, clients)
    stored = tmp_path / "stored.jsonl"
    assert (await arun(source, "room", "export", room.id, "--stored", "-o", str(stored))).returncode == 0
    lines = stored.read_text().splitlines()
    changed = [json.loads(line) for line in lines]
    changed[3]["ts"] += 1
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join(json.dumps(item) for item in changed) + "\n")
    assert json.loads(lines[0])["seq"] == len(lines) - 1, "the header names the room's last seq"
    head_cut = tmp_path / "head-cut.jsonl"
    head_cut.write_text("\n".join([lines[0], *lines[2:]]) + "\n")
    # Cut at a line's end (a full disk, a copy stopped part way): every line left verifies, and only the
    # header's seq shows that the room went on.
    tail_cut = tmp_path / "tail-cut.jsonl"
    tail_cut.write_text("\n".join(lines[:-2]) + "\n")
    mid_line = tmp_path / "mid-line.jsonl"
    mid_line.write_text("\n".join(lines)[:-20])
    packed = tmp_path / "stored.msgpack"
    made = await arun(source, "room", "export", room.id, "--stored", "--format", "msgpack", "-o", str(packed))
    assert made.returncode == 0, made.stderr
    mid_entry = tmp_path / "mid-entry.msgpack"
    mid_entry.write_bytes(packed.read_bytes()[:-20])
    target = server_factory()
    last = len(lines) - 1
    for path, words in (
        (tampered, "does not verify"),
        (head_cut, "event 1 is missing"),
        (tail_cut, f"ends at seq {last - 2}, but its header says the room ran to seq {last}"),
        (mid_line, f"line {last + 1} ends part way: the file was cut short"),
        (mid_entry, f"ends inside entry {last + 1}"),
    ):
        refused = await arun(target, "room", "import", str(path))
        assert refused.returncode == 1, refused
        assert words in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
        checked = await arun(target, "verify", str(path))
        assert checked.returncode in (1, 2), checked
        assert words in checked.stdout + checked.stderr, checked
    listing = await arun(target, "room", "list", "--json")
    assert json.loads(listing.stdout) == [], "nothing was stored by a refused import"


async def test_archive_offline_then_read_only_when_served(server_factory: Any, clients: Any) -> None:
    server = server_factory()
    room, facts = await played_room(server, clients)
    await server.astop()
    archived = await arun(server, "room", "archive", room.id)
    assert archived.returncode == 0, archived.stderr
    again = await arun(server, "room", "archive", room.id)
    assert "already archived" in again.stdout
    server.start()

    ana = await clients.join(server.url, facts["ana_session"], "ana")
    assert ana.welcome["archived"] is True
    kinds = [e["kind"] for e in ana.welcome["history"]]
    assert kinds[-1] == "archive", "the history stays viewable, ending with the archive"
    assert "roll" in kinds
    seq = ana.welcome["seq"]
    for frame in (
        {"t": "roll", "intent": {"system": "dice", "formula": "1d6"}, "visibility": "public"},
        {"t": "resource", "name": "hope", "op": "spend", "n": 1},
    ):
        reply = await ana.request(frame)
        assert reply["t"] == "error"
        assert reply["code"] == "archived"
        assert "read-only" in reply["message"]
    gm = await clients.join(server.url, room.gm, "gm")
    kick = await gm.request({"t": "kick", "participant": ana.id})
    assert kick["code"] == "archived"
    await ana.close()
    await gm.close()
    watcher = await clients.join(server.url, room.spectator, "watcher")
    assert watcher.welcome["seq"] == seq, "no join, leave or anything else was stored after the archive"


async def test_archive_through_the_running_server_and_delete_confirmation(
    server_factory: Any, clients: Any
) -> None:
    server = server_factory()
    room, _ = await played_room(server, clients)
    watcher = await clients.join(server.url, room.spectator, "watcher")
    archived = await arun(server, "room", "archive", room.id)
    assert archived.returncode == 0, archived.stderr
    assert "by the server" in archived.stdout
    event = await watcher.next("event", kind="archive")
    assert event["actor"]["name"] == "Operator (command line)"

    refused = await arun(server, "room", "delete", room.id, "--yes")
    assert refused.returncode == 1
    assert "stop it first" in refused.stderr
    await watcher.close()
    await server.astop()

    no_tty = await arun(server, "room", "delete", room.id)
    assert no_tty.returncode == 2
    assert "--yes" in no_tty.stderr
    deleted = await arun(server, "room", "delete", room.id, "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads((await arun(server, "room", "list", "--json")).stdout) == []
    missing = await arun(server, "room", "delete", room.id, "--yes")
    assert missing.returncode == 2
    assert "no room" in missing.stderr


async def test_presence_retention_hides_old_joins_from_fresh_welcomes_only(
    server_factory: Any, clients: Any
) -> None:
    # 0.00002 days is 1.7 seconds: joins older than that drop out of fresh histories.
    server = server_factory(TABLERELAY_PRESENCE_DAYS="0.00002")
    room = await server.acreate_room("Retention")
    gm = await clients.join(server.url, room.gm, "gm")
    resume = {"epoch": gm.welcome["epoch"], "seq": gm.welcome["seq"]}
    ana = await clients.join(server.url, room.player, "ana", name="Ana")
    await ana.close()
    await asyncio.sleep(2.5)
    ack = await gm.roll({"system": "dice", "formula": "1d6"})

    fresh = await clients.join(server.url, room.spectator, "fresh")
    kinds = [e["kind"] for e in fresh.welcome["history"]]
    assert "roll" in kinds
    assert "join" not in kinds[:-1], kinds  # only the watcher's own join is that recent
    assert fresh.welcome["seq"] >= ack["seq"]
    resumed = await Client.join(server.url, room.gm, "gm-resume", resume=resume)
    try:
        gap = [e["seq"] for e in resumed.welcome["history"]]
        assert gap == list(range(resume["seq"] + 1, resumed.welcome["seq"] + 1)), "a resume stays exact"
        assert resumed.welcome["recovered"] is True
    finally:
        await resumed.close()


def _delete_on_a_terminal(server: Server, room_id: str, typed: str) -> tuple[int, str]:
    """``room delete`` with a real pseudo-terminal as its stdin: what it printed, and its exit status."""
    import os
    import pty
    import select

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [tablerelay_bin(), "room", "delete", room_id, "--data", str(server.data)],
        env=server.env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    seen = b""
    try:
        while b"to delete it:" not in seen:
            ready, _, _ = select.select([leader], [], [], 30)
            assert ready, f"no question within 30 s; saw {seen!r}"
            seen += os.read(leader, 4096)
        os.write(leader, typed.encode() + b"\n")
        code = proc.wait(30)
        while True:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if not ready:
                break
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
    return code, seen.decode(errors="replace")


async def test_delete_asks_on_a_terminal_and_only_the_room_id_confirms(
    server_factory: Any, clients: Any
) -> None:
    server = server_factory()
    room, _ = await played_room(server, clients)
    await server.astop()
    code, shown = await asyncio.to_thread(_delete_on_a_terminal, server, room.id, "yes")
    assert code == 1, shown
    assert "for good" in shown
    assert "Nothing was deleted" in shown
    assert len(json.loads((await arun(server, "room", "list", "--json")).stdout)) == 1
    code, shown = await asyncio.to_thread(_delete_on_a_terminal, server, room.id, room.id)
    assert code == 0, shown
    assert "Deleted room" in shown
    assert json.loads((await arun(server, "room", "list", "--json")).stdout) == []
