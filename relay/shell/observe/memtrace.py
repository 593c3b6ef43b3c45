"""Opt-in allocation tracing, for an operator chasing memory growth: ``TABLERELAY_TRACEMALLOC=N``.

With the variable set to a whole number N ≥ 1 the server starts ``tracemalloc`` (keeping N frames per
allocation) and, once a minute from the upkeep task, logs ``memory_sites``: the allocation sites whose
live size grew most since the previous minute (file:line, KiB and block count added, totals now). The
lines compare with each other, so a site that grows minute after minute is the one to look at.

Off (unset, empty or ``0``), it costs nothing: no tracing is started and the upkeep does one ``is None``
check a minute. On, tracemalloc slows every allocation noticeably and takes memory of its own: a
diagnosis tool, not something to leave on (docs/hardening.md).
"""

from __future__ import annotations

import gc
import os
import time
import tracemalloc
from collections.abc import Mapping
from typing import Any

from relay.settings.logs import get_logger

logger = get_logger("relay.memtrace")

#: Sites reported per ``memory_sites`` line.
TOP = 12


class MemTrace:
    """Snapshots a minute apart; ``report()`` gives the sites that grew most since the last one."""

    def __init__(self, frames: int) -> None:
        self.frames = frames
        if not tracemalloc.is_tracing():
            tracemalloc.start(frames)
        self._last = self._snapshot()

    @staticmethod
    def _snapshot() -> tracemalloc.Snapshot:
        return tracemalloc.take_snapshot().filter_traces(
            (
                tracemalloc.Filter(False, tracemalloc.__file__),
                tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
                tracemalloc.Filter(False, "<unknown>"),
            )
        )

    def report(self) -> dict[str, Any]:
        # A full collection first: the sites then hold live objects, not cycles waiting for the collector;
        # how many it found, and how long it took, is itself worth knowing.
        begun = time.perf_counter()
        unreachable = gc.collect()
        collect_ms = round((time.perf_counter() - begun) * 1000, 1)
        now = self._snapshot()
        key = "traceback" if self.frames > 1 else "lineno"
        diffs = now.compare_to(self._last, key)
        self._last = now
        traced, peak = tracemalloc.get_traced_memory()
        sites = []
        for diff in diffs[:TOP]:
            # file:line only: formatting with source lines would fill linecache, itself a traced "growth"
            at = " < ".join(f"{_short(f.filename)}:{f.lineno}" for f in reversed(diff.traceback))
            sites.append(
                {
                    "at": at,
                    "kib_added": round(diff.size_diff / 1024, 1),
                    "blocks_added": diff.count_diff,
                    "kib": round(diff.size / 1024, 1),
                    "blocks": diff.count,
                }
            )
        return {
            "traced_kib": traced // 1024,
            "peak_kib": peak // 1024,
            "unreachable": unreachable,
            "collect_ms": collect_ms,
            "sites": sites,
        }


def _short(filename: str) -> str:
    """``relay/core/state.py`` or ``websockets/server.py`` rather than the whole path."""
    parts = filename.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


def from_env(environ: Mapping[str, str] = os.environ) -> MemTrace | None:
    """A MemTrace when ``TABLERELAY_TRACEMALLOC`` is a whole number ≥ 1, else None (off)."""
    raw = environ.get("TABLERELAY_TRACEMALLOC", "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        logger.warning("tracemalloc_ignored", value=raw, reason="not a whole number of frames")
        return None
    frames = int(raw)
    return MemTrace(min(frames, 64)) if frames >= 1 else None
