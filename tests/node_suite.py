"""Runs a folder's ``node --test`` suite against a relay process started here, and judges its output.

The JS client's, the Foundry module's and the Roll20 bridge's suites all run this way: the relay's
address, data folder and command reach the node tests through the environment, every test file in
``test/*.test.mjs`` runs one at a time, and the suite fails with node's whole output (and the relay's log)
when a test fails, or when any is skipped, left to do or cancelled: nothing passes by not running.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from tests.browser.relay_process import running_relay
from tests.console import tablerelay_bin


def run_node_suite(
    folder: Path,
    data: Path,
    *,
    at_least: int,
    env: dict[str, str] | None = None,
    room: str | None = None,
    timeout: float = 240,
) -> dict[str, int]:
    """Run ``folder``'s node tests against a fresh relay on ``data``; the counts node reported.

    With ``room``, a room of that name is made first and its three tokens passed on as well.
    """
    node = shutil.which("node")
    assert node is not None, "node (20+) is needed for the node test suites"
    files = sorted(str(p.relative_to(folder)) for p in (folder / "test").glob("*.test.mjs"))
    assert files, f"no node tests found in {folder / 'test'}"
    with running_relay(data) as relay:
        run_env = {k: v for k, v in relay.env.items() if k != "NODE_OPTIONS"}
        run_env.update(
            TABLERELAY_TEST_URL=relay.ws_url,
            TABLERELAY_TEST_HTTP=relay.http_url,
            TABLERELAY_TEST_DATA=str(relay.data),
            TABLERELAY_TEST_CLI=tablerelay_bin(),
        )
        if room is not None:
            made = relay.create_room(room)
            run_env.update(
                TABLERELAY_TEST_GM=made["gm"],
                TABLERELAY_TEST_PLAYER=made["player"],
                TABLERELAY_TEST_SPECTATOR=made["spectator"],
            )
        run_env.update(env or {})
        proc = subprocess.run(
            [node, "--test", "--test-reporter=spec", "--test-concurrency=1", *files],
            cwd=folder,
            env=run_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, (
            f"node --test failed ({proc.returncode}):\n{output}\n--- relay log ---\n{relay.log_text()}"
        )
    counts = {key: int(n) for key, n in re.findall(r"ℹ (pass|fail|skipped|todo|cancelled) (\d+)", output)}
    assert counts.get("pass", 0) >= at_least, output
    assert counts.get("fail") == 0, output
    for kind in ("skipped", "todo", "cancelled"):
        assert counts.get(kind, 0) == 0, output
    return counts
