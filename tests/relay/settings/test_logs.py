"""The relay's loggers follow each ``configure``: level, format and stream."""

from __future__ import annotations

import io
import json

from relay.settings import logs


def test_a_logger_rebinds_after_each_configure() -> None:
    log = logs.get_logger("relay.test")
    first, second = io.StringIO(), io.StringIO()
    logs.configure("json", "info", stream=first)
    log.info("one", n=1)
    log.debug("hidden", n=2)
    logs.configure("json", "debug", stream=second)
    log.debug("two", n=3)
    assert [json.loads(line)["event"] for line in first.getvalue().splitlines()] == ["one"]
    assert [json.loads(line)["event"] for line in second.getvalue().splitlines()] == ["two"]
    logs.configure("json", "info", stream=io.StringIO())


def test_the_hot_path_knows_whether_debug_lines_are_kept() -> None:
    logs.configure("json", "debug", stream=io.StringIO())
    assert logs.debug_enabled()
    logs.configure("json", "info", stream=io.StringIO())
    assert not logs.debug_enabled()
