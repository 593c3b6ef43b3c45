"""Dice throughput: tablerelay's rules core against avrae's ``d20`` library, measured in the same run.

Run: ``.venv/bin/python -m bench.sections.dice`` (needs the ``bench`` extra for ``d20``). For each formula
it rolls ours (``rules.dice.evaluate`` with ``SecureDice``, the CSPRNG: total, terms and the one-line text)
and d20's ``d20.roll`` with Python's ``random`` (total, tree and its result string) in alternating timed
batches, and prints the rolls per second of each, their ratio, and the median ratio. System intents
(``rules.resolve``, whose result is a plain dict with its text) are measured against d20 rolling the same
dice and writing its result string.

Fairness: the same formulas and the same loop for both; both parsers' caches are warm (d20 keeps parsed
trees in an LFU cache, ours in an LRU cache) because the first batch of each warms them. d20 builds its
result string only when ``.result`` is read and ours always builds its text, so each call reads
``.total`` and ``.result`` of d20's roll and ``.total``, ``.terms`` and ``.text`` of ours: both do the
whole job every time. Nothing is cached between rolls on either side.

Noise: the two run in alternating short batches and each keeps its best batch, as ``timeit`` advises,
because a busy machine can only slow a batch down, never speed it up; the ratio of the two bests is
what a shared CI machine reproduces. The absolute rates move with the machine, the ratio much less.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import d20

import rules
from rules.dice import evaluate
from rules.rng import SecureDice

#: (our formula, d20's spelling of the same roll)
FORMULAS = [
    ("1d20+5", "1d20+5"),
    ("4d6kh3", "4d6kh3"),
    ("8d6", "8d6"),
    ("2d20kh1+7", "2d20kh1+7"),
    ("10d10x", "10d10e10"),
    ("3d6+2d8+1d4+5", "3d6+2d8+1d4+5"),
    ("100d6", "100d6"),
]

#: (system intent, d20's formula for the same dice)
INTENTS: list[tuple[dict[str, Any], str]] = [
    ({"system": "drawsteel.power", "characteristic": 2}, "2d10+2"),
    ({"system": "daggerheart.duality", "modifier": 2}, "1d12+1d12+2"),
    ({"system": "honors_edge.roll", "pool": "5k3"}, "5d10e10kh3"),
    ({"system": "nexus.test", "attribute_die": "d8", "skill_rank": 2}, "1d8+1d6+2"),
]

BATCH_SECONDS = 0.025
ROUNDS = 21


def _rate(fn: Callable[[], object]) -> float:
    """Calls per second of ``fn`` over one batch of about ``BATCH_SECONDS``."""
    n = 0
    start = time.perf_counter()
    deadline = start + BATCH_SECONDS
    while True:
        for _ in range(50):
            fn()
        n += 50
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def compare(
    ours: Callable[[], object], theirs: Callable[[], object], rounds: int | None = None
) -> tuple[float, float]:
    """Best rates of ``ours`` and ``theirs`` over ``rounds`` (default ``ROUNDS``) alternating batches.

    See the module docstring for why the best batch and not the median.
    """
    a, b = [], []
    for _ in range(ROUNDS if rounds is None else rounds):
        a.append(_rate(ours))
        b.append(_rate(theirs))
    return max(a), max(b)


def ours_formula(formula: str, rng: SecureDice) -> Callable[[], object]:
    """One roll of ``formula`` by our engine, every output read."""

    def run() -> object:
        ev = evaluate(formula, rng)
        return ev.total, ev.terms, ev.text

    return run


def d20_formula(formula: str) -> Callable[[], object]:
    """One roll of ``formula`` by d20, its total and result string read (d20 builds the string lazily)."""

    def run() -> object:
        result = d20.roll(formula)
        return result.total, result.result

    return run


def ours_intent(intent: dict[str, Any], rng: SecureDice) -> Callable[[], object]:
    """One resolution of ``intent``: the result dict, text included."""

    def run() -> object:
        return rules.resolve(intent, rng=rng)

    return run


def machine() -> str:
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, d20 {d20_version()}"


def d20_version() -> str:
    try:
        from importlib.metadata import version

        return version("d20")
    except Exception:  # pragma: no cover - only for the banner
        return "?"


def results(quick: bool = False) -> dict[str, Any]:
    """Every measurement of ``main`` as data (what the benchmark report reads).

    ``quick`` runs 5 rounds instead of ``ROUNDS``: a rough figure in a fraction of the time.
    """
    rounds = 5 if quick else ROUNDS
    rng = SecureDice()

    def pair(ours: Callable[[], object], theirs: Callable[[], object]) -> tuple[float, float]:
        return compare(ours, theirs, rounds)

    formulas: list[dict[str, Any]] = []
    for ours, theirs in FORMULAS:
        mine, other = pair(ours_formula(ours, rng), d20_formula(theirs))
        formulas.append({"ours": ours, "d20": theirs, "ours_rate": mine, "d20_rate": other})
    known = rules.systems()
    intents: list[dict[str, Any]] = []
    for intent, theirs in INTENTS:
        if intent["system"] not in known:
            continue
        mine, other = pair(ours_intent(intent, rng), d20_formula(theirs))
        intents.append({"intent": intent, "d20": theirs, "ours_rate": mine, "d20_rate": other})
    # The dice system end to end: resolve() builds the full result (dice list included).
    mine, other = pair(ours_intent({"system": "dice", "formula": "4d6kh3"}, rng), d20_formula("4d6kh3"))
    formula_ratios = [f["ours_rate"] / f["d20_rate"] for f in formulas]
    intent_ratios = [i["ours_rate"] / i["d20_rate"] for i in intents]
    return {
        "machine": machine(),
        "rounds": rounds,
        "batch_seconds": BATCH_SECONDS,
        "method": "best of alternating batches; d20's total and result string read on every roll",
        "formulas": formulas,
        "formula_median": statistics.median(formula_ratios),
        "intents": intents,
        "intent_median": statistics.median(intent_ratios) if intent_ratios else None,
        "suite_median": statistics.median(formula_ratios + intent_ratios),
        "resolve_full": {"formula": "4d6kh3", "ours_rate": mine, "d20_rate": other},
    }


def main() -> int:
    print(f"dice benchmark on {machine()}")
    data = results()
    print(f"{'formula':<44} {'ours/s':>10} {'d20/s':>10} {'ratio':>7}")
    for f in data["formulas"]:
        label = f["ours"] if f["ours"] == f["d20"] else f"{f['ours']} (d20: {f['d20']})"
        _row(label, f["ours_rate"], f["d20_rate"])
    print(f"median ratio over formulas: {data['formula_median']:.2f}x")
    known = rules.systems()
    for intent, _ in INTENTS:
        if intent["system"] not in known:
            print(f"{intent['system']:<44} (not available)")
    for i in data["intents"]:
        _row(f"{i['intent']['system']} (d20: {i['d20']})", i["ours_rate"], i["d20_rate"])
    full = data["resolve_full"]
    _row(f"resolve dice {full['formula']} (full result)", full["ours_rate"], full["d20_rate"])
    if data["intent_median"] is not None:
        print(f"median ratio over system intents: {data['intent_median']:.2f}x")
    print(f"median ratio over the suite (formulas and intents): {data['suite_median']:.2f}x")
    return 0


def _row(label: str, mine: float, theirs: float) -> None:
    print(f"{label:<44} {mine:>10,.0f} {theirs:>10,.0f} {mine / theirs:>6.2f}x")


if __name__ == "__main__":
    sys.exit(main())
