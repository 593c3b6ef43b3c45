"""Signed events against a real server: every event verifies, with the server's checker and with an
independent one written from the spec (tests/spec_signing.py, PyNaCl); any change to an event, its kid or
its room breaks the signature; signatures outlive a restart and a key rotation; exports verify offline."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from relay.trust import signing
from tests import spec_signing
from tests.console import serve_refusal, tablerelay_bin
from tests.e2e.servers import Room, Server, server_env
from tests.e2e.wire import Client

POWER = {"system": "drawsteel.power", "characteristic": 2, "edges": 1}
DUALITY = {"system": "daggerheart.duality", "modifier": 1}


def jwks(server: Server) -> dict[str, Any]:
    status, content_type, body = server.get("/.well-known/tablerelay-keys.json")
    assert status == 200, body
    assert content_type.startswith("application/jwk-set+json"), content_type
    data = json.loads(body)
    assert isinstance(data, dict)
    return data


def all_events(client: Client) -> list[dict[str, Any]]:
    """Everything a client received that is an event: its welcome's history and the live ones."""
    out = [e for f in client.frames if isinstance(f, dict) and f.get("t") == "welcome" for e in f["history"]]
    return out + client.events()


def assert_verifies(event: dict[str, Any], room_id: str, keys: dict[str, Any]) -> None:
    reason = signing.check(event, room_id, keys)
    assert reason is None, f"{reason}: {event}"
    assert spec_signing.verify(event, room_id, keys), f"the spec-only verifier refused {event}"


def assert_fails(event: dict[str, Any], room_id: str, keys: dict[str, Any], what: str) -> None:
    assert not signing.verify(event, room_id, keys), f"still verifies after {what}"
    assert not spec_signing.verify(event, room_id, keys), f"spec-only verifier accepts it after {what}"


def mutations(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(path, changed value) for every leaf of ``value``: one byte (or bit) of it changed."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from mutations(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from mutations(item, (*path, i))
    elif isinstance(value, bool):
        yield path, not value
    elif isinstance(value, int):
        yield path, value ^ 1
    elif isinstance(value, str):
        data = bytearray(value.encode())
        if data:
            data[-1] ^= 1
            yield path, data.decode(errors="replace")
        else:
            yield path, "x"
    elif isinstance(value, bytes):
        yield path, bytes([value[0] ^ 1]) + value[1:] if value else b"\x00"
    elif value is None:
        yield path, 0


def changed(event: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    copy = msgpack.unpackb(msgpack.packb(event, use_bin_type=True), raw=False)
    target = copy
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    assert isinstance(copy, dict)
    return copy


async def test_every_event_a_client_receives_verifies(server: Server, room: Room, clients: Any) -> None:
    keys = jwks(server)
    gm = await clients.join(server.url, room.gm, "gm")
    player = await clients.join(server.url, room.player, "player", formats=["foundry", "roll20"])
    spectator = await clients.join(server.url, room.spectator, "spectator")
    assert gm.welcome["keys"] == keys["keys"], "the welcome carries the published key set"
    (current,) = [k for k in keys["keys"] if "retired" not in k]
    assert set(current) >= {"kty", "crv", "x", "kid", "use", "alg"}
    assert (current["kty"], current["crv"], current["use"], current["alg"]) == (
        "OKP",
        "Ed25519",
        "sig",
        "EdDSA",
    )
    hidden = await player.roll(DUALITY, "gm", label="Sneak past")
    # Received before the reveal is asked for: a broadcast still waiting for its signature when the
    # reveal is stored goes out in its opened form (one run in a loaded full suite saw that).
    await spectator.event(hidden["seq"])
    await player.roll(POWER, "public", label="Strike")
    await player.roll({"system": "dice", "formula": "{1d6/4, 2d4/3}kh1"}, "public")
    await gm.request({"t": "resource", "name": "fear", "op": "gain", "n": 2})
    revealed = await player.request({"t": "reveal", "seq": hidden["seq"]})
    late = await clients.join(server.url, room.spectator, "late spectator")
    for client in (gm, player, spectator):
        # Not a ping: a pong is no fence (docs/protocol.md), an event may still be on its way to be signed.
        await client.event(revealed["seq"])
    for client in (gm, player, spectator, late):
        events = all_events(client)
        assert len(events) >= 6, events
        for event in events:
            assert event["kid"] == current["kid"]
            assert isinstance(event["sig"], bytes)
            assert len(event["sig"]) == 64
            assert_verifies(event, room.id, keys)
    sealed = next(e for e in spectator.events() if e["seq"] == hidden["seq"])
    full = next(e for e in player.events() if e["seq"] == hidden["seq"])
    assert sealed["sealed"] is True
    assert "result" not in sealed
    assert sealed["sig"] != full["sig"], "the placeholder and the full roll are different signed forms"
    opened = next(e for e in late.welcome["history"] if e["seq"] == hidden["seq"])
    assert opened["revealed"] > hidden["seq"]
    assert opened["result"] == full["result"]


async def test_the_keys_endpoint_is_public_and_cacheable(server: Server) -> None:
    import urllib.request

    with urllib.request.urlopen(server.http + "/.well-known/tablerelay-keys.json", timeout=5) as resp:
        assert resp.headers["Access-Control-Allow-Origin"] == "*"
        assert "max-age" in resp.headers["Cache-Control"]


async def test_any_change_breaks_the_signature(server: Server, room: Room, clients: Any) -> None:
    keys = jwks(server)
    gm = await clients.join(server.url, room.gm, "gm")
    player = await clients.join(server.url, room.player, "player")
    hidden = await player.roll(POWER, "blind", label="Hidden")
    # Received before the reveal is asked for: an event broadcast after its reveal is already open. The GM
    # asks once their own socket has the roll, as a GM's client does (on two nodes, the GM's node may get
    # it from the stream a moment after the player's).
    sealed = await player.event(hidden["seq"])
    await gm.event(hidden["seq"])
    reveal = await gm.request({"t": "reveal", "seq": hidden["seq"]})
    assert reveal["t"] == "ack", reveal
    opened = await player.roll(POWER, "public", label="Open")
    await gm.event(opened["seq"])
    events = [e for e in gm.events() if e["kind"] in ("roll", "reveal")]
    assert {e["kind"] for e in events} == {"roll", "reveal"}
    assert sealed.get("sealed")
    tried = 0
    for event in [*events, sealed]:
        assert_verifies(event, room.id, keys)
        signed = {k: v for k, v in event.items() if k not in spec_signing.LEFT_OUT}
        for path, value in mutations(signed):
            assert_fails(changed(event, path, value), room.id, keys, f"changing {path} of seq {event['seq']}")
            tried += 1
        for key in signed:
            dropped = {k: v for k, v in event.items() if k != key}
            assert_fails(dropped, room.id, keys, f"dropping {key!r}")
        assert_fails({**event, "extra": 1}, room.id, keys, "adding a field")
        for i in range(64):
            flipped = bytearray(event["sig"])
            flipped[i] ^= 0x80
            assert_fails({**event, "sig": bytes(flipped)}, room.id, keys, f"flipping signature byte {i}")
        other_kid = "0" * 16 if event["kid"] != "0" * 16 else "1" * 16
        assert_fails({**event, "kid": other_kid}, room.id, keys, "changing kid")
        assert_fails(event, room.id + "x", keys, "replaying it into another room")
        assert_fails(event, "", keys, "replaying it with no room")
    assert tried > 40, tried
    assert reveal["t"] == "ack"


def test_a_roll_keeps_verifying_after_a_restart_and_a_rotation(server_factory: Any, tmp_path: Path) -> None:
    import asyncio

    data = tmp_path / "rotating"
    secret = "rotation-test-secret"
    first = server_factory(data, secret=secret)
    room = first.create_room("Rotation")
    key_file = data / signing.KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600, "the private key is readable by its owner only"

    async def roll(srv: Server) -> tuple[dict[str, Any], Client]:
        gm = await Client.join(srv.url, room.gm, "gm")
        ack = await gm.roll(POWER, "public", label="Before")
        return await gm.event(ack["seq"]), gm

    async def run(srv: Server) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        event, gm = await roll(srv)
        history = gm.welcome["history"]
        await gm.close()
        return event, history

    old_keys = jwks(first)
    before, _ = asyncio.run(run(first))
    assert_verifies(before, room.id, old_keys)
    first.stop()
    rotate = subprocess.run(
        [tablerelay_bin(), "key", "rotate", "--data", str(data)],
        env=first.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert rotate.returncode == 0, rotate.stderr
    assert before["kid"] in rotate.stdout, rotate.stdout
    second = server_factory(data, secret=secret)
    new_keys = jwks(second)
    assert len(new_keys["keys"]) == 2
    retired = next(k for k in new_keys["keys"] if k["kid"] == before["kid"])
    current = next(k for k in new_keys["keys"] if k["kid"] != before["kid"])
    assert isinstance(retired["retired"], int)
    assert "retired" not in current
    # The event captured before the restart and the rotation still verifies, with the retired key.
    assert_verifies(before, room.id, new_keys)
    after, history = asyncio.run(run(second))
    assert after["kid"] == current["kid"]
    assert_verifies(after, room.id, new_keys)
    # A welcome shows the old roll signed by the current key; both signatures hold.
    again = next(e for e in history if e["seq"] == before["seq"])
    assert again["kid"] == current["kid"]
    assert_verifies(again, room.id, new_keys)


def test_each_signature_has_a_fresh_nonce_unless_told_to_be_deterministic(
    server_factory: Any, tmp_path: Path
) -> None:
    # relay.trust.ed25519: the server's nonces are made ahead of time, so its signatures are not RFC 8032's
    # deterministic ones, every one has its own R, and all verify; ``signing_nonces = deterministic``
    # gives exactly RFC 8032's signature.
    import asyncio

    async def rolls(srv: Server, room: Room) -> list[dict[str, Any]]:
        gm = await Client.join(srv.url, room.gm, "gm")
        last = 0
        for i in range(30):
            last = (await gm.roll(POWER, "gm" if i % 4 == 0 else "public", label=f"Roll {i}"))["seq"]
        await gm.event(last)
        events = all_events(gm)
        await gm.close()
        return events

    for mode in ("ahead", "deterministic"):
        data = tmp_path / mode
        srv = server_factory(data, TABLERELAY_SIGNING_NONCES=mode)
        room = srv.create_room(mode)
        keys = jwks(srv)
        events = asyncio.run(rolls(srv, room))
        private = signing.load_keyring(data).private
        assert len(events) > 30
        for event in events:
            assert_verifies(event, room.id, keys)
        same = [event["sig"] == private.sign(signing.signed_bytes(event, room.id)) for event in events]
        if mode == "ahead":
            assert not any(same), "every signature from the pool, none deterministic"
            points = [event["sig"][:32] for event in events]
            assert len(set(points)) == len(points), "a nonce is never used twice"
        else:
            assert all(same), "RFC 8032's signatures, byte for byte"
        srv.stop()
    line = serve_refusal(tmp_path / "bad", server_env("s" * 32, {"TABLERELAY_SIGNING_NONCES": "random"}))
    assert line == "tablerelay: signing_nonces must be ahead or deterministic; got 'random'.", line


def cli(server: Server, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [tablerelay_bin(), *args], env=server.env, capture_output=True, check=False, timeout=60
    )


async def test_export_and_verify_offline(server: Server, room: Room, clients: Any, tmp_path: Path) -> None:
    gm = await clients.join(server.url, room.gm, "gm")
    secret = await gm.roll(POWER, "gm", label="Secret-Label-4711")
    await gm.roll(POWER, "public", label="Open roll")
    await gm.roll({"system": "dice", "formula": "1d6/4"}, "public")
    await gm.ping()
    for fmt in ("jsonl", "msgpack"):
        out = tmp_path / f"export.{fmt}"
        made = await asyncio_cli(
            server, "room", "export", room.id, "--data", str(server.data), "--format", fmt, "-o", str(out)
        )
        assert made.returncode == 0, made.stderr
        data = out.read_bytes()
        assert b"Secret-Label-4711" not in data, "a hidden roll stays sealed in an export"
        checked = await asyncio_cli(server, "verify", str(out))
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert b"verify" in checked.stdout
        # Checked with the server's published key set instead of the file's own.
        keys = tmp_path / "keys.json"
        keys.write_text(json.dumps(jwks(server)))
        trusted = await asyncio_cli(server, "verify", str(out), "--keys", str(keys))
        assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    lines = (tmp_path / "export.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines[1:]]
    sealed = next(e for e in events if e["seq"] == secret["seq"])
    assert sealed["sealed"] is True
    # One changed total: that event, and only that one, is reported.
    target = next(i for i, e in enumerate(events, 1) if e.get("label") == "Open roll")
    tampered = json.loads(lines[target])
    tampered["result"]["total"] += 1
    lines[target] = json.dumps(tampered)
    bad = tmp_path / "tampered.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    checked = await asyncio_cli(server, "verify", str(bad))
    assert checked.returncode == 1
    reported = checked.stdout.decode().splitlines()
    assert any(f"event {tampered['seq']} (roll) does not verify" in line for line in reported), reported
    assert sum("does not verify" in line for line in reported) == 1, reported
    # A deleted event is a hole in the seqs.
    holed = tmp_path / "holed.jsonl"
    holed.write_text("\n".join(lines[:2] + lines[3:]) + "\n")
    checked = await asyncio_cli(server, "verify", str(holed))
    assert checked.returncode == 1
    assert b"missing" in checked.stdout


async def asyncio_cli(server: Server, *args: str) -> subprocess.CompletedProcess[bytes]:
    import asyncio

    return await asyncio.to_thread(cli, server, *args)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", b"empty"),
        (b"not json at all\n", b"not a room export"),
        (b'{"t": "something else"}\n', b"header"),
        (b"\xc1\xc1", b"not a room export"),
    ],
)
async def test_verify_refuses_a_bad_file_with_a_sentence(
    server: Server, tmp_path: Path, content: bytes, expected: bytes
) -> None:
    bad = tmp_path / "bad"
    bad.write_bytes(content)
    checked = await asyncio_cli(server, "verify", str(bad))
    assert checked.returncode == 2
    assert expected in checked.stderr, checked.stderr
    assert b"Traceback" not in checked.stderr


def test_a_malformed_key_file_is_a_sentence_not_a_traceback(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / signing.KEY_FILE).write_text(
        "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    proc = subprocess.run(
        [tablerelay_bin(), "serve", "--port", "0", "--data", str(data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "signing.key" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    proc = subprocess.run(
        [tablerelay_bin(), "serve", "--port", "0", "--data", str(data)],
        env={**env, "TABLERELAY_SIGNING_KEY": "garbage"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "TABLERELAY_SIGNING_KEY" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


async def test_verify_refuses_a_key_set_it_cannot_use(server: Server, room: Room, tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    made = await asyncio_cli(server, "room", "export", room.id, "--data", str(server.data), "-o", str(out))
    assert made.returncode == 0, made.stderr
    lying = tmp_path / "lying.json"
    jwk = jwks(server)["keys"][0]
    lying.write_text(json.dumps({"keys": [{**jwk, "kid": "0" * 16}]}))
    checked = await asyncio_cli(server, "verify", str(out), "--keys", str(lying))
    assert checked.returncode == 2
    assert b"cannot be used" in checked.stderr, checked.stderr
    assert b"Traceback" not in checked.stderr
