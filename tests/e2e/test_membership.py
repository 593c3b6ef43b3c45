"""Campaign management against a real ``tablerelay serve``: kick, invite rotation, merge and rename.

Each change is an event in the room's log, so it must hold after the server restarts; every new event is
signed like the others, and none carries a hidden value.
"""

from __future__ import annotations

from typing import Any

import pytest

from relay.trust.signing import verify
from tests.e2e.servers import Room, Server
from tests.e2e.wire import Client, Refused, caught_up

pytestmark = pytest.mark.asyncio


async def manage(gm: Client, frame: dict[str, Any]) -> dict[str, Any]:
    """Send a management frame; the ack (failing the test on an error)."""
    reply = await gm.request(frame)
    assert reply["t"] == "ack", f"{frame} was answered with {reply}"
    return reply


async def invites(gm: Client, rotate: bool = False) -> dict[str, Any]:
    rid = gm.new_id("inv")
    await gm.send({"t": "invites", "id": rid, "rotate": rotate})
    return await gm.next(where=lambda f: f.get("id") == rid and f.get("t") in ("invites", "error"))


async def refused(server: Server, token: str) -> Refused:
    with pytest.raises(Refused) as info:
        await Client.join(server.url, token, "refused")
    return info.value


def keys_of(client: Client) -> Any:
    return {"keys": client.welcome["keys"]}


async def test_kick_closes_sockets_and_revokes_the_token_across_a_restart(
    server_factory: Any, clients: Any
) -> None:
    server = server_factory()
    room: Room = await server.acreate_room("Kick table")
    gm = await clients.join(server.url, room.gm, "gm")
    aria = await clients.join(server.url, room.player, "aria", name="Aria")
    second = await clients.join(server.url, aria.welcome["session"], "aria-phone")
    assert second.id == aria.id, "the session token is the same participant on a second device"
    spectator = await clients.join(server.url, room.spectator, "spectator")
    await caught_up(gm, aria, second, spectator)

    ack = await manage(gm, {"t": "kick", "participant": aria.id, "reason": "Left the group."})
    for socket in (aria, second):
        code, reason = await socket.wait_closed()
        assert code == 4003, (code, reason)
        assert "removed you" in reason
        assert "Left the group." in reason
    event = await spectator.event(ack["seq"])
    assert event["kind"] == "kick"
    assert event["member"]["id"] == aria.id
    assert event["reason"] == "Left the group."
    assert verify(event, room.id, keys_of(spectator))

    grant = await gm.request({"t": "resource", "name": "hope", "op": "gain", "n": 1, "participant": aria.id})
    assert (grant["t"], grant["code"]) == ("error", "removed"), grant
    assert grant["message"] == "Aria was removed from this room by the GM."

    session = aria.welcome["session"]
    problem = await refused(server, session)
    assert problem.code == 4003
    assert "removed" in problem.reason
    await gm.ping()
    later = [e["kind"] for e in gm.events() if e["seq"] > ack["seq"]]
    assert "leave" not in later, "a removed participant leaves no stray leave event behind"

    await gm.close()
    await spectator.close()
    await server.astop()
    server.start()
    problem = await refused(server, session)
    assert problem.code == 4003, "the removal holds after a restart: it is in the log"
    gm2 = await clients.join(server.url, room.gm, "gm-again")
    kinds = [e["kind"] for e in gm2.welcome["history"]]
    assert kinds.count("kick") == 1
    assert aria.id not in [m["id"] for m in gm2.welcome["state"]["members"]]


async def test_rotating_invites_voids_old_invites_but_not_personal_tokens(
    server_factory: Any, clients: Any
) -> None:
    server = server_factory()
    room: Room = await server.acreate_room("Rotate table")
    gm = await clients.join(server.url, room.gm, "gm")
    bo = await clients.join(server.url, room.player, "bo", name="Bo")
    reply = await invites(gm)
    assert reply["t"] == "invites"
    assert reply["generation"] == 0
    assert reply["links"]["player"].endswith("#" + reply["player"])

    rotated = await invites(gm, rotate=True)
    assert rotated["t"] == "invites", rotated
    assert rotated["generation"] == 1
    event = await gm.event(rotated["seq"])
    assert event["kind"] == "invites"
    assert event["generation"] == 1
    for e in gm.events():
        assert rotated["player"] not in repr(e), "tokens never ride in an event"
    for raw in bo.raw:  # the new tokens only went to the GM who asked
        assert rotated["player"].encode() not in (raw if isinstance(raw, bytes) else raw.encode())

    for old in (room.player, room.spectator):
        problem = await refused(server, old)
        assert problem.code == 4003, problem
        assert "replaced" in problem.reason
    again = await clients.join(server.url, bo.welcome["session"], "bo-again")
    assert again.id == bo.id, "a player's personal token keeps working after a rotation"
    fresh = await clients.join(server.url, rotated["player"], "new-player", name="Cy")
    assert fresh.me["role"] == "player"
    watcher = await clients.join(server.url, rotated["spectator"], "new-spectator")
    assert watcher.me["role"] == "spectator"
    # The command line issues invites of the current generation too.
    cli_token = server.token(room.id, "player")
    assert (await clients.join(server.url, cli_token, "cli-player", name="Di")).me["role"] == "player"

    denied = await invites(bo)
    assert denied["t"] == "error"
    assert denied["code"] == "forbidden"

    await gm.close()
    await server.astop()
    server.start()
    for old in (room.player, room.spectator):
        assert (await refused(server, old)).code == 4003, "the rotation holds after a restart"
    assert (await clients.join(server.url, rotated["player"], "after", name="Ed")).me["role"] == "player"


async def test_merge_adds_hope_within_the_cap_and_the_merged_device_becomes_the_other(
    server_factory: Any, clients: Any
) -> None:
    server = server_factory()
    room: Room = await server.acreate_room("Merge table")
    gm = await clients.join(server.url, room.gm, "gm")
    aria = await clients.join(server.url, room.player, "aria", name="Aria")
    stale = await clients.join(server.url, room.player, "aria-stale", name="Aria")
    assert stale.id != aria.id
    await caught_up(gm, aria, stale)
    await manage(gm, {"t": "resource", "name": "hope", "op": "gain", "n": 4, "participant": aria.id})
    await manage(gm, {"t": "resource", "name": "hope", "op": "gain", "n": 3, "participant": stale.id})
    rid = stale.new_id("phone")
    roll = await stale.roll({"system": "dice", "formula": "1d20"}, label="Before the merge", request_id=rid)

    ack = await manage(gm, {"t": "merge", "participant": stale.id, "into": aria.id})
    event = await gm.event(ack["seq"])
    assert event["kind"] == "merge"
    assert event["merged"]["id"] == stale.id
    assert event["into"]["id"] == aria.id
    assert event["hope"] == 6, "4 + 3 Hope stops at the cap of 6"
    assert verify(event, room.id, keys_of(gm))
    code, reason = await stale.wait_closed()
    assert code == 4010
    assert "Aria" in reason

    # The stale device's personal token now joins as Aria, with Aria's Hope.
    back = await clients.join(server.url, stale.welcome["session"], "aria-back")
    assert back.id == aria.id
    assert back.me["name"] == "Aria"
    assert back.welcome["state"]["hope"] == {aria.id: 6}
    history = back.welcome["history"]
    old = next(e for e in history if e["seq"] == roll["seq"])
    assert old["actor"]["id"] == stale.id, "history keeps who rolled it"
    # The merged device resends the roll whose ack it never saw: Aria now answers for it, no new roll.
    retry = await back.roll({"system": "dice", "formula": "1d20"}, label="Before the merge", request_id=rid)
    assert retry["seq"] == roll["seq"], "a retry from the merged device is the same roll"
    await back.ping()
    assert [e["seq"] for e in back.events() if e["seq"] > ack["seq"]] == [], "nothing new was stored"

    bad = await gm.request({"t": "merge", "participant": aria.id, "into": aria.id})
    assert bad["t"] == "error"
    assert bad["code"] == "bad_frame"
    missing = await gm.request({"t": "merge", "participant": "nobody", "into": aria.id})
    assert missing["t"] == "error"
    assert missing["code"] == "not_found"
    await server.astop()
    server.start()
    after = await clients.join(server.url, stale.welcome["session"], "aria-restart")
    assert after.id == aria.id, "the merge holds after a restart"
    again = await after.roll({"system": "dice", "formula": "1d20"}, request_id=rid)
    assert again["seq"] == roll["seq"], "and so does the inherited roll id: it is in the fold of the log"
    assert after.welcome["seq"] == (await after.roll({"system": "dice", "formula": "1d4"}))["seq"] - 1


async def test_rename_changes_the_name_everywhere_and_history_keeps_the_old_one(
    server_factory: Any, clients: Any
) -> None:
    server = server_factory()
    room: Room = await server.acreate_room("Rename table")
    gm = await clients.join(server.url, room.gm, "gm")
    p = await clients.join(server.url, room.player, "p", name="Player 3f2a")
    first = await p.roll({"system": "dice", "formula": "1d6"})
    await caught_up(gm, p)
    ack = await manage(gm, {"t": "rename", "participant": p.id, "name": "Aria"})
    event = await p.event(ack["seq"])
    assert event["member"] == {"id": p.id, "name": "Aria", "role": "player"}
    assert event["was"] == "Player 3f2a"
    second = await p.roll({"system": "dice", "formula": "1d6"})
    rolled = await gm.event(second["seq"])
    assert rolled["actor"]["name"] == "Aria", "the live session acts under its new name at once"
    again = await clients.join(server.url, p.welcome["session"], "p-again")
    assert again.me["name"] == "Aria"
    names = {e["seq"]: e["actor"]["name"] for e in again.welcome["history"]}
    assert names[first["seq"]] == "Player 3f2a"

    denied = await p.request({"t": "rename", "participant": p.id, "name": "Boss"})
    assert denied["t"] == "error"
    assert denied["code"] == "forbidden"
    empty = await gm.request({"t": "rename", "participant": p.id, "name": "  "})
    assert empty["t"] == "error"
    assert empty["code"] == "bad_frame"
