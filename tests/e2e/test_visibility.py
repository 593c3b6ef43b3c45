"""Who sees what: the audiences table, commitments and reveals, and that hidden values never leak.

A sealed roll's secrets are made distinctive (a random 16-hex marker in its label, its nonce, the exact
MessagePack encodings of its result, dice and intent) so that searching every byte an outsider's socket
received, and every log line, is a real test rather than a search for a small number.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
from typing import Any

import pytest

from tests.e2e.servers import Room, Server, parse_log_line
from tests.e2e.wire import VISIBILITIES, Client, assert_full, assert_sealed, pack, sees_full, unpack

POWER = {"system": "drawsteel.power", "characteristic": 2, "edges": 1}


async def seat_table(server: Server, room: Room, clients: Any) -> tuple[Client, Client, Client, Client]:
    """A GM, two players (two participants from the same invite) and a spectator asking for renderings."""
    gm = await clients.join(server.url, room.gm, "gm", name="Gwen")
    p1 = await clients.join(server.url, room.player, "p1", name="Ana")
    p2 = await clients.join(server.url, room.player, "p2", name="Bo")
    spec = await clients.join(server.url, room.spectator, "spec", formats=["foundry", "roll20"])
    assert gm.me["role"] == "gm"
    assert p1.me["role"] == "player"
    assert spec.me["role"] == "spectator"
    assert len({gm.id, p1.id, p2.id, spec.id}) == 4, "an invite token must make a new participant per hello"
    # Everyone has seen everyone join before the test starts, so later windows hold only what the test causes.
    for c in (gm, p1, p2):
        await c.next("event", kind="join", where=lambda f: f["actor"]["id"] == spec.id)
    return gm, p1, p2, spec


def frame_index(client: Client, frame: dict[str, Any]) -> int:
    for i, f in enumerate(client.frames):
        if f is frame:
            return i
    raise AssertionError("frame not found")


def text_forms(secret: bytes) -> list[str]:
    """The ways a log line could spell raw bytes: hex, the base64 alphabets (padded or not), a bytes repr."""
    b64 = base64.b64encode(secret).decode()
    url = base64.urlsafe_b64encode(secret).decode()
    return [
        secret.hex(),
        secret.hex().upper(),
        b64,
        b64.rstrip("="),
        url,
        url.rstrip("="),
        repr(secret)[2:-1],
    ]


def decoded_text(line: str) -> str:
    """Every string inside a JSON log line, unescaped, so an escaped secret is found too."""
    record = parse_log_line(line)
    if record is None:
        return line
    parts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                parts.append(str(k))
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        else:
            parts.append(str(value))

    walk(record)
    return "\n".join(parts)


def assert_no_secret_in_logs(lines: list[str], marker: str, nonce: bytes | None) -> None:
    needles = [marker] + (text_forms(nonce) if nonce is not None else [])
    for line in lines:
        for text in (line, decoded_text(line)):
            for needle in needles:
                assert needle not in text, f"a log line carries a hidden roll's secret {needle!r}: {line}"


@pytest.mark.parametrize("visibility", VISIBILITIES)
@pytest.mark.parametrize("roller_role", ["player", "gm"])
async def test_audiences_commitment_and_reveal(
    server: Server, room: Room, clients: Any, roller_role: str, visibility: str
) -> None:
    gm, p1, p2, spec = await seat_table(server, room, clients)
    everyone = [gm, p1, p2, spec]
    roller = p1 if roller_role == "player" else gm
    marker = secrets.token_hex(8)
    label = f"Sneak attack {marker}"

    ack = await roller.roll(POWER, visibility, label)
    seq = ack["seq"]
    assert set(ack) >= {"t", "id", "seq"}
    assert marker.encode() not in pack(ack), "the ack must not carry the roll"

    got = {c.label: await c.event(seq) for c in everyone}
    audience = [c for c in everyone if sees_full(visibility, c.id, c.me["role"], roller.id)]
    outsiders = [c for c in everyone if c not in audience]
    for c in everyone:
        ev = got[c.label]
        assert ev["kind"] == "roll", ev
        assert ev["visibility"] == visibility, ev
        assert ev["actor"]["id"] == roller.id, ev
        assert ev["actor"]["role"] == roller_role, ev
        assert ev["epoch"] == c.welcome["epoch"], ev
        assert isinstance(ev["ts"], int), ev
        if c in audience:
            assert_full(ev)
            assert ev["label"] == label, ev
            assert all(ev["intent"][k] == v for k, v in POWER.items()), ev
            assert ev["result"]["system"] == "drawsteel.power", ev
        else:
            assert_sealed(ev)
    # The spectator asked for renderings: it gets them with what it may see, and never with a sealed roll.
    if spec in audience:
        total = got["spec"]["result"]["total"]
        assert got["spec"]["roll20"]["rollresult"]["total"] == total, got["spec"]["roll20"]
        foundry_roll = got["spec"]["foundry"]["rolls"][0]
        foundry_roll = json.loads(foundry_roll) if isinstance(foundry_roll, str) else foundry_roll
        assert foundry_roll["total"] == total, got["spec"]["foundry"]
    for c in (gm, p1, p2):
        assert "foundry" not in got[c.label], "renderings only when asked"
        assert "roll20" not in got[c.label], "renderings only when asked"

    if visibility == "public":
        assert not outsiders
        return

    commitments = {got[c.label]["commitment"] for c in outsiders}
    assert len(commitments) == 1, f"every outsider must see the same commitment: {commitments}"
    commitment = commitments.pop()
    full = got[audience[0].label]

    # Who may reveal: the GM always; the roller of a gm/self roll; nobody else.
    if roller is p1 and visibility == "blind":
        err = await p1.request({"t": "reveal", "seq": seq})
        assert err["t"] == "error", err
        assert err["code"] == "forbidden", err
    if roller is not p2:
        err = await p2.request({"t": "reveal", "seq": seq})
        assert err["t"] == "error", err
        assert err["code"] == "forbidden", err
    err = await spec.request({"t": "reveal", "seq": seq})
    assert err["t"] == "error", err
    assert err["code"] == "forbidden", err

    await asyncio.sleep(0.3)  # give the server time to write any log line it writes about the roll
    logs_before_reveal = list(server.log_lines)
    revealer = roller if visibility in ("gm", "self") else gm
    reveal_ack = await revealer.request({"t": "reveal", "seq": seq})
    assert reveal_ack["t"] == "ack", reveal_ack
    assert reveal_ack["seq"] > seq, reveal_ack

    reveals = {
        c.label: await c.next("event", kind="reveal", where=lambda f: f.get("of") == seq) for c in everyone
    }
    nonce = reveals["gm"]["nonce"]
    blob = reveals["gm"]["blob"]
    assert isinstance(nonce, bytes), "the nonce must be bytes with enough entropy"
    assert len(nonce) >= 16, "the nonce must be bytes with enough entropy"
    assert isinstance(blob, bytes), "the blob must be MessagePack bytes"
    for c in everyone:
        rv = reveals[c.label]
        assert rv["seq"] == reveal_ack["seq"], rv
        assert rv["nonce"] == nonce, rv
        assert rv["blob"] == blob, rv
        assert hashlib.sha256(rv["nonce"] + rv["blob"]).hexdigest() == commitment
    body = unpack(blob)
    assert isinstance(body, dict), body
    assert body["label"] == label, body
    assert body["result"] == full["result"], body
    assert body["intent"] == full["intent"], body
    # A VTT that asked for renderings gets the opened roll rendered, now public, so its sealed card can
    # become the roll; a socket that asked for none gets none.
    revealed_roll = reveals["spec"]["foundry"]
    assert revealed_roll["whisper"] == [], revealed_roll
    assert json.loads(revealed_roll["rolls"][0])["total"] == full["result"]["total"], revealed_roll
    assert reveals["spec"]["roll20"]["rollresult"]["total"] == full["result"]["total"]
    assert "foundry" not in reveals["gm"], reveals["gm"]

    # The secrets, as the exact bytes the server encoded for the audience.
    audience_raw = audience[0].raw[frame_index(audience[0], full)]
    assert isinstance(audience_raw, bytes)
    needles = {
        "label marker": marker.encode(),
        "nonce": nonce,
        "result": pack(full["result"]),
        "dice": pack(full["result"]["dice"]),
        "intent": pack(full["intent"]),
    }
    for name in ("label marker", "result", "dice", "intent"):
        assert needles[name] in audience_raw or needles[name] in blob, f"{name} bytes not found as encoded"
    for c in outsiders:
        # Everything this socket received from its first byte up to the reveal (the room is fresh: no other
        # roll could legitimately carry the same bytes).
        window = c.bytes_since(0, frame_index(c, reveals[c.label]))
        for name, needle in needles.items():
            assert needle not in window, f"{c.label} received the sealed roll's {name} before its reveal"
    assert_no_secret_in_logs(logs_before_reveal, marker, nonce)


async def test_history_keeps_sealed_rolls_sealed(server: Server, room: Room, clients: Any) -> None:
    """A roll never revealed stays sealed in late joiners' welcome history, and out of every log line."""
    gm = await clients.join(server.url, room.gm, "gm")
    p1 = await clients.join(server.url, room.player, "p1")
    marker = secrets.token_hex(8)
    hidden = await gm.roll({"system": "drawsteel.power", "characteristic": 3}, "gm", f"Ambush {marker}")
    self_roll = await p1.roll(POWER, "self", f"Private {marker}")
    public = await p1.roll(POWER, "public", "In the open")

    late_spec = await clients.join(server.url, room.spectator, "late-spec")
    late_player = await clients.join(server.url, room.player, "late-player")
    late_gm = await clients.join(server.url, room.gm, "late-gm")
    for c in (late_spec, late_player, late_gm):
        history = {ev["seq"]: ev for ev in c.welcome["history"]}
        assert {hidden["seq"], self_roll["seq"], public["seq"]} <= set(history), c.welcome["history"]
        assert_full(history[public["seq"]])
        assert_sealed(history[self_roll["seq"]])  # self: only the roller, not even a GM
        if c is late_gm:
            assert_full(history[hidden["seq"]])
            assert history[hidden["seq"]]["label"] == f"Ambush {marker}"
        else:
            assert_sealed(history[hidden["seq"]])
            assert marker.encode() not in c.raw[0], f"{c.label}'s welcome carries the hidden label"
        seqs = [ev["seq"] for ev in c.welcome["history"]]
        assert seqs == sorted(seqs), "history is oldest first"

    # The same roller rejoining with its session token is still the roller: it sees its own self roll.
    again = await clients.join(server.url, p1.welcome["session"], "p1-again")
    assert again.id == p1.id
    mine = {ev["seq"]: ev for ev in again.welcome["history"]}[self_roll["seq"]]
    assert_full(mine)
    await asyncio.sleep(0.3)
    assert_no_secret_in_logs(server.log_lines, marker, None)


async def test_hidden_roll_resource_effect_names_no_cause(server: Server, room: Room, clients: Any) -> None:
    """Fear from a hidden duality roll is applied at once, but its resource event names no cause."""
    gm = await clients.join(server.url, room.gm, "gm")
    p1 = await clients.join(server.url, room.player, "p1")
    spec = await clients.join(server.url, room.spectator, "spec")
    for _ in range(40):  # P(no Fear in 40 rolls) = (7/12)**40 < 1e-9
        ack = await p1.roll(
            {"system": "daggerheart.duality", "modifier": 1}, "blind", "hidden " + secrets.token_hex(8)
        )
        ev = await gm.event(ack["seq"])
        assert_full(ev)
        if ev["result"]["with"] == "fear":
            break
    else:
        pytest.fail("40 duality rolls never came up with Fear")
    res = await spec.next(
        "event", kind="resource", where=lambda f: f["name"] == "fear" and f["seq"] > ack["seq"]
    )
    assert res["delta"] == 1, res
    assert res.get("cause") is None, f"a hidden roll's resource event must name no cause: {res}"
    assert_sealed(await spec.event(ack["seq"]))
