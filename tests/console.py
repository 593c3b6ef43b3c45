"""Finding the installed ``tablerelay`` command, for tests that run it as a person would."""

from __future__ import annotations

import os
import shutil
import subprocess
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


def run_cli(*args: str, data: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The command line as an operator in another terminal runs it: no TABLERELAY_* but the given ones, no
    standard input, ``--data`` last; whatever its exit status."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    return subprocess.run(
        [tablerelay_bin(), *args, "--data", str(data)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def serve_refusal(data: Path, env: dict[str, str], *args: str) -> str:
    """Run ``tablerelay serve`` expecting it to refuse to start: the one sentence it printed, after checking
    that it exited with 1 or 2, printed exactly one line and no traceback."""
    done = subprocess.run(
        [tablerelay_bin(), "serve", "--port", "0", "--data", str(data), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode in (1, 2), done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]
