"""scripts/build_assets.py on small repositories made here: the vendoring step's sources and its errors."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from relay.shell.http.assets import Vendored
from tests.packaging.wheel import ROOT


def load_build_assets() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_assets", ROOT / "scripts" / "build_assets.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = load_build_assets()
MSGPACK = Vendored("msgpack", "@msgpack/msgpack", "dist.esm")


def small_repo(root: Path, *, with_web: bool = True) -> Path:
    """The parts of a checkout the build reads: the web pages, the JS client and its lock, no node_modules."""
    if with_web:
        shutil.copytree(ROOT / "clients" / "web", root / "clients" / "web")
    js = root / "clients" / "js"
    js.mkdir(parents=True)
    for name in ("tablerelay.js", "tablerelay.d.ts", "package.json", "package-lock.json"):
        shutil.copyfile(ROOT / "clients" / "js" / name, js / name)
    return root


def locked_version() -> str:
    lock = json.loads((ROOT / "clients" / "js" / "package-lock.json").read_text())
    version: str = lock["packages"]["node_modules/@msgpack/msgpack"]["version"]
    return version


@pytest.mark.slow
def test_a_fresh_checkout_vendors_the_locked_version_with_npm_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = small_repo(tmp_path / "repo")
    into = tmp_path / "served" / "vendor"
    build.vendor(repo, into, (MSGPACK,))
    stamp = json.loads((into / "msgpack" / build.STAMP).read_text())
    assert stamp["version"] == locked_version()
    assert "export" in (into / "msgpack" / "index.mjs").read_text()
    assert (into / "msgpack" / "LICENSE").is_file()
    assert not list(into.rglob("*.d.ts")), "only what the declaration includes"
    assert not (repo / "clients" / "js" / "node_modules").exists(), "npm ran in a temporary folder"
    # Done once: the stamp matches, so a second build touches nothing (and needs no npm).
    before = (into / "msgpack" / "index.mjs").stat().st_mtime_ns
    with monkeypatch.context() as without_npm:
        without_npm.setenv("PATH", "/nonexistent")
        build.vendor(repo, into, (MSGPACK,))
    assert (into / "msgpack" / "index.mjs").stat().st_mtime_ns == before


def test_without_npm_or_a_build_the_step_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = small_repo(tmp_path / "repo")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(build.BuildError, match="npm is needed once to vendor @msgpack/msgpack"):
        build.vendor(repo, tmp_path / "vendor", (MSGPACK,))


def test_a_package_missing_from_the_lock_is_a_sentence(tmp_path: Path) -> None:
    repo = small_repo(tmp_path / "repo")
    # (The JS client's lock holds msgpack and noble; this one it never will.)
    missing = Vendored("absent", "@tablerelay/not-a-package", ".", include=("index.js",))
    sentence = re.escape("@tablerelay/not-a-package is not in clients/js/package-lock.json")
    with pytest.raises(build.BuildError, match=sentence):
        build.vendor(repo, tmp_path / "vendor", (missing,))


def test_a_missing_required_client_stops_the_build(tmp_path: Path) -> None:
    repo = small_repo(tmp_path / "repo", with_web=False)
    with pytest.raises(build.BuildError, match="The served client 'web' is missing"):
        build.copy_clients(repo, tmp_path / "out")


def test_develop_links_each_client_folder_into_the_package(tmp_path: Path) -> None:
    repo = small_repo(tmp_path / "repo")
    (repo / "relay").mkdir()
    # The vendored build already there (as a checkout's earlier run left it): develop reuses it.
    build.vendor(ROOT, repo / "relay" / "_served" / "vendor", (MSGPACK,))
    build.develop(repo)
    served = repo / "relay" / "_served"
    assert (served / "web").is_symlink()
    assert os.readlink(served / "web") == "../../clients/web"
    assert (served / "web" / "watch.html").is_file()
    assert not (served / "foundry").exists(), "not in this repository, and not required"
    (repo / "clients" / "foundry").mkdir()
    build.develop(repo)
    assert os.readlink(served / "foundry") == "../../clients/foundry"


def test_node_modules_is_used_only_when_npm_installed_exactly_the_locked_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The container's wheel stage: npm ran in an earlier stage, and there is no npm here."""
    installed = ROOT / "clients" / "js" / "node_modules"
    assert (installed / ".package-lock.json").is_file(), "run scripts/setup.d/js-client.sh"
    repo = small_repo(tmp_path / "repo")
    modules = repo / "clients" / "js" / "node_modules"
    shutil.copytree(installed / "@msgpack", modules / "@msgpack")
    shutil.copyfile(installed / ".package-lock.json", modules / ".package-lock.json")
    monkeypatch.setenv("PATH", "/nonexistent")
    build.vendor(repo, tmp_path / "ok", (MSGPACK,))
    assert (tmp_path / "ok" / "msgpack" / "index.mjs").is_file()
    # npm's record names another build than the lock: not used, and without npm that is an error.
    record = json.loads((modules / ".package-lock.json").read_text())
    record["packages"]["node_modules/@msgpack/msgpack"]["integrity"] = "sha512-another"
    (modules / ".package-lock.json").write_text(json.dumps(record))
    with pytest.raises(build.BuildError, match="npm is needed once"):
        build.vendor(repo, tmp_path / "tampered", (MSGPACK,))
