"""Runs the JS client's own tests (``node --test clients/js/test/``) against a real relay started here.

The node tests get the server's address, a data folder and the ``tablerelay`` command through the
environment so each test can make its own rooms (``tests/node_suite.py``). That relay is the default one,
rolling fair dice (spec/fairness.md), as users run it. A second, also default but with a witness wait
long enough for a loaded machine, serves ``test/fairness.test.mjs``'s verdicts and alarms
(``TABLERELAY_TEST_FAIR_URL`` and ``TABLERELAY_TEST_FAIR_DATA``); a third runs without fair dice
(``TABLERELAY_FAIR_DICE=false``), for what a client does with a relay that has them off
(``TABLERELAY_TEST_PLAIN_URL`` and ``TABLERELAY_TEST_PLAIN_DATA``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.relay_process import ROOT, running_relay
from tests.node_suite import run_node_suite

JS = ROOT / "clients" / "js"


@pytest.mark.slow
@pytest.mark.timeout(480)  # seven files, one of them against six relay processes (witnessing.test.mjs)
def test_js_client_node_suite(tmp_path: Path) -> None:
    assert (JS / "node_modules" / "@msgpack" / "msgpack").is_dir(), (
        "run scripts/setup.d/js-client.sh (npm ci in clients/js) first"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    # The clients witness GM and hidden rolls; a wait this long keeps an honest value from being late (and
    # raising an alarm) on a loaded machine.
    fair_env = {**env, "TABLERELAY_WITNESS_WAIT_MS": "2000"}
    plain_env = {**env, "TABLERELAY_FAIR_DICE": "false"}
    with (
        running_relay(tmp_path / "fair", env=fair_env) as fair,
        running_relay(tmp_path / "plain", env=plain_env) as plain,
    ):
        run_node_suite(
            JS,
            tmp_path / "data",
            at_least=30,
            room="Node tests",
            env={
                "TABLERELAY_TEST_FAIR_URL": fair.ws_url,
                "TABLERELAY_TEST_FAIR_DATA": str(fair.data),
                "TABLERELAY_TEST_PLAIN_URL": plain.ws_url,
                "TABLERELAY_TEST_PLAIN_DATA": str(plain.data),
            },
            timeout=420,
        )
