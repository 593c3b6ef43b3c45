"""Runs the bridge's node tests (``node --test clients/roll20/test/``): its pure parts, the bridge with the
JS client against a real relay started here, and the chat line of every sample result read by an
independent Roll20-syntax parser (dice-roller-parser from the npm registry).

The samples are resolved here by the Python rules core with the scripted RNG and rendered with
``rules.render.to_roll20``; the node tests read them from the file in ``TABLERELAY_ROLL20_SAMPLES``. A second
relay rolls fair dice (``TABLERELAY_FAIR_DICE=true``) for ``test/fairness.test.mjs``: its address and data
folder come as ``TABLERELAY_TEST_FAIR_URL`` and ``TABLERELAY_TEST_FAIR_DATA``.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.browser.relay_process import running_relay
from tests.node_suite import run_node_suite
from tests.roll20.conftest import ROLL20
from tests.roll20.samples import write_samples


def test_node_suite_with_every_sample_read_by_an_independent_roll20_parser(tmp_path: Path) -> None:
    assert (ROLL20 / "node_modules" / "dice-roller-parser").is_dir(), "run scripts/setup.d/roll20.sh first"
    samples = tmp_path / "samples.json"
    count = write_samples(samples)
    assert count > 100
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    env["TABLERELAY_FAIR_DICE"] = "true"
    with running_relay(tmp_path / "fair", env=env) as fair:
        run_node_suite(
            ROLL20,
            tmp_path / "data",
            at_least=24,
            env={
                "TABLERELAY_ROLL20_SAMPLES": str(samples),
                "TABLERELAY_TEST_FAIR_URL": fair.ws_url,
                "TABLERELAY_TEST_FAIR_DATA": str(fair.data),
            },
            timeout=120,
        )
