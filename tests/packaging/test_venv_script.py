"""scripts/venv.sh, which scripts/run, test and bench make .venv with: another Python's venv is made again."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.packaging.wheel import ROOT

VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"


def make_venv(checkout: Path, python: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail; . scripts/venv.sh; make_venv"],
        cwd=checkout,
        env={**os.environ, "PYTHON": python},
        capture_output=True,
        text=True,
        timeout=120,
    )


def venv_version(checkout: Path) -> str:
    code = 'import sys; print("%d.%d" % sys.version_info[:2])'
    return subprocess.run(
        [checkout / ".venv" / "bin" / "python", "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_venv_of_another_version_is_made_again_and_one_of_this_version_is_kept(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copyfile(ROOT / "scripts" / "venv.sh", tmp_path / "scripts" / "venv.sh")
    # A .venv another Python made: its interpreter answers another version.
    fake = tmp_path / ".venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\necho 3.9\n")
    fake.chmod(0o755)
    (tmp_path / ".venv" / "old-file").write_text("left by the old venv")

    made = make_venv(tmp_path, sys.executable)
    assert made.returncode == 0, made.stderr
    assert f".venv holds Python 3.9; making it again with Python {VERSION}" in made.stderr
    assert venv_version(tmp_path) == VERSION
    assert not (tmp_path / ".venv" / "old-file").exists(), "made from scratch, not mixed"

    (tmp_path / ".venv" / "kept-file").write_text("installed packages stand for this")
    kept = make_venv(tmp_path, sys.executable)
    assert kept.returncode == 0, kept.stderr
    assert kept.stderr == ""
    assert (tmp_path / ".venv" / "kept-file").exists(), "a venv of the same version is reused"


def test_a_python_that_does_not_run_stops_the_script_with_a_sentence(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copyfile(ROOT / "scripts" / "venv.sh", tmp_path / "scripts" / "venv.sh")
    failed = make_venv(tmp_path, str(tmp_path / "no-such-python"))
    assert failed.returncode == 1
    assert "did not run; set PYTHON to a Python 3.11 or newer" in failed.stderr
    assert not (tmp_path / ".venv").exists()
