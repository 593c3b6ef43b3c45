"""Steps both dialects share: comparing a die with a target, and keeping or dropping dice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rules.dice.arith import Number

Result = dict[str, Any]


def compare(value: Number, op: str, target: Number) -> bool:
    """``value op target`` for ``op`` in ``= < <= > >=``."""
    if op == "=":
        return value == target
    if op == ">=":
        return value >= target
    if op == "<=":
        return value <= target
    if op == ">":
        return value > target
    return value < target


def _face(r: Result) -> Number:
    value: Number = r["result"]
    return value


def keep_or_drop(
    results: list[Result],
    number: int,
    *,
    keep: bool,
    highest: bool,
    value: Callable[[Result], Number] = _face,
) -> None:
    """Mark active results ``discarded`` so that ``number`` are kept (``keep``) or dropped.

    Among equal values the earlier result is discarded first, as Foundry VTT does; asking to keep
    more than there are keeps them all.
    """
    active = [i for i, r in enumerate(results) if r["active"]]
    discard = len(active) - number if keep else number
    discard = max(0, min(discard, len(active)))
    if not discard:
        return
    lowest_first = keep == highest  # keeping the highest (or dropping the lowest) discards low values
    if lowest_first:
        order = sorted(active, key=lambda i: (value(results[i]), i))
    else:
        order = sorted(active, key=lambda i: (-value(results[i]), i))
    for i in order[:discard]:
        r = results[i]
        r["discarded"] = True
        r["active"] = False


def kept_after(count: int, number: int, *, keep: bool) -> int:
    """How many of ``count`` dice remain after keeping or dropping ``number``."""
    if keep:
        return min(count, max(number, 0))
    return max(count - number, 0)
