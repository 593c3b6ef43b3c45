"""A full store said once per episode: refusals between a few stored appends (a stream near its byte limit,
where a small event still fits and a roll does not) are one episode; only ``SETTLED`` stored appends in a row
end it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from structlog.testing import capture_logs

from relay.shell.observe.metrics import SETTLED, Fullness
from relay.storage.base import StoreFull


def _events(logs: list[Any]) -> list[object]:
    return [
        e["event"] for e in logs if isinstance(e, Mapping) and e["event"] in ("store_full", "store_writable")
    ]


def _episode(fullness: Fullness) -> bool:
    return fullness.episode  # read afresh: each call may change it


def test_flapping_near_the_limit_is_said_once_and_a_settled_store_says_the_next_refusal_again() -> None:
    fullness = Fullness()
    full = StoreFull("The disk is full.")
    with capture_logs() as logs:
        for seq in range(1, 20):
            fullness.refused(full, "r")
            assert fullness.full
            fullness.stored("r", seq)  # a small append that still fitted
            assert not fullness.full
        assert _episode(fullness)
        assert _events(logs) == ["store_full", "store_writable"]
        for seq in range(SETTLED):
            fullness.stored("r", 100 + seq)
        assert not _episode(fullness)
        fullness.refused(full, "r")
        assert _events(logs) == ["store_full", "store_writable", "store_full"]
