"""A secured NATS store, for real: ``tls://`` with a CA of our own (``TABLERELAY_NATS_CA``) and a password in
the address, and a credentials file (``TABLERELAY_NATS_CREDS``) under NATS's operator/account/user JWTs. A
node serves a table through each; a wrong CA, an unknown account or a missing file is refused with one
sentence that names no secret."""

from __future__ import annotations

import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import signing_key_pem
from tests.cluster.natsauth import Operator, Tls, make_operator, make_tls
from tests.cluster.natsd import NatsServer, free_port
from tests.console import serve_refusal
from tests.e2e.servers import Server, server_env

POWER = {"system": "drawsteel.power", "characteristic": 1}


def started(server: NatsServer) -> NatsServer:
    server.start()
    server.wait_ready(time.monotonic() + 20)
    return server


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[tuple[NatsServer, Tls]]:
    """One JetStream server that speaks TLS only and wants a user and password."""
    made = make_tls(tmp_path)
    extra = made.server_config() + 'authorization { user: "gm", password: "s3cret" }\n'
    server = started(NatsServer("tls", tmp_path, free_port(), 0, [], extra=extra))
    yield server, made
    server.stop()


@pytest.fixture
def operator(tmp_path: Path) -> Iterator[tuple[NatsServer, Operator]]:
    """One JetStream server in operator mode: only users of the accounts it was given get in."""
    made = make_operator(tmp_path)
    server = started(NatsServer("op", tmp_path, free_port(), 0, [], extra=made.server_config))
    yield server, made
    server.stop()


def node_env(store: str, **extra: str) -> dict[str, str]:
    return server_env(
        secrets.token_hex(24),
        {"TABLERELAY_STORE": store, "TABLERELAY_SIGNING_KEY": signing_key_pem(), **extra},
    )


async def serves_a_table(data: Path, env: dict[str, str], clients: Any) -> None:
    node = Server(data=data, env=env).start()
    try:
        room = await node.acreate_room("Secured")
        gm = await clients.join(node.url, room.gm, "gm")
        ack = await gm.roll(POWER, "public", "through a secured store")
        assert ack["t"] == "ack", ack
        await gm.event(ack["seq"])
    finally:
        assert await node.astop(signal.SIGTERM) == 0, node.log_text()


async def test_tls_with_our_ca_and_a_password_serves_and_a_wrong_ca_is_serve_refusal(
    tls: tuple[NatsServer, Tls], clients: Any, tmp_path: Path
) -> None:
    server, made = tls
    store = f"tls://gm:s3cret@127.0.0.1:{server.port}"
    await serves_a_table(tmp_path / "node", node_env(store, TABLERELAY_NATS_CA=str(made.ca)), clients)
    # The system's CAs do not know ours: the certificate check fails, in one sentence without the password.
    line = serve_refusal(tmp_path / "plain", node_env(store))
    assert "Cannot reach the NATS servers at tls://gm:***@" in line, line
    assert "s3cret" not in line
    assert "certificate" in line.lower(), line
    # A CA file that is not one.
    (tmp_path / "not-a-ca.pem").write_text("hello")
    line = serve_refusal(tmp_path / "bad", node_env(store, TABLERELAY_NATS_CA=str(tmp_path / "not-a-ca.pem")))
    assert "The NATS CA file" in line, line


async def test_a_creds_file_serves_and_an_unknown_account_or_a_missing_file_is_serve_refusal(
    operator: tuple[NatsServer, Operator], clients: Any, tmp_path: Path
) -> None:
    server, made = operator
    store = f"nats://127.0.0.1:{server.port}"
    await serves_a_table(tmp_path / "node", node_env(store, TABLERELAY_NATS_CREDS=str(made.creds)), clients)
    line = serve_refusal(tmp_path / "stranger", node_env(store, TABLERELAY_NATS_CREDS=str(made.other_creds)))
    assert line.startswith("tablerelay: Cannot reach the NATS servers"), line
    assert "authorization" in line.lower(), line
    missing = tmp_path / "nowhere.creds"
    line = serve_refusal(tmp_path / "missing", node_env(store, TABLERELAY_NATS_CREDS=str(missing)))
    assert f"The NATS credentials file {missing} does not exist." in line, line
    # Without credentials at all, an operator-mode server lets nobody in.
    line = serve_refusal(tmp_path / "none", node_env(store))
    assert "authorization" in line.lower(), line
