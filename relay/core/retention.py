"""How long joins and leaves stay in sight: ``limits.presence_days`` (0, the default: always).

The choice (docs/campaigns.md): joins and leaves stay in the log. Every seq is there, every event signs
and verifies, an export has no hole, and a resume still receives exactly the gap it missed (the
protocol's guarantee, and the JS client's gap check, depend on it). What the setting changes is what a
*fresh* welcome shows: its history leaves out joins and leaves older than the given number of days, so a
months-long campaign's latest hundred events are its rolls, not its reconnects. The welcome's ``seq`` and
state are unchanged; the history is already a window on the log, and a window may skip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PRESENCE_KINDS = ("join", "leave")
DAY_MS = 24 * 3600 * 1000


def shown(records: list[Mapping[str, Any]], now_ms: int, days: float) -> list[Mapping[str, Any]]:
    """``records`` less the joins and leaves older than ``days`` (all of them when ``days`` ≤ 0)."""
    if days <= 0:
        return records
    oldest = now_ms - int(days * DAY_MS)
    return [r for r in records if r["kind"] not in PRESENCE_KINDS or r["ts"] >= oldest]
