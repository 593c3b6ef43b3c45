"""Build hooks; the project's metadata is in pyproject.toml.

The sdist and the wheel carry the served clients that ``relay/shell/http/assets.py`` declares, copied by
``scripts/build_assets.py``: the sdist keeps them at their repository paths plus the vendored npm builds
(so a wheel builds from it without npm), and the wheel puts them under ``relay/_served/``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent


def _fail_clearly(error: Exception) -> None:
    """A build step's sentence, without a traceback around it (pip shows the backend's output)."""
    raise SystemExit(f"error: {error}") from None


def _build_assets() -> Any:
    spec = importlib.util.spec_from_file_location("build_assets", HERE / "scripts" / "build_assets.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithClients(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return  # an editable install reads the checkout; scripts/build_assets.py --develop links it
        build = _build_assets()
        served = Path(self.build_lib) / "relay" / build.SERVED
        try:
            build.copy_clients(HERE, served)
            build.vendor(HERE, served / build.VENDOR)
        except build.BuildError as exc:
            _fail_clearly(exc)


class SdistWithClients(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        build = _build_assets()
        base = Path(base_dir)
        try:
            build.copy_clients(HERE, base, keep_paths=True)
            build.copy_locks(HERE, base)
            build.vendor(HERE, base / "relay" / build.SERVED / build.VENDOR)
        except build.BuildError as exc:
            _fail_clearly(exc)


setup(cmdclass={"build_py": BuildPyWithClients, "sdist": SdistWithClients})
