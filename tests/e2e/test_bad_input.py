"""Hostile and broken input: each is refused with the right code, changes nothing, and harms nobody else."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import jwt
import pytest

from tests.e2e.servers import Room, Server
from tests.e2e.wire import Client, Refused, assert_sentence, pack

POWER = {"system": "drawsteel.power", "characteristic": 1}


async def assert_room_untouched(
    server: Server, watcher: Client, mark: int, allowed: frozenset[str] = frozenset()
) -> None:
    """The server is up; since ``mark`` the watcher got only its pong (and joins/leaves of ``allowed``)."""
    await asyncio.sleep(0.2)
    await server.assert_healthy()
    await watcher.ping()
    for f in watcher.frames[mark:]:
        if isinstance(f, dict) and f.get("t") == "pong":
            continue
        ok = (
            isinstance(f, dict)
            and f.get("t") == "event"
            and f.get("kind") in ("join", "leave")
            and f["actor"]["id"] in allowed
        )
        assert ok, f"a bystander received {f!r}"


@pytest.fixture
async def table(server: Server, room: Room, clients: Any) -> tuple[Client, Client]:
    """A watcher (a player who only listens) and an attacker (a player) in a fresh room."""
    watcher = await clients.join(server.url, room.player, "watcher")
    attacker = await clients.join(server.url, room.player, "attacker")
    await watcher.next("event", kind="join", where=lambda f: f["actor"]["id"] == attacker.id)
    return watcher, attacker


MALFORMED: list[tuple[str, Any, bool]] = [
    # (what, the frame (bytes/str sent as is, anything else packed), whether the error must echo its id)
    ("a text frame", '{"t": "ping", "id": "x1"}', False),
    ("bytes that are not MessagePack", b"\xc1\xc1\xc1", False),
    ("a MessagePack list", [1, 2, 3], False),
    ("a MessagePack string", "hello", False),
    ("a MessagePack integer", 42, False),
    ("a map without t", {"id": "x2"}, False),
    ("a map with a non-string t", {"t": 7, "id": "x3"}, False),
    ("an unknown t", {"t": "dance", "id": "x4"}, True),
    ("a roll without id", {"t": "roll", "intent": POWER, "visibility": "public"}, False),
    ("a roll with an integer id", {"t": "roll", "id": 5, "intent": POWER, "visibility": "public"}, False),
    (
        "a roll with a 65-char id",
        {"t": "roll", "id": "i" * 65, "intent": POWER, "visibility": "public"},
        False,
    ),
    ("a roll without intent", {"t": "roll", "id": "x5", "visibility": "public"}, True),
    ("a roll without visibility", {"t": "roll", "id": "x6", "intent": POWER}, True),
    (
        "a roll with an unknown visibility",
        {"t": "roll", "id": "x7", "intent": POWER, "visibility": "secret"},
        True,
    ),
    (
        "a roll with a 201-char label",
        {"t": "roll", "id": "x8", "intent": POWER, "visibility": "public", "label": "L" * 201},
        True,
    ),
    (
        "a roll with an integer label",
        {"t": "roll", "id": "x9", "intent": POWER, "visibility": "public", "label": 9},
        True,
    ),
    ("a reveal with a string seq", {"t": "reveal", "id": "x10", "seq": "3"}, True),
    ("a reveal without seq", {"t": "reveal", "id": "x11"}, True),
    (
        "a resource with an unknown name",
        {"t": "resource", "id": "x12", "name": "gold", "op": "gain", "n": 1},
        True,
    ),
    (
        "a resource with an unknown op",
        {"t": "resource", "id": "x13", "name": "hope", "op": "steal", "n": 1},
        True,
    ),
    (
        "a resource with a negative n",
        {"t": "resource", "id": "x14", "name": "hope", "op": "spend", "n": -1},
        True,
    ),
    (
        "a resource with a string n",
        {"t": "resource", "id": "x15", "name": "hope", "op": "spend", "n": "1"},
        True,
    ),
    ("a ping without id", {"t": "ping"}, False),
]


async def test_malformed_frames_are_answered_with_bad_frame(
    server: Server, table: tuple[Client, Client]
) -> None:
    watcher, attacker = table
    mark = watcher.mark()
    for what, frame, echoes in MALFORMED:
        before = attacker.mark()
        await attacker.send_raw(frame if isinstance(frame, bytes | str) else pack(frame))
        err = await attacker.next("error")
        assert err["code"] == "bad_frame", f"{what}: {err}"
        assert_sentence(err["message"])
        if echoes:
            assert err.get("id") == frame["id"], f"{what}: the error must name the request id: {err}"
        assert not [
            f for f in attacker.frames[before:] if isinstance(f, dict) and f.get("t") in ("ack", "event")
        ]
        await asyncio.sleep(0.06)  # stay under 20 frames/s so the rate limit never answers instead
    await attacker.ping()  # still connected: malformed frames are answered, not punished
    await assert_room_untouched(server, watcher, mark)


async def test_oversized_frame_closes_with_1009(server: Server, table: tuple[Client, Client]) -> None:
    watcher, attacker = table
    mark = watcher.mark()
    big = pack({"t": "roll", "id": "big", "intent": POWER, "visibility": "public", "label": "x" * 100 * 1024})
    await attacker.send_raw(big)
    code, _ = await attacker.wait_closed()
    assert code == 1009, f"a 100 KiB frame must close the socket with 1009, got {code}"
    assert not [f for f in attacker.frames if f.get("t") == "ack"]
    await assert_room_untouched(server, watcher, mark, frozenset({attacker.id}))


async def test_a_flood_is_rate_limited(server: Server, table: tuple[Client, Client]) -> None:
    watcher, attacker = table
    mark = watcher.mark()
    before = attacker.mark()
    started = time.monotonic()
    ids = [f"flood-{i}" for i in range(150)]
    for rid in ids:
        await attacker.send({"t": "ping", "id": rid})
    last = await attacker.answer(ids[-1])
    # The server handled every ping between the first send and the last answer: the bucket refilled for no
    # longer than that.
    elapsed = time.monotonic() - started
    assert last["t"] == "error", "the 150th ping in a burst must be refused"
    assert last["code"] == "rate_limited", last
    assert_sentence(last["message"])
    answers = [f for f in attacker.frames[before:] if f.get("id") in set(ids)]
    pongs = sum(1 for f in answers if f["t"] == "pong")
    limited = sum(1 for f in answers if f["t"] == "error" and f["code"] == "rate_limited")
    assert limited >= 1
    assert pongs <= 40 + 20 * elapsed + 2, f"{pongs} pongs in {elapsed:.2f}s is more than the limit allows"
    assert pongs >= 30, f"only {pongs} pings answered: the burst allowance is ~40"
    await asyncio.sleep(1.5)  # the bucket refills; the client was slowed, not thrown out
    await attacker.ping()
    await assert_room_untouched(server, watcher, mark)


async def test_bad_tokens_close_with_4001(server: Server, room: Room, table: tuple[Client, Client]) -> None:
    watcher, _ = table
    mark = watcher.mark()
    expiring = await asyncio.to_thread(server.token, room.id, "player", name="Late", ttl=1)
    started = time.monotonic()
    now = int(time.time())
    secret = server.env["TABLERELAY_SECRET"]
    claims = {"room": room.id, "role": "player", "exp": now + 3600}
    bad = {
        "garbage": "not-a-token",
        "empty": "",
        "a number": 12345,
        "forged with another secret": jwt.encode(
            claims, "another secret, 32 bytes or more: " + secrets.token_hex(8), "HS256"
        ),
        "unsigned (alg none)": jwt.encode(claims, "", "none"),  # PyJWT takes "" as alg none's None key
        "with an unknown role": jwt.encode({**claims, "role": "god"}, secret, "HS256"),
        "for a room this server does not have": jwt.encode(
            {**claims, "room": "no-such-room"}, secret, "HS256"
        ),
    }
    for what, token in bad.items():
        with pytest.raises(Refused) as refused:
            await Client.join(server.url, token, "bad-token")  # type: ignore[arg-type]
        assert refused.value.code == 4001, f"{what}: {refused.value}"
        assert refused.value.reason, f"{what}: the close frame must give a reason"
    await asyncio.sleep(max(0.0, 2.2 - (time.monotonic() - started)))
    with pytest.raises(Refused) as refused:
        await Client.join(server.url, expiring, "expired")
    assert refused.value.code == 4001
    assert refused.value.reason
    await assert_room_untouched(server, watcher, mark)


async def test_first_frame_must_be_hello(server: Server, table: tuple[Client, Client], clients: Any) -> None:
    watcher, _ = table
    mark = watcher.mark()
    for first in (
        {"t": "ping", "id": "p"},
        {"t": "roll", "id": "r", "intent": POWER, "visibility": "public"},
    ):
        c = await clients.open(server.url, "no-hello")
        await c.send(first)
        code, reason = await c.wait_closed()
        assert code == 4001, f"first frame {first['t']}: closed with {code}"
        assert reason
        assert not [f for f in c.frames if f.get("t") in ("pong", "ack", "welcome")], c.frames
    await assert_room_untouched(server, watcher, mark)


async def test_a_token_for_another_room_stays_out_of_this_one(
    server: Server, room: Room, table: tuple[Client, Client], clients: Any
) -> None:
    watcher, _ = table
    mark = watcher.mark()
    other = await server.acreate_room("Elsewhere")
    visitor = await clients.join(server.url, other.player, "visitor")
    assert visitor.welcome["room"]["id"] == other.id
    assert visitor.welcome["room"]["name"] == "Elsewhere"
    await visitor.roll(POWER, "public", "in the other room")
    # A client that names the room it means to join (the server's optional ?room= check) is refused when
    # its token is for another room.
    with pytest.raises(Refused) as refused:
        await Client.join(f"{server.url}?room={room.id}", other.player, "wrong-room")
    assert refused.value.code == 4001
    assert refused.value.reason
    right = await clients.join(f"{server.url}?room={other.id}", other.player, "right-room")
    assert right.welcome["room"]["id"] == other.id
    await assert_room_untouched(server, watcher, mark)


async def test_roles_are_enforced(
    server: Server, room: Room, table: tuple[Client, Client], clients: Any
) -> None:
    watcher, attacker = table
    gm = await clients.join(server.url, room.gm, "gm")
    spectator = await clients.join(server.url, room.spectator, "spec")
    secret_roll = await gm.roll(POWER, "gm", "the dragon's plan")
    await watcher.event(secret_roll["seq"])
    mark = watcher.mark()
    cases = [
        (spectator, {"t": "roll", "intent": POWER, "visibility": "public"}),
        (spectator, {"t": "resource", "name": "fear", "op": "gain", "n": 1}),
        (attacker, {"t": "reveal", "seq": secret_roll["seq"]}),
        (attacker, {"t": "resource", "name": "fear", "op": "set", "n": 5}),
        (attacker, {"t": "resource", "name": "fear", "op": "gain", "n": 1}),
        (attacker, {"t": "resource", "name": "hope", "op": "gain", "n": 1, "participant": attacker.id}),
        (attacker, {"t": "resource", "name": "hope", "op": "spend", "n": 1, "participant": watcher.id}),
    ]
    for who, frame in cases:
        err = await who.request(frame)
        assert err["t"] == "error", f"{who.label} {frame}: {err}"
        assert err["code"] == "forbidden", f"{who.label} {frame}: {err}"
        assert_sentence(err["message"])
    await assert_room_untouched(server, watcher, mark)
    state = (await clients.join(server.url, room.spectator, "check")).welcome["state"]
    assert state["fear"] == 0, state


async def test_bad_intents_are_answered_with_a_sentence(server: Server, table: tuple[Client, Client]) -> None:
    watcher, attacker = table
    mark = watcher.mark()
    intents = [
        {"system": "no.such.system"},
        {"characteristic": 2},
        {"system": "drawsteel.power", "characteristic": "two"},
        {"system": "drawsteel.power", "edges": -1},
        {"system": "drawsteel.power", "luck": 3},
        {"system": "daggerheart.duality", "advantage": True, "modifier": 1.5},
        {"system": "honors_edge.roll", "pool": "banana"},
        "drawsteel.power",
    ]
    for intent in intents:
        err = await attacker.request({"t": "roll", "intent": intent, "visibility": "public"})
        assert err["t"] == "error", f"{intent}: {err}"
        allowed = ("bad_intent", "bad_frame") if isinstance(intent, str) else ("bad_intent",)
        assert err["code"] in allowed, f"{intent}: {err}"
        assert_sentence(err["message"])
    await assert_room_untouched(server, watcher, mark)


async def test_reveal_of_a_missing_roll_and_spend_without_fear(
    server: Server, room: Room, table: tuple[Client, Client], clients: Any
) -> None:
    watcher, _ = table
    gm = await clients.join(server.url, room.gm, "gm")
    mark = watcher.mark()
    err = await gm.request({"t": "reveal", "seq": 999_999})
    assert err["t"] == "error", err
    assert err["code"] == "not_found", err
    assert_sentence(err["message"])
    attack = {
        "system": "daggerheart.attack",
        "modifier": 2,
        "experience": 1,
        "spend_fear": True,
        "targets": [{"name": "Bard", "evasion": 10}],
    }
    err = await gm.request({"t": "roll", "intent": attack, "visibility": "public"})
    assert err["t"] == "error", err
    assert err["code"] == "insufficient", err
    assert_sentence(err["message"])
    err = await gm.request({"t": "resource", "name": "fear", "op": "spend", "n": 1})
    assert err["code"] == "insufficient", err
    # The GM's own join may reach the watcher after the GM's welcome (its broadcast waits for a signature).
    await assert_room_untouched(server, watcher, mark, frozenset({gm.id}))


async def test_no_client_field_chooses_a_die(server: Server, table: tuple[Client, Client]) -> None:
    """Dice come from the server: intent arguments that would pick faces are refused, extra fields ignored."""
    watcher, attacker = table
    for extra in ({"dice": [10, 10]}, {"seed": 1}, {"rng": "scripted"}, {"natural": 20}):
        err = await attacker.request({"t": "roll", "intent": {**POWER, **extra}, "visibility": "public"})
        assert err["t"] == "error", f"{extra}: {err}"
        assert err["code"] == "bad_intent", f"{extra}: {err}"
    # Fields a roll frame does not have are not a way in either: rolled many times, the dice still vary.
    forced = {"total": 99, "dice": [{"faces": 10, "value": 10, "kept": True}] * 2}
    seen = set()
    for _ in range(12):
        reply = await attacker.request(
            {"t": "roll", "intent": POWER, "visibility": "public", "result": forced, "dice": [10, 10]}
        )
        if reply["t"] == "error":
            assert reply["code"] == "bad_frame", reply
            return
        ev = await watcher.event(reply["seq"])
        assert ev["result"]["total"] != 99, ev
        seen.add(tuple(d["value"] for d in ev["result"]["dice"]))
    assert len(seen) > 1, "12 rolls of 2d10 all came up the same: P < 1e-20 for honest dice"
