"""The server in-process over real sockets: gapless delivery while clients join and resume under load,
and no hidden value in any byte outside the audience or in any log line."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from relay.core.room import Resolver
from relay.settings import logs
from relay.settings.config import Config, Limits
from relay.shell.serve import run
from relay.shell.server import Relay
from relay.storage.sqlite.db import connect as db_connect
from relay.storage.sqlite.db import create_room_sync
from relay.trust import tokens

POWER = {"system": "drawsteel.power", "characteristic": 1}


class Running:
    # Set by ``serving``, which starts the server in this process; a server started otherwise has neither.
    relay: Relay
    logs: io.StringIO

    def __init__(self, config: Config, url: str, secret: bytes) -> None:
        self.config = config
        self.url = url
        self.secret = secret

    def room(self) -> str:
        conn = db_connect(self.config.db_path)
        try:
            return create_room_sync(conn, "Test", fear_max=12, hope_max=6, max_rooms=100).id
        finally:
            conn.close()

    def token(self, room: str, role: str, sub: str | None = None) -> str:
        return tokens.issue(self.secret, room, role, sub=sub)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Running]:
    async with serving(tmp_path) as running:
        yield running


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, resolve: Resolver | None = None) -> AsyncIterator[Running]:
    """The server in this process, logging at debug level to ``running.logs``."""
    log_buffer = io.StringIO()
    logs.configure("json", "debug", stream=log_buffer)
    config = Config(
        host="127.0.0.1",
        port=0,
        data=tmp_path / "data",
        secret="test-secret-" + "x" * 40,
        limits=Limits(rate=100_000, burst=100_000, send_queue=100_000),
        # A resolver of the test's own draws no dice from a fair key: fair dice resolve with the rules core.
        fair_dice=resolve is None,
    )
    stop = asyncio.Event()
    ready: asyncio.Future[tuple[int, Relay]] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        run(
            config,
            stop,
            resolve=resolve,
            on_ready=lambda srv, relay: ready.set_result((srv.sockets[0].getsockname()[1], relay)),
        )
    )
    port, relay = await asyncio.wait_for(ready, 10)
    running = Running(config, f"ws://127.0.0.1:{port}/ws", tokens.load_secret(config.data, config.secret))
    running.relay = relay
    running.logs = log_buffer
    try:
        yield running
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)


def decoded(data: str | bytes) -> dict[str, Any]:
    """A frame from the relay, which sends every frame as a binary MessagePack map."""
    assert isinstance(data, bytes), data
    frame = msgpack.unpackb(data, raw=False)
    assert isinstance(frame, dict), frame
    return frame


async def hello(url: str, token: str, **extra: Any) -> tuple[ClientConnection, dict[str, Any]]:
    ws = await connect(url, max_size=None, max_queue=None)
    await ws.send(msgpack.packb({"t": "hello", "v": 1, "token": token, **extra}))
    welcome = decoded(await ws.recv())
    assert welcome["t"] == "welcome", welcome
    return ws, welcome


async def collect_until(ws: ClientConnection, last: int) -> list[dict[str, Any]]:
    events = []
    while True:
        frame = decoded(await asyncio.wait_for(ws.recv(), 10))
        if frame["t"] == "event":
            events.append(frame)
            if frame["seq"] >= last:
                return events


async def test_joining_and_resuming_under_load_is_gapless(server: Running) -> None:
    room = server.room()
    gm, _ = await hello(server.url, server.token(room, "gm"))
    rolls = 400
    acks: list[int] = []

    async def roller() -> None:
        for i in range(rolls):
            await gm.send(
                msgpack.packb({"t": "roll", "id": f"r{i}", "intent": POWER, "visibility": "public"})
            )
            if i % 20 == 0:
                await asyncio.sleep(0.005)

    async def read_acks() -> None:
        while len(acks) < rolls:
            frame = decoded(await gm.recv())
            if frame["t"] == "ack":
                acks.append(frame["seq"])

    reader = asyncio.create_task(read_acks())
    writer = asyncio.create_task(roller())
    joined: list[tuple[int, dict[str, Any], ClientConnection]] = []
    first_ws, first = await hello(server.url, server.token(room, "spectator"))
    for k in range(6):
        await asyncio.sleep(0.03)
        if k % 2:
            ws, welcome = await hello(server.url, server.token(room, "spectator"))
            joined.append((-1, welcome, ws))
        else:
            resume_at = max(0, first["seq"] + k)
            ws, welcome = await hello(
                server.url,
                server.token(room, "spectator"),
                resume={"epoch": first["epoch"], "seq": resume_at},
            )
            joined.append((resume_at, welcome, ws))
    await writer
    await reader
    last = max(acks)
    assert sorted(acks) == acks, "acks come back in seq order"
    for resume_at, welcome, ws in [(-1, first, first_ws), *joined]:
        history = [e["seq"] for e in welcome["history"]]
        if resume_at >= 0 and welcome["recovered"]:
            assert history == list(range(resume_at + 1, welcome["seq"] + 1)), "exactly the gap"
        live = [e["seq"] for e in await collect_until(ws, last)]
        seqs = history + live
        start = seqs[0]
        # Joins and leaves of the other watchers are interleaved; every seq must appear exactly once.
        assert seqs == list(range(start, seqs[-1] + 1)), f"gap or duplicate: {seqs[:5]}…"
        assert live[0] == welcome["seq"] + 1 if live else True
        await ws.close()
    await gm.close()


async def test_hidden_values_never_reach_outsiders_or_logs(server: Running) -> None:
    room = server.room()
    gm, _ = await hello(server.url, server.token(room, "gm"))
    player, _ = await hello(server.url, server.token(room, "player"))
    spectator, _ = await hello(server.url, server.token(room, "spectator"))
    raw: list[bytes] = []
    secret_label = "TOPSECRET-LABEL-7d1c"
    await player.send(
        msgpack.packb(
            {
                "t": "roll",
                "id": "hidden",
                "intent": {"system": "drawsteel.power", "characteristic": 3, "bonus": 2},
                "visibility": "blind",
                "label": secret_label,
            }
        )
    )
    seq = None
    while seq is None:
        data = await asyncio.wait_for(spectator.recv(), 10)
        assert isinstance(data, bytes)
        raw.append(data)
        frame = msgpack.unpackb(data, raw=False)
        if frame.get("kind") == "roll":
            seq = frame["seq"]
            assert frame["sealed"] is True
    # The roller of a blind roll sees only the placeholder too.
    while True:
        frame = decoded(await asyncio.wait_for(player.recv(), 10))
        if frame.get("kind") == "roll":
            assert frame["sealed"] is True
            assert "label" not in frame
            break
    full = None
    while full is None:
        frame = decoded(await asyncio.wait_for(gm.recv(), 10))
        if frame.get("kind") == "roll":
            full = frame
    assert full["label"] == secret_label
    nonce_hex = None
    await asyncio.sleep(0.2)
    outsider = b"".join(raw)
    assert secret_label.encode() not in outsider
    assert b"drawsteel" not in outsider, "not even the system"
    assert b"characteristic" not in outsider
    log_text = server.logs.getvalue()
    assert secret_label not in log_text
    assert "characteristic" not in log_text
    for line in log_text.splitlines():
        record = json.loads(line)
        assert "label" not in record
        assert "intent" not in record
        assert "result" not in record
    # The reveal then publishes blob and nonce to everyone.
    await gm.send(msgpack.packb({"t": "reveal", "id": "v", "seq": seq}))
    while nonce_hex is None:
        frame = decoded(await asyncio.wait_for(spectator.recv(), 10))
        if frame.get("kind") == "reveal":
            nonce_hex = frame["nonce"].hex()
            body = msgpack.unpackb(frame["blob"], raw=False)
            assert body["label"] == secret_label
    assert nonce_hex not in server.logs.getvalue()
    for ws in (gm, player, spectator):
        await ws.close()


async def test_http_endpoints(server: Running) -> None:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", int(server.url.rsplit(":", 1)[1].split("/")[0])
    )
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    response = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"application/json" in head
    status = json.loads(body)
    assert status["status"] == "ok"
    assert set(status["loop_lag"]) == {"p50_ms", "p99_ms", "max_ms", "samples"}


async def test_stopping_finishes_appends_acks_them_and_closes_with_1001(tmp_path: Path) -> None:
    from relay.storage.sqlite.log import SqliteLog

    logs.configure("json", "info", stream=io.StringIO())
    config = Config(
        host="127.0.0.1",
        port=0,
        data=tmp_path / "data",
        secret="test-secret-" + "y" * 40,
        limits=Limits(rate=100_000, burst=100_000),
    )
    stop = asyncio.Event()
    ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        run(config, stop, on_ready=lambda srv, relay: ready.set_result(srv.sockets[0].getsockname()[1]))
    )
    port = await asyncio.wait_for(ready, 10)
    running = Running(config, f"ws://127.0.0.1:{port}/ws", tokens.load_secret(config.data, config.secret))
    room = running.room()
    ws, _ = await hello(running.url, running.token(room, "gm"))
    for i in range(200):
        await ws.send(msgpack.packb({"t": "roll", "id": f"r{i}", "intent": POWER, "visibility": "public"}))
    acked: list[int] = []
    events: list[int] = []
    async for data in ws:
        if not stop.is_set():
            stop.set()  # the first frame back: the server is working through the rolls
        frame = decoded(data)
        if frame["t"] == "ack":
            acked.append(frame["seq"])
        elif frame["t"] == "event":
            events.append(frame["seq"])
    assert ws.close_code == 1001
    await asyncio.wait_for(task, 20)
    assert len(acked) > 1, "the rolls under way when the signal came were finished"
    log = SqliteLog(config.db_path)
    try:
        stored = {r["seq"]: r for r in await log.read(room, 0, 10_000)}
    finally:
        await log.close()
    for seq in acked:
        assert stored[seq]["kind"] == "roll", "everything acknowledged is stored"
    assert set(events) <= set(stored)


def test_settle_gc_freezes_start_up_objects_and_spaces_young_collections() -> None:
    # In a child process: freezing is process-wide and would change this test run's collector.
    probe = (
        "import gc; from relay.shell.serve import GC_YOUNG, settle_gc; settle_gc(); "
        "print(gc.get_freeze_count(), gc.get_threshold()[0] == GC_YOUNG)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    frozen, spaced = out.stdout.split()
    assert int(frozen) > 1000, "the modules loaded at start-up are frozen out of later collections"
    assert spaced == "True"


async def test_a_socket_closed_for_an_oversize_frame_leaves_no_cycle_behind(server: Running) -> None:
    # websockets keeps the parser's exception on the protocol object, and its traceback held the
    # protocol: every socket closed with 1009 waited for a full collection, with its buffers.
    from websockets.server import ServerProtocol

    room = server.room()
    gc.collect()  # cycles from before this test out of the way
    sockets = []
    for _ in range(3):
        ws, _welcome = await hello(server.url, server.token(room, "player"))
        await ws.send(b"\x00" * (server.config.limits.max_frame + 1))
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 10)
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 1009
        sockets.append(ws)
    handlers = server.relay._handlers
    for _ in range(200):  # the server's handlers finish after the clients see the close
        if not handlers:
            break
        await asyncio.sleep(0.05)
    assert not handlers, "the closed sockets' handlers did not finish"
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        left = [o for o in gc.garbage if type(o) is ServerProtocol]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == [], "a server socket's protocol was left in a reference cycle"


async def test_a_result_with_no_canonical_encoding_is_answered_internal_and_never_stored(
    tmp_path: Path,
) -> None:
    # A rules result the signed encoding cannot hold (here a set, as a bug in a rules module might make)
    # is refused while the room makes the record: the roller gets ``internal`` and the log stays as it was,
    # instead of an event stored that could never be sent (spec/signing.md: no floats, only its types).
    def resolve(intent: Any) -> dict[str, Any]:
        if intent.get("bad"):
            return {"system": intent["system"], "total": 3, "faces": {1, 2}}
        return {"system": intent["system"], "total": 3, "third": 1 / 3}

    from relay.storage.sqlite.log import SqliteLog

    async with serving(tmp_path, resolve) as running:
        room = running.room()
        ws, welcome = await hello(running.url, running.token(room, "gm", sub="gm"))
        intent = {"system": "x", "bad": True}
        await ws.send(msgpack.packb({"t": "roll", "id": "r1", "intent": intent, "visibility": "gm"}))
        reply = decoded(await asyncio.wait_for(ws.recv(), 10))
        assert reply["t"] == "error", reply
        assert (reply["code"], reply["id"]) == ("internal", "r1")
        await ws.send(
            msgpack.packb({"t": "roll", "id": "r2", "intent": {"system": "x"}, "visibility": "public"})
        )
        frames = [decoded(await asyncio.wait_for(ws.recv(), 10)) for _ in range(2)]
        ack = next(f for f in frames if f["t"] == "ack")
        event = next(f for f in frames if f["t"] == "event")
        assert ack["seq"] == event["seq"] == welcome["seq"] + 1, "the refused roll took no seq"
        assert event["result"]["third"] == "0.3333333333333333"
        await ws.close()
        logged = running.logs.getvalue()
        assert '"event": "frame_failed"' in logged
        assert "Traceback" not in json.dumps(reply)
    log = SqliteLog(running.config.db_path)
    try:
        stored = await log.read(room, 0, 100)
    finally:
        await log.close()
    assert [r["kind"] for r in stored].count("roll") == 1
    assert all(r["request"] != "r1" for r in stored if r["kind"] == "roll")


async def test_a_roller_is_served_before_the_rest_of_its_room(server: Running) -> None:
    # Each stored roll moves its roller to the end of the room's subscribers, and fan-out serves from the
    # end: the roller's ack and event are written first (tests/relay/shell/test_fanout.py has the order).
    room = server.room()
    sockets = []
    for i in range(4):
        ws, _ = await hello(server.url, server.token(room, "player", sub=f"p{i}"))
        sockets.append(ws)
    handle = server.relay.rooms[room]
    for roller in (2, 0, 3):
        ws = sockets[roller]
        await ws.send(
            msgpack.packb({"t": "roll", "id": f"r{roller}", "intent": POWER, "visibility": "public"})
        )
        while decoded(await asyncio.wait_for(ws.recv(), 10)).get("t") != "ack":
            pass
        last = list(handle.subscribers.values())[-1]
        assert last.id == f"p{roller}"
    assert [s.id for s in handle.subscribers.values()] == ["p1", "p2", "p0", "p3"]
    for ws in sockets:
        await ws.close()


async def http_get(ws_url: str, path: str, host: str) -> tuple[int, bytes]:
    """One HTTP/1.1 request with the given Host header, read to the end (the server closes)."""
    port = int(ws_url.rsplit(":", 1)[1].split("/")[0])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode("latin-1"))
    data = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def test_the_foundry_zips_kept_are_few_whatever_host_the_requests_name(server: Running) -> None:
    # Each address the module is fetched by gets a zip naming it (about 80 KB); a thousand made-up Host
    # headers kept a thousand of them before.
    from relay.shell.http.routes import FOUNDRY_ZIPS_KEPT as kept

    for i in range(3 * kept):
        status, body = await http_get(server.url, "/foundry/tablerelay.zip", f"h{i}.example")
        assert status == 200, body[:80]
        assert body.startswith(b"PK"), "a zip"
    zips = server.relay.routes._foundry_zips
    assert list(zips) == [f"http://h{i}.example" for i in range(2 * kept, 3 * kept)]
    # A Host that cannot be an address is not put in the manifest: the server's own address is.
    status, body = await http_get(server.url, "/foundry/module.json", 'evil"</a>.example')
    assert status == 200
    assert json.loads(body)["download"] == server.relay.public_base + "/foundry/tablerelay.zip"
