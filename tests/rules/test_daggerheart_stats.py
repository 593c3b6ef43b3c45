"""Daggerheart with the real dice: outcome frequencies against exact distributions enumerated here.

Each test draws a fixed number of rolls from ``SecureDice`` and runs a chi-square goodness-of-fit test;
a p-value below 1e-5 fails, so a correct implementation fails any one test less than once in 100,000
runs (all of them together well under 1e-4).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable
from fractions import Fraction
from itertools import product
from typing import Any

import pytest
from scipy.stats import chisquare

from rules import resolve
from rules.rng import SecureDice
from rules.systems.daggerheart.duality import duality_outcome

P_MIN = 1e-5
SAMPLES = 30_000


def assert_fits(observed: Counter[Hashable], exact: dict[Hashable, Fraction], samples: int) -> None:
    """Chi-square of ``observed`` against ``exact``; impossible categories must never be seen."""
    assert sum(exact.values()) == 1
    impossible = {k for k, p in exact.items() if p == 0}
    assert not (set(observed) - set(exact)), (
        f"outcomes the rules cannot produce: {set(observed) - set(exact)}"
    )
    assert not any(observed[k] for k in impossible), f"impossible outcomes seen: {observed}"
    keys = [k for k, p in exact.items() if p > 0]
    expected = [float(exact[k]) * samples for k in keys]
    assert min(expected) >= 5, "too few samples for a chi-square test"
    _, p_value = chisquare([observed[k] for k in keys], expected)
    assert p_value > P_MIN, (
        f"p = {p_value:.2e}; observed {dict(observed)}, expected {dict(zip(keys, expected, strict=True))}"
    )


def distribution(outcomes: Iterable[tuple[Hashable, int]]) -> dict[Hashable, Fraction]:
    """Equally likely (outcome, weight) pairs to exact probabilities."""
    counts: Counter[Hashable] = Counter()
    for key, weight in outcomes:
        counts[key] += weight
    total = sum(counts.values())
    return {k: Fraction(n, total) for k, n in counts.items()}


def duality_exact(modifier: int, difficulty: int, d6_sign: int) -> dict[Hashable, Fraction]:
    """(with, success) over every Hope/Fear pair and, when ``d6_sign`` is ±1, every advantage d6."""
    d6_faces = [0] if d6_sign == 0 else [d6_sign * f for f in range(1, 7)]

    def outcomes() -> Iterable[tuple[Hashable, int]]:
        for hope, fear, extra in product(range(1, 13), range(1, 13), d6_faces):
            outcome = duality_outcome(hope, fear)
            success = outcome == "critical" or hope + fear + extra + modifier >= difficulty
            yield (outcome, success), 1

    exact = distribution(outcomes())
    for outcome in ("hope", "fear", "critical"):
        for success in (True, False):
            exact.setdefault((outcome, success), Fraction(0))
    return exact


@pytest.mark.parametrize(
    ("args", "d6_sign"),
    [
        ({"modifier": 1, "difficulty": 14}, 0),
        ({"modifier": 1, "difficulty": 17, "advantage": 1}, 1),
        ({"modifier": 0, "difficulty": 10, "advantage": 1, "disadvantage": 2}, -1),
        ({"modifier": 2, "difficulty": 13, "advantage": 2, "disadvantage": 2}, 0),
    ],
)
def test_duality_outcomes_and_success_match_the_exact_distribution(
    args: dict[str, Any], d6_sign: int
) -> None:
    rng = SecureDice()
    observed: Counter[Hashable] = Counter()
    intent = {"system": "daggerheart.duality", **args}
    for _ in range(SAMPLES):
        result = resolve(intent, rng=rng)
        observed[(result["with"], result["success"])] += 1
        # Every roll's parts add up and its effect follows its outcome.
        assert result["total"] == (
            result["hope_die"] + result["fear_die"] + (result["advantage_die"] or 0) + args["modifier"]
        )
        gain = "fear" if result["with"] == "fear" else "hope"
        assert result["effects"] == [{"resource": gain, "delta": 1}]
    assert_fits(observed, duality_exact(args["modifier"], args["difficulty"], d6_sign), SAMPLES)


def test_hope_and_fear_faces_are_uniform_and_independent() -> None:
    rng = SecureDice()
    observed: Counter[Hashable] = Counter()
    samples = 14_400  # 100 per (hope, fear) pair
    for _ in range(samples):
        result = resolve({"system": "daggerheart.duality"}, rng=rng)
        observed[(result["hope_die"], result["fear_die"])] += 1
    exact: dict[Hashable, Fraction] = {pair: Fraction(1, 144) for pair in product(range(1, 13), range(1, 13))}
    assert_fits(observed, exact, samples)


def attack_exact(modifier: int, evasion: int, mode: str) -> dict[Hashable, Fraction]:
    """(critical, hit) for the kept d20 under ``mode`` against one Evasion."""

    def outcomes() -> Iterable[tuple[Hashable, int]]:
        for a, b in product(range(1, 21), range(1, 21)):
            natural = {"normal": a, "advantage": max(a, b), "disadvantage": min(a, b)}[mode]
            critical = natural == 20
            yield (critical, critical or natural + modifier >= evasion), 1

    exact = distribution(outcomes())
    exact.setdefault((True, False), Fraction(0))
    return exact


@pytest.mark.parametrize(
    ("flags", "mode"),
    [
        ({}, "normal"),
        ({"advantage": True}, "advantage"),
        ({"disadvantage": True}, "disadvantage"),
        ({"advantage": True, "disadvantage": True}, "normal"),
    ],
)
def test_adversary_hit_probability_matches_the_exact_distribution(flags: dict[str, bool], mode: str) -> None:
    # Evasion 25 with +3 needs a natural 22: only the natural 20 hits, so crits are checked separately
    # from ordinary hits with the second target.
    rng = SecureDice()
    intent = {
        "system": "daggerheart.attack",
        "modifier": 3,
        "targets": [{"name": "nimble", "evasion": 25}, {"name": "plain", "evasion": 14}],
        **flags,
    }
    high: Counter[Hashable] = Counter()
    plain: Counter[Hashable] = Counter()
    for _ in range(SAMPLES):
        result = resolve(intent, rng=rng)
        first, second = result["targets"]
        high[(first["critical"], first["hit"])] += 1
        plain[(second["critical"], second["hit"])] += 1
        assert sum(1 for d in result["dice"] if d["kept"]) == 1
    assert_fits(high, attack_exact(3, 25, mode), SAMPLES)
    assert_fits(plain, attack_exact(3, 14, mode), SAMPLES)
