"""Finding the installed ``tablerelay`` command, for tests that run it as a person would."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def tablerelay_bin() -> str:
    """The ``tablerelay`` console script of the interpreter running the tests (the project's venv)."""
    sibling = Path(sys.executable).parent / "tablerelay"
    if sibling.exists():
        return str(sibling)
    found = shutil.which("tablerelay")
    if found is None:
        raise RuntimeError("the tablerelay console script is not installed next to the test interpreter")
    return found
