"""Runs the Foundry module's Node suite (``clients/foundry/test``) against a real relay started here.

The suite drives the module inside a harness of the Foundry globals it touches (``harness.mjs``), with
real WebSocket connections to this relay: fulfillment, chat messages, audiences, reveals, reloads, Fear.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.browser.relay_process import ROOT, running_relay
from tests.console import tablerelay_bin

FOUNDRY = ROOT / "clients" / "foundry"


@pytest.mark.slow
def test_foundry_module_node_suite(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None, "node (20+) is needed for the Foundry module tests"
    assert (ROOT / "clients" / "js" / "node_modules" / "ws").is_dir(), (
        "run scripts/setup.d/js-client.sh (npm ci in clients/js) first"
    )
    with running_relay(tmp_path / "data") as relay:
        env = dict(relay.env)
        env.update(
            TABLERELAY_TEST_URL=relay.ws_url,
            TABLERELAY_TEST_HTTP=relay.http_url,
            TABLERELAY_TEST_DATA=str(relay.data),
            TABLERELAY_TEST_CLI=tablerelay_bin(),
        )
        env.pop("NODE_OPTIONS", None)
        files = sorted(str(p.relative_to(FOUNDRY)) for p in (FOUNDRY / "test").glob("*.test.mjs"))
        assert files, "no node tests found in clients/foundry/test"
        proc = subprocess.run(
            [node, "--test", "--test-reporter=spec", "--test-concurrency=1", *files],
            cwd=FOUNDRY,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, (
        f"node --test failed ({proc.returncode}):\n{output}\n--- relay log ---\n{relay.log_text()}"
    )
    counts = {key: int(n) for key, n in re.findall(r"ℹ (pass|fail|skipped|todo|cancelled) (\d+)", output)}
    assert counts.get("pass", 0) >= 24, output
    assert counts.get("fail") == 0, output
    assert counts.get("skipped", 0) == 0, output
