"""Runs the Foundry module's Node suite (``clients/foundry/test``) against a real relay started here.

The suite drives the module inside a harness of the Foundry globals it touches (``harness.mjs``), with
real WebSocket connections to this relay: fulfillment, chat messages, audiences, reveals, reloads, Fear, and
the translations (every string in lang/en.json, and a world in a pseudo-language built from it), and the
Daggerheart and Draw Steel systems' own rolls resolved by the relay (harnesses of their roll entry points).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.relay_process import ROOT
from tests.node_suite import run_node_suite

FOUNDRY = ROOT / "clients" / "foundry"


@pytest.mark.slow
def test_foundry_module_node_suite(tmp_path: Path) -> None:
    assert (ROOT / "clients" / "js" / "node_modules" / "ws").is_dir(), (
        "run scripts/setup.d/js-client.sh (npm ci in clients/js) first"
    )
    run_node_suite(FOUNDRY, tmp_path / "data", at_least=71)
