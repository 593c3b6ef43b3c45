"""The relay published under a path by a real reverse proxy (Caddy, on loopback): the links it prints name
the proxy's address, and the pages opened through them load, connect and show a roll live."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.relay_process import Relay, WireClient, running_relay
from tests.packaging.test_deploy import CADDY

pytestmark = pytest.mark.slow
PREFIX = "/dice"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def caddy_proxy(folder: Path, port: int, upstream: int) -> Iterator[str]:
    """Caddy serving plain HTTP on ``port``, passing ``PREFIX/*`` (prefix stripped) to the relay."""
    config = folder / "Caddyfile"
    config.write_text(
        "{\n\tadmin off\n\tauto_https off\n\tstorage file_system " + str(folder / "storage") + "\n}\n"
        f"http://127.0.0.1:{port} {{\n"
        f"\thandle_path {PREFIX}/* {{\n\t\treverse_proxy 127.0.0.1:{upstream}\n\t}}\n"
        "}\n"
    )
    assert CADDY.exists(), "caddy is missing: run scripts/setup.d/caddy.sh"
    env = {**os.environ, "HOME": str(folder), "XDG_DATA_HOME": str(folder), "XDG_CONFIG_HOME": str(folder)}
    log = (folder / "caddy.log").open("wb")
    proc = subprocess.Popen(
        [str(CADDY), "run", "--adapter", "caddyfile", "--config", str(config)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("caddy did not start:\n" + (folder / "caddy.log").read_text())
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}{PREFIX}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_pages_work_through_a_proxy_that_publishes_the_relay_under_a_path(
    page: Page, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("proxy")
    port = free_port()
    public = f"http://127.0.0.1:{port}{PREFIX}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    env["TABLERELAY_PUBLIC_URL"] = public
    relay: Relay
    with (
        running_relay(folder / "data", env=env) as relay,
        caddy_proxy(folder, port, relay.port) as base,
    ):
        assert base == public
        room = relay.create_room("Behind a proxy")
        assert room["watch"] == f"{public}/watch#{room['spectator']}"
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        page.on("websocket", lambda ws: requested.append(ws.url))
        page.goto(room["watch"])
        expect(page.locator("#status")).to_have_text("Live", timeout=10_000)
        gm = WireClient(f"ws://127.0.0.1:{port}{PREFIX}/ws", room["gm"], "Mercer")
        try:
            event = gm.roll({"system": "dice", "formula": "2d20kh1+3"}, label="Through the proxy")
        finally:
            gm.close()
        card = page.locator(f'#feed > article[data-seq="{event["seq"]}"]')
        expect(card).to_contain_text("Through the proxy", timeout=3000)
        # Every request the page made, its module imports and its WebSocket included, went through the proxy.
        assert requested
        through = f"127.0.0.1:{port}{PREFIX}/"
        outside = [url for url in requested if not url.split("://", 1)[1].startswith(through)]
        assert outside == [], outside
        assert f"ws://127.0.0.1:{port}{PREFIX}/ws" in requested
        page.goto("about:blank")  # leave before the relay stops, so the page logs no failed reconnects
