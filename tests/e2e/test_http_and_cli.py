"""The HTTP endpoints, the welcome, pings, the command line against a running server, and the log format."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from tests.e2e.servers import Room, Server, parse_log_line
from tests.e2e.wire import Client, pack

POWER = {"system": "drawsteel.power", "characteristic": 2, "edges": 1}


async def test_healthz(server: Server) -> None:
    status, _, _ = await server.aget("/healthz")
    assert status == 200


async def test_watch_page_is_served(server: Server) -> None:
    status, ctype, body = await server.aget("/watch")
    assert status == 200
    assert ctype.startswith("text/html"), ctype
    assert "<html" in body.lower()


def metric_lines(text: str, name_part: str, suffix: str = "") -> list[str]:
    """Sample lines whose metric name contains ``name_part`` (and ends with ``suffix``)."""
    lines = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{")[0].split(" ")[0]
        if name_part in name and name.endswith(suffix):
            lines.append(line)
    return lines


async def test_metrics_count_connections_events_rolls_and_errors(
    server: Server, room: Room, clients: Any
) -> None:
    p = await clients.join(server.url, room.player, "p")
    await p.roll(POWER)
    await p.send_raw(pack({"t": "dance", "id": "metrics-bad"}))
    assert (await p.answer("metrics-bad"))["code"] == "bad_frame"
    status, ctype, text = await server.aget("/metrics")
    assert status == 200
    assert ctype.startswith("text/plain"), ctype
    assert metric_lines(text, "connection"), "no connections metric:\n" + text
    assert metric_lines(text, "event"), "no events metric:\n" + text
    rolls = [line for line in metric_lines(text, "roll", "_total") if 'system="drawsteel.power"' in line]
    assert rolls, "no rolls-by-system metric:\n" + text
    assert any(float(line.rsplit(" ", 1)[1]) >= 1 for line in rolls), rolls
    errors = [line for line in metric_lines(text, "error", "_total") if 'code="bad_frame"' in line]
    assert errors, "no errors-by-code metric:\n" + text
    assert any(float(line.rsplit(" ", 1)[1]) >= 1 for line in errors), errors
    # Every stored event went through a SQLite transaction: the batch-size histogram counted them.
    batches = metric_lines(text, "tablerelay_append_batch_size", "_count")
    assert batches, "no append batch metric:\n" + text
    assert float(batches[0].rsplit(" ", 1)[1]) >= 1, "append batches not recorded:\n" + text


async def test_welcome_describes_the_room_and_the_client(server: Server, room: Room, clients: Any) -> None:
    gm = await clients.join(server.url, room.gm, "gm", name="Gwen")
    p = await clients.join(server.url, room.player, "p", name="Ana")
    w = p.welcome
    assert w["room"] == {"id": room.id, "name": room.name}, w["room"]
    assert w["you"]["role"] == "player", w["you"]
    assert w["you"]["name"] == "Ana", w["you"]
    assert isinstance(w["you"]["id"], str), w["you"]
    assert isinstance(w["session"], str), w
    assert w["session"] != room.player, "the session token names the participant; the invite does not"
    assert isinstance(w["seq"], int), w
    assert w["state"]["fear"] == 0, w["state"]
    assert isinstance(w["state"]["hope"], dict), w["state"]
    assert isinstance(w["state"]["members"], list), w["state"]
    assert p.id in json.dumps(w["state"]["members"], default=str), "the welcome's members must include me"
    assert isinstance(w["history"], list), w
    assert w["recovered"] is False, "no resume was asked for"
    assert [ev["seq"] for ev in w["history"]][-1:] == [w["seq"]], "the history ends at the latest event"
    joined = await gm.next("event", kind="join", where=lambda f: f["actor"]["id"] == p.id)
    assert joined["actor"]["name"] == "Ana", joined
    assert joined["actor"]["role"] == "player", joined


async def test_ping_is_answered_with_pong(server: Server, room: Room, clients: Any) -> None:
    s = await clients.join(server.url, room.spectator, "spec")
    reply = await s.request({"t": "ping", "id": "are-you-there"})
    assert reply == {"t": "pong", "id": "are-you-there"}


async def test_per_message_compression_is_off(server: Server, room: Room, clients: Any) -> None:
    c = await clients.join(server.url, room.spectator, "spec")  # the client offers permessage-deflate
    assert c.ws.protocol.extensions == [], "the server must not accept per-message compression"
    assert "permessage-deflate" not in (c.ws.response.headers.get("Sec-WebSocket-Extensions") or "")


async def test_rooms_created_while_running_are_usable_at_once(server: Server, clients: Any) -> None:
    room = await server.acreate_room("Friday game")
    assert room.watch.endswith("/watch#" + room.spectator), room.watch
    listing = await asyncio.to_thread(server.cli, "room", "list", "--json")
    assert room.id in listing.stdout
    json.loads(listing.stdout)
    gm = await clients.join(server.url, room.gm, "gm")
    token = await asyncio.to_thread(server.token, room.id, "player", name="Cli Player")
    p = await clients.join(server.url, token, "p")
    assert p.welcome["room"]["id"] == room.id
    assert p.me["name"] == "Cli Player"
    ack = await p.roll(POWER, "public", "first roll")
    ev = await gm.event(ack["seq"])
    assert ev["label"] == "first roll"


async def test_log_lines_are_json(server: Server, room: Room, clients: Any) -> None:
    await clients.join(server.url, room.spectator, "spec")
    await asyncio.sleep(0.2)
    assert server.log_lines
    for line in server.log_lines:
        record = parse_log_line(line)
        assert record is not None, f"not a JSON log line: {line!r}"
        assert isinstance(record.get("event"), str), line
    listening = [parse_log_line(line) for line in server.log_lines]
    started = next(r for r in listening if r and r.get("event") == "listening")
    assert started["url"] == server.url
    assert started["event_loop"] == "uvloop", (
        "serve runs on uvloop, a dependency, by default (relay.shell.loops)"
    )
    assert re.fullmatch(r"ws://127\.0\.0\.1:\d+/ws", server.url), server.url


async def test_a_gm_token_is_one_participant_on_every_socket(server: Server, room: Room) -> None:
    # Invites make a new participant per connection; the GM token from `room create` (and `token --role
    # gm`) names one, so a second tab or a reconnect is the same GM, not a second one.
    first = await Client.join(server.url, room.gm, "gm-tab-1", name="Mercer")
    second = await Client.join(server.url, room.gm, "gm-tab-2")
    try:
        assert first.id == second.id
        assert second.me["name"] == "Mercer"
        members = [m for m in second.welcome["state"]["members"] if m["role"] == "gm"]
        assert [m["id"] for m in members] == [first.id]
    finally:
        await first.close()
        await second.close()
    minted = server.token(room.id, "gm")
    third = await Client.join(server.url, minted, "gm-minted", name="Co-GM")
    try:
        assert third.id not in {first.id}
        assert third.me["role"] == "gm"
        assert third.me["name"] == "Co-GM"
    finally:
        await third.close()
