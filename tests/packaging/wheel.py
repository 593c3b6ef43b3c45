"""Building the project's sdist and wheel, and installing the wheel as a new user would: a fresh venv in a
temporary folder outside the repository, with no npm on its PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT = 300


@dataclass(frozen=True)
class Dist:
    sdist: Path
    wheel: Path


@dataclass(frozen=True)
class Installed:
    """A venv with only the wheel (and its dependencies) in it."""

    root: Path
    bin: Path
    env: dict[str, str]  # PATH is the venv's bin folder alone: no npm, no node, no project venv

    @property
    def python(self) -> str:
        return str(self.bin / "python")

    @property
    def tablerelay(self) -> str:
        return str(self.bin / "tablerelay")

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), cwd=cwd, env=self.env, capture_output=True, text=True, timeout=60, check=False
        )


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def build(out: Path) -> Dist:
    """``python -m build``: the sdist, then the wheel built from the sdist (as PyPI users would get it)."""
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=ROOT)
    return built(out)


def built(out: Path) -> Dist:
    """The sdist and wheel ``build`` made in ``out``."""
    sdists = sorted(out.glob("tablerelay-*.tar.gz"))
    wheels = sorted(out.glob("tablerelay-*.whl"))
    assert len(sdists) == 1, sdists
    assert len(wheels) == 1, wheels
    return Dist(sdists[0], wheels[0])


def clean_env(path: str) -> dict[str, str]:
    """The environment of a user who has only ``path``: nothing of the project's, nothing of pytest's."""
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "PIP_CERT", "PIP_FIND_LINKS", "PIP_DEFAULT_TIMEOUT")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env["PATH"] = path
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def install(wheel: Path, root: Path) -> Installed:
    """A fresh venv in ``root`` with ``pip install WHEEL`` (dependencies from pip's cache or the index)."""
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    made = venv_at(root)
    assert shutil.which("npm", path=made.env["PATH"]) is None, "npm is on the clean PATH"
    assert shutil.which("node", path=made.env["PATH"]) is None, "node is on the clean PATH"
    _run([str(made.bin / "python"), "-m", "pip", "install", "--quiet", str(wheel)], cwd=root, env=made.env)
    return made


def venv_at(root: Path) -> Installed:
    """The venv ``install`` made in ``root``."""
    bin_dir = root / "bin"
    return Installed(root, bin_dir, clean_env(str(bin_dir)))
