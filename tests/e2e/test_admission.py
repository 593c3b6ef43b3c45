"""The handshake's own checks: the browser origin allowlist and the cap of sockets per client address, with
X-Forwarded-For honoured only from trusted proxies."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from tests.console import tablerelay_bin
from tests.e2e.servers import Server, server_env
from tests.e2e.wire import Client, assert_sentence


async def refused_with(url: str, token: str, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(InvalidStatus) as caught:
        await Client.join(url, token, "refused", **kwargs)
    response = caught.value.response
    return response.status_code, response.body.decode()


async def test_an_origin_allowlist_refuses_other_pages_with_403_and_a_sentence(
    server_factory: Callable[..., Server], clients: Any
) -> None:
    srv = server_factory(TABLERELAY_ORIGINS="https://foundry.example.org, https://app.roll20.net/")
    room = await srv.acreate_room("Origins")
    status, body = await refused_with(srv.url, room.player, origin="https://evil.example.com")
    assert status == 403
    assert_sentence(body.strip())
    assert "TABLERELAY_ORIGINS" in body
    status, _ = await refused_with(srv.url, room.player, origin="null")  # a sandboxed frame, a file:// page
    assert status == 403

    listed = await clients.join(srv.url, room.player, "foundry", origin="https://foundry.example.org")
    assert listed.welcome["t"] == "welcome"
    roll20 = await clients.join(srv.url, room.player, "roll20", origin="https://app.roll20.net")
    assert roll20.welcome["t"] == "welcome"
    # The relay's own pages (/watch, /table) are on its own origin; tools without a browser send none.
    own = await clients.join(srv.url, room.spectator, "own", origin=f"http://{srv.host}:{srv.port}")
    assert own.welcome["t"] == "welcome"
    tool = await clients.join(srv.url, room.spectator, "tool")
    assert tool.welcome["t"] == "welcome"
    status, _, _ = await srv.aget("/healthz")
    assert status == 200, "plain HTTP pages are not subject to the allowlist"


async def test_without_an_allowlist_every_origin_may_connect(server: Server, clients: Any) -> None:
    room = await server.acreate_room("Any origin")
    anyone = await clients.join(server.url, room.spectator, "anyone", origin="https://elsewhere.example")
    assert anyone.welcome["t"] == "welcome"


async def test_a_bad_origins_setting_stops_serve_with_a_sentence(tmp_path: Any) -> None:
    done = subprocess.run(
        [tablerelay_bin(), "serve", "--port", "0", "--data", str(tmp_path)],
        env=server_env("s" * 48, {"TABLERELAY_ORIGINS": "foundry.example.org/game"}),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "origins must be a comma list" in done.stderr, done.stderr


async def test_sockets_per_address_are_capped_with_429_then_free_again(
    server_factory: Callable[..., Server], clients: Any
) -> None:
    srv = server_factory(TABLERELAY_MAX_PER_IP="3")
    room = await srv.acreate_room("Per address")
    held = [await clients.join(srv.url, room.spectator, f"s{i}") for i in range(3)]
    status, body = await refused_with(srv.url, room.spectator)
    assert status == 429
    assert_sentence(body.strip())
    # Without trusted proxies, X-Forwarded-For is the client's own say and changes nothing.
    status, _ = await refused_with(
        srv.url, room.spectator, additional_headers={"X-Forwarded-For": "203.0.113.9"}
    )
    assert status == 429
    await held[0].close()
    await held[0].wait_closed()
    again = None
    for _ in range(50):  # the server counts the socket out when its handler ends
        try:
            again = await Client.join(srv.url, room.spectator, "again")
            break
        except InvalidStatus:
            await held[1].ws.ping()
    assert again is not None, "a closed socket frees its place"
    await again.close()


async def test_x_forwarded_for_names_the_client_only_behind_a_trusted_proxy(
    server_factory: Callable[..., Server], clients: Any
) -> None:
    srv = server_factory(TABLERELAY_MAX_PER_IP="2", TABLERELAY_TRUSTED_PROXIES="127.0.0.0/8")
    room = await srv.acreate_room("Behind a proxy")
    alice = {"X-Forwarded-For": "203.0.113.5"}
    # A client may put anything on the left; the trusted proxy appends the address it saw, on the right.
    spoofed = {"X-Forwarded-For": "198.51.100.1, 203.0.113.5"}
    await clients.join(srv.url, room.spectator, "a1", additional_headers=alice)
    await clients.join(srv.url, room.spectator, "a2", additional_headers=spoofed)
    status, _ = await refused_with(srv.url, room.spectator, additional_headers=alice)
    assert status == 429, "the third socket from 203.0.113.5 is over the cap"
    bob = await clients.join(
        srv.url, room.spectator, "b1", additional_headers={"X-Forwarded-For": "203.0.113.6"}
    )
    assert bob.welcome["t"] == "welcome", "another client behind the same proxy has places of its own"


async def test_a_socket_that_says_no_hello_in_time_is_told_to_try_again_not_refused(
    server_factory: Any, clients: Any
) -> None:
    # On a starved host a client's hello can arrive after hello_timeout through no fault of its own: the
    # close must be one the JS client retries (1013), not 4001, on which it gives up for good.
    server = server_factory(TABLERELAY_HELLO_TIMEOUT="0.5")
    silent = await clients.open(server.url, "silent")
    code, reason = await silent.wait_closed()
    assert (code, reason) == (1013, "Send a hello first.")
    room = await server.acreate_room("Late hellos")
    late = await clients.join(server.url, room.player, "late")
    assert late.welcome["t"] == "welcome", "a client that then says hello is welcome"
