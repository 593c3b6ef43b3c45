"""Runs the JS client's own tests (``node --test clients/js/test/``) against a real relay started here.

The node tests get the server's address, a data folder and the ``tablerelay`` command through the
environment so each test can make its own rooms (``tests/node_suite.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.relay_process import ROOT
from tests.node_suite import run_node_suite

JS = ROOT / "clients" / "js"


@pytest.mark.slow
def test_js_client_node_suite(tmp_path: Path) -> None:
    assert (JS / "node_modules" / "@msgpack" / "msgpack").is_dir(), (
        "run scripts/setup.d/js-client.sh (npm ci in clients/js) first"
    )
    run_node_suite(JS, tmp_path / "data", at_least=20, room="Node tests")
