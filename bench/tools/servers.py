"""Starting the three servers under test and naming their rooms for the client harness.

A *target* is what a harness process needs to reach one room: a URL, a token (the relay) or a room name
(the peers), and how many connections to open there. ``Server.targets(role, per_room)`` builds them for
each kind alike, so every benchmark is written once and run against all three servers.

The relay runs exactly as ``tablerelay serve`` runs in production (SQLite, default durability, info
logs), with three limits lifted so the suite measures the server rather than its guards: the per-socket
rate limit (a benchmark driver sends far more than 20 rolls per second on one socket), and the room and
member caps (10,000 sockets in one test).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
from websockets.asyncio.client import connect

from bench.tools.harness import ROOT, VENV_BIN, ServerProcess, start_server
from relay.settings.config import load
from relay.storage.sqlite.db import connect as db_connect
from relay.storage.sqlite.db import create_room_sync
from relay.trust import tokens

KINDS = ("relay", "bare", "socketio")
LABELS = {"relay": "tablerelay", "bare": "bare websockets", "socketio": "python-socketio"}
#: ``tablerelay``'s main, from the layout of today (relay.ops.cli) or of a revision before it (relay.cli).
LAUNCH = (
    "import importlib, os, relay; "
    "ops = os.path.isdir(os.path.join(relay.__path__[0], 'ops')); "
    "sys.exit(importlib.import_module('relay.ops.cli' if ops else 'relay.cli').main())"
)

# A typical roll: a Draw Steel power roll with Might 2 and an edge, public, labelled.
INTENT: dict[str, Any] = {"system": "drawsteel.power", "characteristic": 2, "edges": 1}
LABEL = "Mind Spike"

RELAY_ENV = {
    "TABLERELAY_RATE": "1000000",
    "TABLERELAY_BURST": "1000000",
    "TABLERELAY_MAX_MEMBERS": "100000",
    "TABLERELAY_MAX_ROOMS": "100000",
    "TABLERELAY_MAX_PER_IP": "1000000",  # every driver socket comes from 127.0.0.1
    "TABLERELAY_LOG_FORMAT": "json",
    # Fair dice (on by default) reveal a room's seed every 250 rolls, two events more (the reveal and the
    # next commitment) that a bench counting frames would take for deliveries; a window's first roll
    # commits the seed in the warm-up. Left out, they are 0.8% more events than the rolls measured.
    "TABLERELAY_SEED_ROLLS": "1000000000",
}


@dataclass
class Room:
    name: str  # the relay's room id, or the peer's room name
    gm: str = ""
    player: str = ""
    watchers: str = ""  # one spectator participant every receiver joins as (no join event per socket)


@dataclass
class Server:
    kind: str
    process: ServerProcess
    rooms: list[Room] = field(default_factory=list)
    secret: bytes = b""

    @property
    def pid(self) -> int:
        return self.process.pid

    def url(self, room: Room) -> str:
        port = self.process.port
        if self.kind == "relay":
            return f"ws://127.0.0.1:{port}/ws"
        if self.kind == "bare":
            return f"ws://127.0.0.1:{port}/r/{room.name}"
        return f"http://127.0.0.1:{port}"

    def add_rooms(self, count: int) -> list[Room]:
        """Make ``count`` more rooms (the relay: in its data folder, usable at once by the running server)."""
        made: list[Room] = []
        if self.kind == "relay":
            data = self.process.data
            assert data is not None
            config = load(overrides={"data": data})
            conn = db_connect(config.db_path, config.synchronous)
            try:
                for i in range(count):
                    info = create_room_sync(
                        conn, f"bench {len(self.rooms) + i}", fear_max=12, hope_max=6, max_rooms=100_000
                    )
                    made.append(
                        Room(
                            info.id,
                            gm=tokens.issue(self.secret, info.id, "gm", name="GM"),
                            player=tokens.issue(self.secret, info.id, "player"),
                            watchers=tokens.issue(
                                self.secret, info.id, "spectator", sub="bench-watchers", name="Watchers"
                            ),
                        )
                    )
            finally:
                conn.close()
        else:
            made = [Room(f"room{len(self.rooms) + i}") for i in range(count)]
        self.rooms.extend(made)
        return made

    def targets(self, role: str, rooms: list[Room], per_room: int) -> list[dict[str, Any]]:
        """Targets for harness ``role`` (receive | driver | roller) in each of ``rooms``."""
        out: list[dict[str, Any]] = []
        for room in rooms:
            target: dict[str, Any] = {"url": self.url(room), "room": room.name, "conns": per_room}
            if self.kind == "relay":
                target["token"] = {"receive": room.watchers, "driver": room.gm, "roller": room.player}[role]
                target["name"] = {"receive": "Watcher", "driver": "GM", "roller": "Roller"}[role]
            out.append(target)
        return out

    async def stop(self) -> None:
        await self.process.stop()
        if self.process.data is not None:
            shutil.rmtree(self.process.data, ignore_errors=True)


@dataclass
class Calibration:
    """One real relay roll event, captured at the start of a run: what the peers broadcast instead."""

    frame_size: int
    event: dict[str, Any]
    payload_file: Path  # the event as JSON (python-socketio emits it as an object)
    frame_file: Path  # the event as the relay sent it, MessagePack (the bare server broadcasts it)


async def start(
    kind: str,
    run_dir: Path,
    calibration: Calibration | None,
    tag: str,
    *,
    traced: Path | None = None,
    signing: bool = True,
    uvloop: bool = False,
    source: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> Server:
    """A fresh server of ``kind``; ``traced`` (relay only) runs it under tracemalloc, see relay_traced.

    ``signing=False`` starts the relay with event signing off (``TABLERELAY_SIGNING=off``), only so the
    signing section can measure what signing costs. ``source`` (relay only) runs the relay and rules code
    of another tree (an export of an earlier commit, for ``bench.studies.ab``); ``extra_env`` adds variables
    to its environment.
    """
    log = run_dir / f"{tag}-{kind}.log"
    if kind == "relay":
        data = Path(tempfile.mkdtemp(prefix="tablerelay-bench-", dir=run_dir))
        serve = ["serve", "--host", "127.0.0.1", "--port", "0", "--data", str(data)]
        env = {**RELAY_ENV, **(extra_env or {})}
        if source is not None:
            # Ahead of the editable install; the working directory (the signing child's first import
            # path) is that tree too.
            env["PYTHONPATH"] = str(source)
        if not signing:
            env["TABLERELAY_SIGNING"] = "off"
        if uvloop or source is not None:
            # Another tree's own command line, wherever its layout keeps it (relay.cli before the layer
            # folders), not the editable install's entry point. ``uvloop``: forced onto uvloop whatever the
            # configuration says (``event_loop = auto`` already takes it where installed), for A/B runs of
            # older revisions that predate the setting.
            start = ("import sys, uvloop; uvloop.install(); " if uvloop else "import sys; ") + LAUNCH
            argv = [str(VENV_BIN / "python"), "-c", start, *serve]
        elif traced is None:
            argv = [str(VENV_BIN / "tablerelay"), *serve]
        else:
            argv = [str(VENV_BIN / "python"), "-m", "bench.tools.relay_traced", *serve]
            env["BENCH_TRACE_OUT"] = str(traced)
        process = await start_server(kind, argv, log, env=env, data=data, cwd=source or ROOT)
        return Server(kind, process, secret=tokens.load_secret(data, None))
    assert calibration is not None
    python = str(VENV_BIN / "python")
    if kind == "bare":
        argv = [python, "-m", "bench.peers.bare_ws", "--frame", str(calibration.frame_file)]
    elif kind == "socketio":
        argv = [python, "-m", "bench.peers.socketio_server", "--payload", str(calibration.payload_file)]
    else:
        raise ValueError(kind)
    process = await start_server(kind, argv, log, env=dict(extra_env or {}))
    return Server(kind, process)


def as_json(event: dict[str, Any], **options: Any) -> str:
    """``event`` as JSON; its bytes (the signature) as hex, as a JSON client would have to carry them."""
    return json.dumps(event, default=lambda b: b.hex(), **options)


async def calibrate(run_dir: Path) -> Calibration:
    """Roll once on a fresh relay and keep the event frame it broadcast (its size and its content)."""
    server = await start("relay", run_dir, None, "calibrate")
    try:
        (room,) = server.add_rooms(1)
        async with connect(server.url(room), compression=None) as ws:
            await ws.send(msgpack.packb({"t": "hello", "v": 1, "token": room.gm, "name": "GM"}))
            # The relay speaks MessagePack in binary frames only.
            welcome = msgpack.unpackb(await asyncio.wait_for(ws.recv(decode=False), 10))
            if welcome.get("t") != "welcome":
                raise RuntimeError(f"calibration: expected a welcome, got {welcome}")
            roll = {"t": "roll", "id": "c1", "intent": INTENT, "visibility": "public", "label": LABEL}
            await ws.send(msgpack.packb(roll))
            while True:
                raw = await asyncio.wait_for(ws.recv(decode=False), 10)
                frame = msgpack.unpackb(raw)
                if frame.get("t") == "event" and frame.get("kind") == "roll":
                    break
    finally:
        await server.stop()
    payload_file = run_dir / "event.json"
    payload_file.write_text(as_json(frame))
    frame_file = run_dir / "event.msgpack"
    frame_file.write_bytes(raw)
    return Calibration(len(raw), frame, payload_file, frame_file)
