"""Nexus RPG with the real dice: success levels and checks against exact distributions enumerated here.

Each test draws a fixed number of rolls from ``SecureDice`` and runs a chi-square goodness-of-fit test;
a p-value below 1e-5 fails, so a correct implementation fails any one test less than once in 100,000
runs (all of them together well under 1e-4).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from fractions import Fraction
from itertools import product
from typing import Any

import pytest
from scipy.stats import chisquare

from rules import resolve
from rules.rng import SecureDice

P_MIN = 1e-5
SAMPLES = 30_000
LEVELS = ("blunder", "failure", "weak", "strong", "critical")

#: attribute die name -> (faces, adjustment), written out here rather than imported so the test
#: checks the rules module instead of repeating it.
ATTRIBUTE = {"d4-1": (4, -1), "d6": (6, 0), "d8": (8, 0), "d12+1": (12, 1)}


def assert_fits(observed: Counter[Hashable], exact: dict[Hashable, Fraction], samples: int) -> None:
    """Chi-square of ``observed`` against ``exact``; impossible categories must never be seen."""
    assert sum(exact.values()) == 1
    assert not (set(observed) - set(exact)), (
        f"outcomes the rules cannot produce: {set(observed) - set(exact)}"
    )
    assert not any(observed[k] for k, p in exact.items() if p == 0), f"impossible outcomes seen: {observed}"
    keys = [k for k, p in exact.items() if p > 0]
    expected = [float(exact[k]) * samples for k in keys]
    assert min(expected) >= 5, "too few samples for a chi-square test"
    _, p_value = chisquare([observed[k] for k in keys], expected)
    assert p_value > P_MIN, (
        f"p = {p_value:.2e}; observed {dict(observed)}, expected {dict(zip(keys, expected, strict=True))}"
    )


def level_of(difference: int) -> str:
    # The seed's table, restated independently of the module under test.
    if difference >= 6:
        return "critical"
    if difference >= 3:
        return "strong"
    if difference >= 0:
        return "weak"
    if difference >= -5:
        return "failure"
    return "blunder"


def skill_exact(attribute: str, rank: int, net: int, tn: int) -> dict[Hashable, Fraction]:
    """Success levels over every attribute face and every d6 (two d6 when boons or banes are left)."""
    faces, adjust = ATTRIBUTE[attribute]
    counts: Counter[Hashable] = Counter()
    d6_sets = list(product(range(1, 7), repeat=1 if net == 0 else 2))
    extra = max(0, abs(net) - 1) * (1 if net > 0 else -1)
    for face, d6 in product(range(1, faces + 1), d6_sets):
        used = max(d6) if net > 0 else min(d6)
        total = face + adjust + used + rank + extra
        counts[level_of(total - tn)] += 1
    size = sum(counts.values())
    return {level: Fraction(counts[level], size) for level in LEVELS}


@pytest.mark.parametrize(
    ("args", "net"),
    [
        ({"attribute_die": "d4-1", "skill_rank": 2}, 0),
        ({"attribute_die": "d8", "skill_rank": 1, "boons": 1}, 1),
        ({"attribute_die": "d8", "skill_rank": 3, "banes": 3, "boons": 1}, -2),
        ({"attribute_die": "d12+1", "boons": 3, "tn": 12}, 3),
        ({"attribute_die": "d6", "skill_rank": 2, "skill_type": "combat", "trained": False}, -1),
    ],
)
def test_success_levels_match_the_exact_distribution(args: dict[str, Any], net: int) -> None:
    rng = SecureDice()
    intent = {"system": "nexus.test", **args}
    observed: Counter[Hashable] = Counter()
    for _ in range(SAMPLES):
        result = resolve(intent, rng=rng)
        observed[result["success_level"]] += 1
        assert result["net_boons"] == net
        assert len(result["d6"]) == (1 if net == 0 else 2)
    exact = skill_exact(args["attribute_die"], args.get("skill_rank", 0), net, args.get("tn", 8))
    assert_fits(observed, exact, SAMPLES)


@pytest.mark.parametrize("die", ["d4", "d6", "d8", "d10", "d12"])
def test_supply_steps_down_one_time_in_faces_over_two(die: str) -> None:
    faces = int(die[1:])
    rng = SecureDice()
    samples = 6_000
    observed: Counter[Hashable] = Counter()
    for _ in range(samples):
        result = resolve({"system": "nexus.check", "kind": "supply", "die": die}, rng=rng)
        observed[result["outcome"] != die] += 1
    assert_fits(observed, {True: Fraction(2, faces), False: Fraction(faces - 2, faces)}, samples)


def test_frightened_outcomes_match_the_d6() -> None:
    rng = SecureDice()
    samples = 6_000
    observed: Counter[Hashable] = Counter()
    for _ in range(samples):
        result = resolve({"system": "nexus.check", "kind": "individual", "table": "frightened"}, rng=rng)
        observed[(result["outcome"]["from"], result["outcome"]["to"])] += 1
    exact: dict[Hashable, Fraction] = {(1, 1): Fraction(1, 6), (2, 5): Fraction(4, 6), (6, 6): Fraction(1, 6)}
    assert_fits(observed, exact, samples)
