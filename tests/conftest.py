"""Suite-wide settings: in CI a skipped test is a failure, never a silent pass."""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import settings

from relay.shell import loops
from tests.packaging.wheel import Dist, Installed, build, built, install, venv_at

settings.register_profile("ci", deadline=None, max_examples=200, derandomize=True)
settings.register_profile("dev", deadline=None, max_examples=100)
# A long run of the property and state-machine tests (docs/hardening.md): HYPOTHESIS_PROFILE=long pytest …
settings.register_profile("long", deadline=None, max_examples=5000, stateful_step_count=100)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


# The workers (`./scripts/test`: pytest-xdist, stealing work) finish together when the long
# tests start first: the ones that start other programs (relay servers, NATS, Chromium, Node, the type
# checker) go ahead of the many short in-process tests of the rules and the relay, which fill the ends.
IN_PROCESS = ("tests/rules/", "tests/relay/")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one process keeps the files' order
        items.sort(key=lambda item: any(part in item.nodeid for part in IN_PROCESS))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which counts as a failure: {report.longrepr}"


# The project's sdist and wheel, built once per run, and the wheel installed in a clean venv: shared by the
# packaging tests and the browser test of an installed relay.


T = TypeVar("T")


def once(
    factory: pytest.TempPathFactory, name: str, make: Callable[[Path], T], found: Callable[[Path], T]
) -> T:
    """What ``make`` makes in a folder, made once per test run: pytest-xdist's workers share the folder (the
    first makes it while the others wait on a lock, then they take what it holds: ``found``)."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's folder, above each worker's own
    folder, made = base / name, base / f"{name}.made"
    with (base / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if made.exists():
            return found(folder)
        folder.mkdir(exist_ok=True)
        result = make(folder)
        made.touch()
        return result


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    return once(tmp_path_factory, "dist", build, built)


@pytest.fixture(scope="session")
def installed(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return once(tmp_path_factory, "wheel-venv", lambda root: install(dist.wheel, root), venv_at)


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, Any]:
    """Every async test runs on the event loop ``tablerelay serve`` runs on (``relay.shell.loops``: uvloop
    where it is installed, as it is with the package's dependencies)."""
    name, factory = loops.factory("auto")
    return {name: factory or asyncio.new_event_loop}
