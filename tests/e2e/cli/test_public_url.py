"""Printed links name the address the server is really reached at: its public_url, else where it listens."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

from tests.console import run_cli
from tests.e2e.servers import Server, parse_log_line


def links(data: Path, *flags: str) -> dict[str, str]:
    done = run_cli("room", "create", "--name", "Links", "--json", *flags, data=data)
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    assert made["watch"] == made["links"]["spectator"]
    assert made["links"]["spectator"].endswith(f"/watch#{made['spectator']}")
    assert made["links"]["gm"].endswith(f"/table#{made['gm']}")
    assert made["links"]["player"].endswith(f"/table#{made['player']}")
    return {role: url.split("#")[0].rsplit("/", 1)[0] for role, url in made["links"].items()}


def listening_record(server: Server) -> dict[str, object]:
    for line in server.log_lines:
        record = parse_log_line(line)
        if record is not None and record.get("event") == "listening":
            return record
    raise AssertionError("no listening line:\n" + server.log_text())


def test_links_name_the_port_the_running_server_picked(
    server_factory: Callable[..., Server], tmp_path: Path
) -> None:
    data = tmp_path / "picked"
    server = server_factory(data)
    assert server.port != 8765
    assert set(links(data).values()) == {server.http}
    assert listening_record(server)["public_url"] == server.http
    # Stopped: nothing is listening, so the links fall back to the settings' address.
    assert server.stop() == 0
    assert not (data / "serving.json").exists()
    assert set(links(data).values()) == {"http://127.0.0.1:8765"}


def test_a_killed_servers_address_is_not_used(server_factory: Callable[..., Server], tmp_path: Path) -> None:
    data = tmp_path / "killed"
    server = server_factory(data)
    server.stop(signal.SIGKILL)
    assert (data / "serving.json").exists(), "a kill leaves the record; its dead pid must make it unused"
    assert set(links(data).values()) == {"http://127.0.0.1:8765"}


def test_the_servers_public_url_reaches_room_create_and_token(
    server_factory: Callable[..., Server], tmp_path: Path
) -> None:
    data = tmp_path / "proxied"
    server = server_factory(data, TABLERELAY_PUBLIC_URL="https://dice.example.org/tables/")
    base = "https://dice.example.org/tables"
    assert listening_record(server)["public_url"] == base
    # The commands were given no public_url: they take the running server's.
    assert set(links(data).values()) == {base}
    room = json.loads(run_cli("room", "list", "--json", data=data).stdout)[0]["id"]
    gm = run_cli("token", "--room", room, "--role", "gm", "--link", data=data)
    assert gm.returncode == 0, gm.stderr
    assert gm.stdout.startswith(f"{base}/table#ey"), gm.stdout
    spectator = run_cli("token", "--room", room, "--role", "spectator", "--link", data=data)
    assert spectator.stdout.startswith(f"{base}/watch#ey"), spectator.stdout
    bare = run_cli("token", "--room", room, "--role", "player", data=data)
    assert bare.stdout.startswith("ey"), "without --link, token prints the bare token as before"
    # A command's own setting wins over the server's record.
    assert set(links(data, "--public-url", "http://lan-box:9000").values()) == {"http://lan-box:9000"}
    assert set(links(data).values()) != {"http://lan-box:9000"}
    env_given = run_cli(
        "room", "create", "--name", "E", "--json", data=data, TABLERELAY_PUBLIC_URL="https://env.example"
    )
    assert json.loads(env_given.stdout)["watch"].startswith("https://env.example/watch#")


def test_a_public_url_that_is_not_an_address_is_refused_with_a_sentence(tmp_path: Path) -> None:
    data = tmp_path / "bad"
    for bad in (
        "dice.example.org",
        "ftp://dice.example.org",
        "https://dice.example.org/?x=1",
        "https://h:99999",
    ):
        done = run_cli("room", "create", "--name", "x", "--public-url", bad, data=data)
        assert done.returncode == 2, (bad, done.stdout, done.stderr)
        assert done.stderr.startswith("tablerelay: public_url "), done.stderr
        assert "Traceback" not in done.stderr
    serve = run_cli("serve", "--port", "0", data=data, TABLERELAY_PUBLIC_URL="wss://dice.example.org")
    assert serve.returncode == 2
    assert "public_url must be an http:// or https:// address" in serve.stderr
    assert "Traceback" not in serve.stderr
