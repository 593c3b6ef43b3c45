"""Which event loop ``tablerelay serve`` runs on (relay.shell.loops): uvloop by default, asyncio as the
fallback."""

from __future__ import annotations

import asyncio
import sys

import pytest

from relay.settings.config import load
from relay.shell import loops


async def test_the_tests_run_on_the_loop_the_server_runs_on() -> None:
    # tests/conftest.py hands pytest-asyncio the factory ``serve`` uses; uvloop is a dependency.
    assert type(asyncio.get_running_loop()).__module__.startswith("uvloop")


def test_auto_is_the_default_and_takes_uvloop_when_it_is_installed() -> None:
    assert load(environ={}).event_loop == "auto"
    name, factory = loops.factory("auto")
    assert name == "uvloop"
    assert factory is not None
    loop = factory()
    try:
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()
    assert loops.factory("asyncio") == ("asyncio", None)


def test_without_uvloop_auto_falls_back_and_uvloop_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # importing it now raises ImportError
    assert loops.factory("auto") == ("asyncio", None)
    with pytest.raises(loops.LoopUnavailable, match="uvloop is not installed"):
        loops.factory("uvloop")


def test_an_unknown_choice_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="auto, uvloop, asyncio"):
        loops.factory("trio")
    assert load(environ={"TABLERELAY_EVENT_LOOP": "asyncio"}).event_loop == "asyncio"
