"""The NATS store at its byte limit (``nats_max_bytes``): the events stream refuses new messages (discard
policy new), and the relay answers rolls and spends with ``store_full`` (a sentence, never ``internal``),
keeps every acknowledged event, keeps welcoming, resuming and answering /healthz (which says the store is
full), logs it once, and stores again as soon as the stream has room, without a restart."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js import api

from relay.storage.nats.log import NatsLog
from relay.storage.nats.stream import STREAM
from tests.cluster.conftest import signing_key_pem
from tests.cluster.natsd import NatsServer, free_port
from tests.e2e.servers import Server, server_env
from tests.e2e.wire import Client, assert_sentence

DUALITY = {"system": "daggerheart.duality", "modifier": 0}
LIMIT = 64 * 1024  # the stream's bytes: a few dozen rolls
MOST_ROLLS = 400
REFUSED_MORE = 5


@pytest.fixture
def solo(tmp_path: Path) -> Iterator[NatsServer]:
    """A JetStream server of its own: the stream is created here with the test's byte limit."""
    server = NatsServer("solo", tmp_path, free_port(), 0, [])
    server.start()
    server.wait_ready(time.monotonic() + 20)
    yield server
    server.stop()


def refusal(reply: dict[str, Any]) -> None:
    assert reply["t"] == "error", reply
    assert reply["code"] == "store_full", reply
    assert_sentence(reply["message"])


async def roll(client: Client, label: str) -> dict[str, Any]:
    return await client.request(
        {"t": "roll", "id": label, "intent": DUALITY, "visibility": "public", "label": label}
    )


async def health(node: Server) -> dict[str, Any]:
    status, _, body = await node.aget("/healthz")
    assert status == 200, body
    answer: dict[str, Any] = json.loads(body)
    return answer


async def set_limit(store: str, max_bytes: int) -> None:
    """What an operator does (``nats stream edit --max-bytes``) to give the stream room again."""
    nc = await nats.connect(store)
    try:
        js = nc.jetstream()
        config = (await js.stream_info(STREAM)).config
        config.max_bytes = max_bytes
        await js.update_stream(config)
    finally:
        await nc.close()


async def test_a_stream_at_its_byte_limit_refuses_writes_keeps_serving_and_recovers(
    solo: NatsServer, clients: Any, tmp_path: Path
) -> None:
    env = server_env(
        secrets.token_hex(24),
        {
            "TABLERELAY_STORE": solo.url,
            "TABLERELAY_SIGNING_KEY": signing_key_pem(),
            "TABLERELAY_NATS_MAX_BYTES": str(LIMIT),
            "TABLERELAY_BURST": "1000",  # rolls one after another until refused: never rate_limited
        },
    )
    node = Server(data=tmp_path / "node", env=env).start()
    try:
        room = await node.acreate_room("Full stream")
        gm = await clients.join(node.url, room.gm, "gm")
        player = await clients.join(node.url, room.player, "player")
        epoch = gm.welcome["epoch"]
        gain = await gm.request({"t": "resource", "name": "fear", "op": "gain", "n": 12})
        assert gain["t"] == "ack", gain
        acked: dict[str, int] = {}
        refused = None
        for i in range(MOST_ROLLS):
            reply = await roll(gm, f"r-{i}")
            if reply["t"] == "ack":
                acked[f"r-{i}"] = reply["seq"]
                continue
            refused = reply
            break
        assert refused is not None, f"{MOST_ROLLS} rolls stored in a stream of {LIMIT} bytes"
        assert len(acked) >= 5  # the limit was reached by rolls, not before them
        refusal(refused)
        for i in range(REFUSED_MORE):
            refusal(await roll(player, f"refused-{i}"))
        # A spend's event is smaller than a roll's: the bytes a refused roll left may still hold one or two
        # (JetStream refuses by the message's size), never many.
        spent = 0
        while (spend := await gm.request({"t": "resource", "name": "fear", "op": "spend", "n": 1}))[
            "t"
        ] == "ack":
            spent += 1
            assert spent < 5, "a full stream took five spends"
        refusal(spend)
        healthz = await health(node)
        assert (healthz["status"], healthz["store"]) == ("degraded", "full")

        spectator = await clients.join(node.url, room.spectator, "spectator")
        seen = max(f["seq"] for f in gm.frames if f.get("t") == "event")  # a roll's Fear comes after it
        assert spectator.welcome["seq"] == seen
        resumed = await clients.join(
            node.url, gm.welcome["session"], "gm-again", resume={"epoch": epoch, "seq": 0}
        )
        assert resumed.welcome["recovered"] is True
        assert [e["seq"] for e in resumed.welcome["history"]] == list(range(1, seen + 1))
        await player.ping()
        assert node.running
        assert len(node.logged("store_full")) == 1, node.log_text()[-3000:]
        assert not node.logged("append_failed")
        assert not node.logged("append_gave_up")
        assert "Traceback" not in node.log_text()
        for c in (gm, player, spectator, resumed):
            assert not [f for f in c.frames if f.get("t") == "error" and f.get("code") == "internal"]

        await set_limit(solo.url, LIMIT * 4)  # room again: stored without a restart
        reply = await roll(player, "after")
        assert reply["t"] == "ack", reply
        acked["after"] = reply["seq"]
        spend = await gm.request({"t": "resource", "name": "fear", "op": "spend", "n": 1})
        assert spend["t"] == "ack", spend
        assert (await health(node))["store"] == "ok"
        assert len(node.logged("store_writable")) == 1

        back = await clients.join(node.url, room.gm, "gm-back", resume={"epoch": epoch, "seq": 0})
        rolls = [e for e in back.welcome["history"] if e["kind"] == "roll"]
        assert {e["label"]: e["seq"] for e in rolls} == acked  # every acked roll once, at its seq
        assert len(rolls) == len(acked)
        spends = [
            e["delta"] for e in back.welcome["history"] if e["kind"] == "resource" and not e.get("cause")
        ]
        assert spends == [12] + [-1] * (spent + 1)  # the refused spend is not there
        await asyncio.gather(*(c.close() for c in (gm, player, spectator, resumed, back)))
        assert await node.astop() == 0
    finally:
        if node.running:
            node.kill()


async def test_the_byte_limit_is_set_with_discard_new_and_a_second_start_changes_nothing(
    solo: NatsServer,
) -> None:
    first = await NatsLog.connect(solo.url, max_bytes=LIMIT, follow=False)
    await first.close()
    second = await NatsLog.connect(solo.url, max_bytes=LIMIT, follow=False)
    try:
        info = await second.js.stream_info(STREAM)
        assert (info.config.max_bytes, info.config.discard) == (LIMIT, api.DiscardPolicy.NEW)
    finally:
        await second.close()
