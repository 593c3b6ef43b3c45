"""A full disk under the data folder: rolls and spends are refused with ``store_full`` (a sentence, never
``internal``), nothing acknowledged is lost, the database stays whole, welcomes, resumes and /healthz keep
being served, the log says so once, and writes resume by themselves when space comes back.

The data folder is on a small tmpfs the test mounts itself (CI runs as root; without root the test is skipped
locally and fails in CI, where it must run), filled to the brim by a filler file.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.servers import Server
from tests.e2e.wire import Client, assert_sentence

DUALITY = {"system": "daggerheart.duality", "modifier": 0}
DISK = "4m"  # the tmpfs: the database, its WAL, the secret and the signing key, and the filler
ROLLS_BEFORE = 10
MOST_ROLLS = 500  # rolls tried on a full disk before the test gives up waiting for a refusal
REFUSED_MORE = 5  # further rolls refused while full: the log still says it once


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        why = f"cannot mount a tmpfs at {where}: {done.stderr.strip() or done.returncode}"
        if os.environ.get("CI"):
            pytest.fail(why + " (CI runs as root and must run this test)")
        pytest.skip(why)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(folder: Path) -> Path:
    """A filler file written until the filesystem has no byte left."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as f:
        for chunk in (1 << 16, 1 << 12, 1 << 9, 1):
            block = b"\0" * chunk
            while True:
                try:
                    if f.write(block) != chunk:
                        break
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    return filler


def refusal(reply: dict[str, Any]) -> None:
    assert reply["t"] == "error", reply
    assert reply["code"] == "store_full", reply
    assert_sentence(reply["message"])


async def roll(client: Client, label: str) -> dict[str, Any]:
    frame = {"t": "roll", "id": label, "intent": DUALITY, "visibility": "public", "label": label}
    return await client.request(frame)


def health(srv: Server) -> dict[str, Any]:
    status, _, body = srv.get("/healthz")
    assert status == 200, body
    answer: dict[str, Any] = json.loads(body)
    return answer


@pytest.mark.parametrize("writer", ["loop", "thread", "process"])
async def test_full_disk_refuses_writes_keeps_serving_and_recovers(
    server_factory: Callable[..., Server], clients: Any, tmp_path: Path, writer: str
) -> None:
    with tmpfs(tmp_path / "disk", DISK) as disk:
        # Rolls one after another until refused: a burst that is never answered with rate_limited.
        srv = server_factory(disk / "data", TABLERELAY_SQLITE_WRITER=writer, TABLERELAY_BURST="1000")
        room = await srv.acreate_room("Full disk")
        gm = await clients.join(srv.url, room.gm, "gm")
        player = await clients.join(srv.url, room.player, "player")
        epoch = gm.welcome["epoch"]
        acked: dict[str, int] = {}  # roll label -> its acked seq
        for i in range(ROLLS_BEFORE):
            reply = await roll(gm, f"before-{i}")
            assert reply["t"] == "ack", reply
            acked[f"before-{i}"] = reply["seq"]
        gain = await gm.request({"t": "resource", "name": "fear", "op": "gain", "n": 3})
        assert gain["t"] == "ack", gain
        assert (await asyncio.to_thread(health, srv))["store"] == "ok"

        filler = fill(disk)
        refused = None
        for i in range(MOST_ROLLS):  # the WAL may still hold room for a few
            reply = await roll(gm, f"full-{i}")
            if reply["t"] == "ack":
                acked[f"full-{i}"] = reply["seq"]
                continue
            refused = reply
            break
        assert refused is not None, f"{MOST_ROLLS} rolls stored on a full disk"
        refusal(refused)
        for i in range(REFUSED_MORE):
            refusal(await roll(player, f"refused-{i}"))
        refusal(await gm.request({"t": "resource", "name": "fear", "op": "spend", "n": 1}))
        healthz = await asyncio.to_thread(health, srv)
        assert (healthz["status"], healthz["store"]) == ("degraded", "full")

        # Still served: a fresh welcome (its join cannot be stored), a resume with exactly the gap, pings.
        spectator = await clients.join(srv.url, room.spectator, "spectator")
        seen = max(f["seq"] for f in gm.frames if f.get("t") == "event")  # a roll's Fear comes after it
        assert spectator.welcome["seq"] == seen
        resumed = await clients.join(
            srv.url, gm.welcome["session"], "gm-again", resume={"epoch": epoch, "seq": 0}
        )
        assert resumed.welcome["recovered"] is True
        assert [e["seq"] for e in resumed.welcome["history"]] == list(range(1, resumed.welcome["seq"] + 1))
        await player.ping()

        assert srv.running
        assert len(srv.logged("store_full")) == 1, srv.log_text()[-3000:]
        assert not srv.logged("append_failed")
        assert "Traceback" not in srv.log_text()
        for c in (gm, player, spectator, resumed):
            assert not [f for f in c.frames if f.get("t") == "error" and f.get("code") == "internal"]

        # Space again: the next roll is stored, without a restart.
        filler.unlink()
        reply = await roll(player, "after")
        assert reply["t"] == "ack", reply
        acked["after"] = reply["seq"]
        spend = await gm.request({"t": "resource", "name": "fear", "op": "spend", "n": 1})
        assert spend["t"] == "ack", spend
        assert (await asyncio.to_thread(health, srv))["store"] == "ok"
        assert len(srv.logged("store_writable")) == 1
        await asyncio.gather(*(c.close() for c in (gm, player, spectator, resumed)))
        assert await srv.astop() == 0

        db = disk / "data" / "tablerelay.sqlite3"
        with contextlib.closing(sqlite3.connect(db)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]

        # Every acknowledged roll is there after a restart, once, at its acked seq.
        srv.start()
        back = await clients.join(srv.url, room.gm, "gm-back", resume={"epoch": epoch, "seq": 0})
        rolls = [e for e in back.welcome["history"] if e["kind"] == "roll"]
        assert {e["label"]: e["seq"] for e in rolls} == acked
        assert len(rolls) == len(acked)
        spends = [
            e["delta"] for e in back.welcome["history"] if e["kind"] == "resource" and not e.get("cause")
        ]
        assert spends == [3, -1]  # the gain and the spend made with space; the refused spend is not there
        await back.close()
        assert await srv.astop() == 0
