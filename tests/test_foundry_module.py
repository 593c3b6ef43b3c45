"""Runs the Foundry module's Node suite (``clients/foundry/test``) against a real relay started here.

The suite drives the module inside a harness of the Foundry globals it touches (``harness.mjs``), with
real WebSocket connections to this relay: fulfillment, chat messages, audiences, reveals, reloads, Fear, and
the translations (every string in lang/en.json, and a world in a pseudo-language built from it), and the
Daggerheart and Draw Steel systems' own rolls resolved by the relay (harnesses of their roll entry points).
The relay is the default one, rolling fair dice (spec/fairness.md), as users run it.
``test/fairness.test.mjs`` (each card's verdict, its change at a GM's seed reveal, the players' witness
answers, an alarm) has a second, also default, to itself (``TABLERELAY_TEST_FAIR_URL`` and
``TABLERELAY_TEST_FAIR_DATA``), and a third without fair dice (``TABLERELAY_FAIR_DICE=false``: no seed
button, no verdict mark) as ``TABLERELAY_TEST_PLAIN_URL`` and ``TABLERELAY_TEST_PLAIN_DATA``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.relay_process import ROOT, running_relay
from tests.node_suite import run_node_suite

FOUNDRY = ROOT / "clients" / "foundry"


@pytest.mark.slow
# About 90 s alone, over 120 s on a loaded machine: the suite runs some 90 tests one file at a time.
@pytest.mark.timeout(360)
def test_foundry_module_node_suite(tmp_path: Path) -> None:
    assert (ROOT / "clients" / "js" / "node_modules" / "ws").is_dir(), (
        "run scripts/setup.d/js-client.sh (npm ci in clients/js) first"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    with (
        running_relay(tmp_path / "fair", env=env) as fair,
        running_relay(tmp_path / "plain", env={**env, "TABLERELAY_FAIR_DICE": "false"}) as plain,
    ):
        run_node_suite(
            FOUNDRY,
            tmp_path / "data",
            at_least=80,
            env={
                "TABLERELAY_TEST_FAIR_URL": fair.ws_url,
                "TABLERELAY_TEST_FAIR_DATA": str(fair.data),
                "TABLERELAY_TEST_PLAIN_URL": plain.ws_url,
                "TABLERELAY_TEST_PLAIN_DATA": str(plain.data),
            },
            timeout=330,
        )
