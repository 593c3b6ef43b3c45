"""The sdist and the wheel: what they carry, their metadata, and the installed command."""

from __future__ import annotations

import email
import json
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from relay.shell.http import assets
from tests.packaging.wheel import ROOT, Dist, Installed

pytestmark = pytest.mark.slow
SERVED = f"relay/{assets.SERVED}/"


def declared_files() -> set[str]:
    """What the declaration says the wheel carries, computed from this checkout's folders."""
    expected = set()
    for client in assets.CLIENTS:
        source = ROOT / client.source
        if not source.is_dir():
            assert not client.required, f"{client.source} is missing"
            continue
        for path in source.rglob("*"):
            relative = path.relative_to(source).as_posix()
            if path.is_file() and client.carries(relative):
                expected.add(f"{SERVED}{client.name}/{relative}")
    for package in assets.VENDORED:
        for relative, _ in assets.client_paths(assets.VENDOR):
            if relative.startswith(f"{package.name}/"):
                expected.add(f"{SERVED}{assets.VENDOR}/{relative}")
    return expected


def test_the_wheel_carries_exactly_the_declared_client_files(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = set(wheel.namelist())
    served = {name for name in names if name.startswith(SERVED)}
    carried = {name for name in served if not name.rsplit("/", 1)[-1].startswith(".")}
    assert carried - {n for n in carried if n.endswith("/LICENSE")} == declared_files()
    for needed in ("web/watch.html", "web/table.html", "js/tablerelay.js", "js/tablerelay.d.ts"):
        assert f"{SERVED}{needed}" in names
    # The vendored build: its entry module, its licence, and the stamp naming the locked version.
    lock = json.loads((ROOT / "clients/js/package-lock.json").read_text())
    locked = lock["packages"]["node_modules/@msgpack/msgpack"]
    with zipfile.ZipFile(dist.wheel) as wheel:
        stamp = json.loads(wheel.read(f"{SERVED}vendor/msgpack/.vendored.json"))
        assert b"export" in wheel.read(f"{SERVED}vendor/msgpack/index.mjs")
    assert f"{SERVED}vendor/msgpack/LICENSE" in names
    assert (stamp["version"], stamp["integrity"]) == (locked["version"], locked["integrity"])
    assert not [n for n in names if "node_modules" in n or "/test/" in n or n.endswith(".test.mjs")]


def test_the_wheel_metadata_is_complete(dist: Dist) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    with zipfile.ZipFile(dist.wheel) as wheel:
        info = f"tablerelay-{project['version']}.dist-info"
        meta = email.message_from_bytes(wheel.read(f"{info}/METADATA"))
        assert b"Permission is hereby granted" in wheel.read(f"{info}/licenses/LICENSE")
        assert "tablerelay = relay.ops.cli:main" in wheel.read(f"{info}/entry_points.txt").decode()
    assert meta["Name"] == "tablerelay"
    assert meta["Version"] == project["version"]
    assert meta["License-Expression"] == "MIT"
    assert meta["Requires-Python"] == ">=3.11"
    classifiers = meta.get_all("Classifier") or []
    assert "Topic :: Games/Entertainment :: Role-Playing" in classifiers
    assert "Typing :: Typed" in classifiers
    assert "A WebSocket relay" in (meta.get_payload() or ""), "the README is the long description"


def test_the_sdist_carries_sources_and_the_vendored_build(dist: Dist) -> None:
    with tarfile.open(dist.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    for needed in (
        "setup.py",
        "scripts/build_assets.py",
        "LICENSE",
        "clients/web/watch.html",
        "clients/js/tablerelay.js",
        "clients/js/package-lock.json",
        # So that a wheel builds from the sdist where there is no npm.
        "relay/_served/vendor/msgpack/index.mjs",
        "relay/_served/vendor/msgpack/.vendored.json",
    ):
        assert needed in names, needed
    assert not [n for n in names if "node_modules" in n]


def test_the_installed_command_names_its_version_and_runs_from_the_venv(
    installed: Installed, tmp_path: Path
) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    shown = installed.run(installed.tablerelay, "--version", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"tablerelay {version}"
    # The relay the venv imports is the wheel's copy, and its pages are files inside that venv.
    where = installed.run(
        installed.python,
        "-c",
        "import relay, relay.shell.http.assets as a; print(relay.__file__); print(a.client_files('web'))",
        cwd=tmp_path,
    )
    assert where.returncode == 0, where.stderr
    module, web = (Path(line) for line in where.stdout.splitlines())
    assert module.is_relative_to(installed.root), module
    assert web.is_relative_to(installed.root), web
    assert not web.is_symlink(), web
    assert (web / "watch.html").is_file()
