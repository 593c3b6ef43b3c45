"""The dice figures for docs/benchmarks.md, measured by ``bench.sections.dice`` (the notation issue's
benchmark).

``bench.sections.dice`` owns the method (alternating timed batches, its formulas and intents) and hands its
numbers over as data through ``results()``; this is the suite's one place that calls it.
"""

from __future__ import annotations

from typing import Any

from bench.sections import dice


def measure(quick: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = dice.results(quick=quick)
    return data
