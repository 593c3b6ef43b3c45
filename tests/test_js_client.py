"""Runs the JS client's own tests (``node --test clients/js/test/``) against a real relay started here.

The node tests get the server's address, a data folder and the ``tablerelay`` command through the
environment so each test can make its own rooms; this test fails with node's whole output when they do.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.browser.relay_process import ROOT, running_relay
from tests.console import tablerelay_bin

JS = ROOT / "clients" / "js"


@pytest.mark.slow
def test_js_client_node_suite(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None, "node (20+) is needed for the JS client tests"
    assert (JS / "node_modules" / "@msgpack" / "msgpack").is_dir(), (
        "run scripts/setup.d/js-client.sh (npm ci in clients/js) first"
    )
    with running_relay(tmp_path / "data") as relay:
        room = relay.create_room("Node tests")
        env = dict(relay.env)
        env.update(
            TABLERELAY_TEST_URL=relay.ws_url,
            TABLERELAY_TEST_HTTP=relay.http_url,
            TABLERELAY_TEST_DATA=str(relay.data),
            TABLERELAY_TEST_CLI=tablerelay_bin(),
            TABLERELAY_TEST_GM=room["gm"],
            TABLERELAY_TEST_PLAYER=room["player"],
            TABLERELAY_TEST_SPECTATOR=room["spectator"],
        )
        env.pop("NODE_OPTIONS", None)
        files = sorted(str(p.relative_to(JS)) for p in (JS / "test").glob("*.test.mjs"))
        assert files, "no node tests found in clients/js/test"
        proc = subprocess.run(
            [node, "--test", "--test-reporter=spec", "--test-concurrency=1", *files],
            cwd=JS,
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
    assert counts.get("pass", 0) >= 20, output
    assert counts.get("fail") == 0, output
    # A skipped test is a failure in this project; node must not skip (or leave to do) any either.
    assert counts.get("skipped", 0) == 0, output
    assert counts.get("todo", 0) == 0, output
    assert counts.get("cancelled", 0) == 0, output
