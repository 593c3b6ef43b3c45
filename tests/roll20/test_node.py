"""Runs the bridge's node tests (``node --test clients/roll20/test/``): its pure parts, the bridge with the
JS client against a real relay started here, and the chat line of every sample result read by an
independent Roll20-syntax parser (dice-roller-parser from the npm registry).

The samples are resolved here by the Python rules core with the scripted RNG and rendered with
``rules.render.to_roll20``; the node tests read them from the file in ``TABLERELAY_ROLL20_SAMPLES``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from tests.browser.relay_process import running_relay
from tests.console import tablerelay_bin
from tests.roll20.conftest import ROLL20
from tests.roll20.samples import write_samples


def test_node_suite_with_every_sample_read_by_an_independent_roll20_parser(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None, "node (20+) is needed for the Roll20 bridge's tests"
    assert (ROLL20 / "node_modules" / "dice-roller-parser").is_dir(), "run scripts/setup.d/roll20.sh first"
    samples = tmp_path / "samples.json"
    count = write_samples(samples)
    assert count > 100
    files = sorted(str(p.relative_to(ROLL20)) for p in (ROLL20 / "test").glob("*.test.mjs"))
    assert files, "no node tests in clients/roll20/test"
    with running_relay(tmp_path / "data") as relay:
        env = {k: v for k, v in relay.env.items() if k != "NODE_OPTIONS"}
        env.update(
            TABLERELAY_ROLL20_SAMPLES=str(samples),
            TABLERELAY_TEST_URL=relay.ws_url,
            TABLERELAY_TEST_DATA=str(relay.data),
            TABLERELAY_TEST_CLI=tablerelay_bin(),
        )
        proc = subprocess.run(
            [node, "--test", "--test-reporter=spec", "--test-concurrency=1", *files],
            cwd=ROLL20,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"node --test failed ({proc.returncode}):\n{output}\n{relay.log_text()}"
    counts = {key: int(n) for key, n in re.findall(r"ℹ (pass|fail|skipped|todo|cancelled) (\d+)", output)}
    assert counts.get("pass", 0) >= 20, output
    assert counts.get("fail") == 0, output
    for kind in ("skipped", "todo", "cancelled"):
        assert counts.get(kind, 0) == 0, output
