"""The dice figures for docs/benchmarks.md, measured with ``bench.dice`` (the notation issue's benchmark).

``bench.dice`` owns the method (alternating timed batches, medians, its formulas and intents); this only
runs it and keeps the numbers as data for the report instead of printing them.
"""

from __future__ import annotations

import statistics
from typing import Any

import rules
from bench import dice
from rules.rng import SecureDice


def measure(quick: bool = False) -> dict[str, Any]:
    if hasattr(dice, "results"):  # the dice benchmark's own data API, when it has one
        data: dict[str, Any] = dice.results(quick=quick)
        return data
    saved = dice.ROUNDS
    if quick:
        dice.ROUNDS = 3
    try:
        return _measure()
    finally:
        dice.ROUNDS = saved


def _measure() -> dict[str, Any]:
    rng = SecureDice()
    formulas = []
    for ours, theirs in dice.FORMULAS:
        mine, other = dice.compare(
            lambda f=ours: dice.evaluate(f, rng),  # type: ignore[misc]
            lambda g=theirs: dice.d20.roll(g),  # type: ignore[misc]
        )
        formulas.append({"ours": ours, "d20": theirs, "ours_rate": mine, "d20_rate": other})
    known = rules.systems()
    intents = []
    for intent, theirs in dice.INTENTS:
        if intent["system"] not in known:
            continue
        mine, other = dice.compare(
            lambda i=intent: rules.resolve(i, rng=rng),  # type: ignore[misc]
            lambda g=theirs: dice.d20.roll(g),  # type: ignore[misc]
        )
        intents.append({"intent": intent, "d20": theirs, "ours_rate": mine, "d20_rate": other})
    mine, other = dice.compare(
        lambda: rules.resolve({"system": "dice", "formula": "4d6kh3"}, rng=rng),
        lambda: dice.d20.roll("4d6kh3"),
    )
    full = {"formula": "4d6kh3", "ours_rate": mine, "d20_rate": other}
    return {
        "machine": dice.machine(),
        "rounds": dice.ROUNDS,
        "batch_seconds": dice.BATCH_SECONDS,
        "formulas": formulas,
        "formula_median": statistics.median(f["ours_rate"] / f["d20_rate"] for f in formulas),
        "intents": intents,
        "resolve_full": full,
    }
