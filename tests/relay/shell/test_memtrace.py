"""TABLERELAY_TRACEMALLOC: off unless asked, and when on, the site that grew is the one reported."""

from __future__ import annotations

import tracemalloc

from relay.shell.observe import memtrace


def test_off_unless_a_whole_number_of_frames_is_given() -> None:
    assert memtrace.from_env({}) is None
    assert memtrace.from_env({"TABLERELAY_TRACEMALLOC": ""}) is None
    assert memtrace.from_env({"TABLERELAY_TRACEMALLOC": "0"}) is None
    assert memtrace.from_env({"TABLERELAY_TRACEMALLOC": "yes"}) is None, "ignored with a warning"
    assert not tracemalloc.is_tracing()


def test_the_site_that_grew_comes_first() -> None:
    tracing = memtrace.from_env({"TABLERELAY_TRACEMALLOC": "1"})
    assert tracing is not None
    try:
        kept = [bytearray(1000) for _ in range(2000)]  # about 2 MB from one line of this file
        report = tracing.report()
        top = report["sites"][0]
        assert top["at"].startswith("shell/test_memtrace.py:"), report["sites"][:3]
        assert top["blocks_added"] >= 2000
        assert top["kib_added"] >= 1900
        assert report["traced_kib"] >= 1900
        kept.clear()
        after = tracing.report()
        assert after["sites"][0]["at"] == top["at"]
        assert after["sites"][0]["kib_added"] <= -1900, "freed: reported as shrinking"
    finally:
        tracemalloc.stop()
