#!/usr/bin/env python3
"""Puts the served clients and the vendored npm builds where the relay finds them
(``relay/shell/http/assets.py``).

- ``--develop`` (``scripts/run`` and ``scripts/test`` run it): for a checkout. ``relay/_served/NAME`` becomes
  a link to each declared client folder, and ``relay/_served/vendor/`` gets the vendored builds.
- ``setup.py`` imports ``copy_clients`` and ``vendor`` to put real copies into the sdist and the wheel.

A vendored build is taken from the version and integrity the lock file names, never from a copy kept in
the repository: from an earlier build that carries the same stamp (the sdist ships one, so a wheel builds
from it without npm), else from the lock's ``node_modules`` when npm installed exactly that version there,
else from a fresh ``npm ci`` in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script, or imported by setup.py in an isolated build
    sys.path.insert(0, str(ROOT))

from relay.shell.http.assets import CLIENTS, SERVED, VENDOR, VENDORED, Vendored  # noqa: E402 (needs ROOT on the path)

STAMP = ".vendored.json"


class BuildError(RuntimeError):
    """A build step that cannot be done; the message says what to do."""


def copy_clients(repo: Path, into: Path, *, keep_paths: bool = False) -> list[str]:
    """Copy every declared client's served files from ``repo`` to ``into/NAME``; the names copied.

    With ``keep_paths`` the files keep their repository paths (``into/clients/web/...``), as in the sdist.
    """
    copied = []
    for client in CLIENTS:
        source = repo / client.source
        if not source.is_dir():
            if client.required:
                raise BuildError(f"The served client {client.name!r} is missing: {source} is not a folder.")
            continue
        target = into / (client.source if keep_paths else client.name)
        if target.exists():
            shutil.rmtree(target)
        for relative in _files(source):
            if client.carries(relative):
                _copy(source / relative, target / relative)
        copied.append(client.name)
    return copied


def vendor(repo: Path, into: Path, packages: tuple[Vendored, ...] = VENDORED) -> None:
    """Make ``into/NAME`` hold each ``Vendored`` package's build, at the version its lock file names."""
    for package in packages:
        _vendor_one(repo, package, into / package.name)


def copy_locks(repo: Path, into: Path) -> None:
    """Copy the lock files the vendored packages name, with their package.json, to the same paths."""
    for package in VENDORED:
        lock = Path(package.lock)
        for relative in (lock.parent / "package.json", lock):
            _copy(repo / relative, into / relative)


def develop(repo: Path) -> None:
    """A checkout's served tree: links to the client folders and real vendored builds."""
    served = repo / "relay" / SERVED
    served.mkdir(exist_ok=True)
    for client in CLIENTS:
        link = served / client.name
        source = repo / client.source
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.is_dir():
            shutil.rmtree(link)  # a copy left by an older build
        if source.is_dir():
            # Relative, so the checkout can move; relay/_served/NAME -> ../../clients/NAME.
            link.symlink_to(os.path.relpath(source, served), target_is_directory=True)
        elif client.required:
            raise BuildError(f"The served client {client.name!r} is missing: {source} is not a folder.")
    vendor(repo, served / VENDOR)


def _vendor_one(repo: Path, package: Vendored, target: Path) -> None:
    want = _locked(repo, package)
    if _stamp(target) == want:
        return
    prebuilt = repo / "relay" / SERVED / VENDOR / package.name
    if prebuilt.resolve() != target.resolve() and _stamp(prebuilt) == want:
        _fill(target, prebuilt, package, want, from_dist=False)
        return
    lock_dir = (repo / package.lock).parent
    installed = lock_dir / "node_modules" / package.package
    if _installed_matches(lock_dir, package, want):
        _fill(target, installed, package, want, from_dist=True)
        return
    npm = shutil.which("npm")
    if npm is None:
        raise BuildError(
            f"npm is needed once to vendor {package.package} {want['version']} for the web pages "
            f"(apt-get install npm, or run npm ci in {lock_dir}); an installed wheel does not need it."
        )
    with tempfile.TemporaryDirectory(prefix="tablerelay-vendor-") as tmp:
        work = Path(tmp)
        shutil.copy2(lock_dir / "package.json", work / "package.json")
        shutil.copy2(repo / package.lock, work / "package-lock.json")
        done = subprocess.run(  # noqa: S603 (npm from PATH with fixed arguments)
            [npm, "ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise BuildError(f"npm ci for {package.package} failed:\n{done.stdout}{done.stderr}".rstrip())
        if not _installed_matches(work, package, want):
            raise BuildError(f"npm ci did not install {package.package} {want['version']} from the lock.")
        _fill(target, work / "node_modules" / package.package, package, want, from_dist=True)


def _locked(repo: Path, package: Vendored) -> dict[str, str]:
    """The lock file's version and integrity for ``package``, with the vendoring choices: the stamp."""
    lock_path = repo / package.lock
    try:
        lock = json.loads(lock_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BuildError(f"Cannot read the lock file {lock_path}: {exc}.") from exc
    entry = lock.get("packages", {}).get(f"node_modules/{package.package}")
    if not isinstance(entry, dict) or "version" not in entry:
        raise BuildError(
            f"{package.package} is not in {package.lock}; add it with npm install in {lock_path.parent}."
        )
    return {
        "package": package.package,
        "version": str(entry["version"]),
        "integrity": str(entry.get("integrity", "")),
        "dist": package.dist,
        "include": " ".join(package.include),
    }


def _stamp(folder: Path) -> dict[str, str] | None:
    try:
        stamp = json.loads((folder / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def _installed_matches(lock_dir: Path, package: Vendored, want: dict[str, str]) -> bool:
    """Whether npm installed exactly the locked build in ``lock_dir/node_modules``.

    npm's own record of what it installed (``node_modules/.package-lock.json``) must name the lock's
    integrity hash; the package's version is checked as well, in case that record is stale.
    """
    modules = lock_dir / "node_modules"
    try:
        meta = json.loads((modules / package.package / "package.json").read_text(encoding="utf-8"))
        record = json.loads((modules / ".package-lock.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    entry = record.get("packages", {}).get(f"node_modules/{package.package}", {})
    return bool(
        meta.get("version") == want["version"]
        and isinstance(entry, dict)
        and entry.get("version") == want["version"]
        and entry.get("integrity", "") == want["integrity"]
    )


def _fill(target: Path, source: Path, package: Vendored, stamp: dict[str, str], *, from_dist: bool) -> None:
    """Replace ``target`` with the carried files of ``source`` (a package, or an earlier build)."""
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    dist = source / package.dist if from_dist else source
    if not dist.is_dir():
        raise BuildError(f"{package.package} has no folder {package.dist!r} to vendor.")
    for relative in _files(dist):
        if package.carries(relative):
            _copy(dist / relative, target / relative)
    # The package's licence travels with its code.
    for name in ("LICENSE", "LICENSE.md", "LICENSE.txt"):
        licence = source / name
        if licence.is_file():
            _copy(licence, target / name)
    (target / STAMP).write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf-8")


def _files(folder: Path) -> list[str]:
    """Files under ``folder`` as sorted slash-separated relative paths; skips node_modules while walking."""
    found: list[str] = []
    for here, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "node_modules" and not d.startswith(".")]
        base = Path(here).relative_to(folder)
        found.extend((base / name).as_posix() for name in names)
    return sorted(found)


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--develop", action="store_true", required=True, help="link the checkout's clients into relay/_served"
    )
    parser.parse_args(argv)
    try:
        develop(ROOT)
    except BuildError as exc:
        print(f"build_assets: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
