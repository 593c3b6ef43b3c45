"""Remake the Roll20 bridge's pictures in docs/images/: ``.venv/bin/python -m tests.roll20.screenshots``."""

from __future__ import annotations

import os
import sys

import pytest

if __name__ == "__main__":
    os.environ["TABLERELAY_ROLL20_SHOTS"] = "docs/images"
    test = "tests/roll20/test_ui.py::test_the_popup_connects_and_the_gm_moves_fear_and_hope_through_the_relay"
    sys.exit(pytest.main(["-q", test]))
