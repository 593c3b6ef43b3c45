"""Tier distributions of drawsteel.power against the exact ones, enumerated over all 100 (d10, d10) pairs.

The expected distributions come from ``reference_tier`` below, written straight from the seed's text
(not from the resolver), so these tests check the rules and the dice together: first every pair is
resolved with scripted dice and compared to the reference, then SecureDice samples are compared to the
exact distribution with a chi-square test (p-value threshold 1e-5, so a false alarm is rarer than 1e-4).
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from itertools import product

import pytest
from scipy.stats import chisquare

from rules import resolve
from rules.rng import Scripted, SecureDice

SAMPLES = 20_000
P_THRESHOLD = 1e-5
CHARACTERISTIC = 2

# (edges, banes) giving each edge state, one case per line of the seed's cancelling list where possible.
STATES = {
    "none": (1, 1),
    "edge": (2, 1),
    "double_edge": (3, 0),
    "bane": (1, 4),
    "double_bane": (0, 2),
}


def reference_tier(d1: int, d2: int, characteristic: int, state: str) -> int:
    """The seed's rules, read directly: a single edge or bane is ±2 on the total; a double one moves
    the tier by one within 1..3; a natural 19 or 20 is tier 3 regardless."""
    natural = d1 + d2
    if natural in (19, 20):
        return 3
    total = natural + characteristic + {"edge": 2, "bane": -2}.get(state, 0)
    tier = 1 if total <= 11 else 2 if total <= 16 else 3
    if state == "double_edge":
        return min(tier + 1, 3)
    if state == "double_bane":
        return max(tier - 1, 1)
    return tier


def exact_distribution(characteristic: int, state: str) -> dict[int, Fraction]:
    counts = Counter(reference_tier(a, b, characteristic, state) for a, b in product(range(1, 11), repeat=2))
    return {tier: Fraction(counts[tier], 100) for tier in (1, 2, 3)}


def test_reference_matches_the_seed_examples() -> None:
    # guards the reference itself: hand-checked figures for a characteristic of 2 with no edges
    assert exact_distribution(2, "none") == {1: Fraction(36, 100), 2: Fraction(43, 100), 3: Fraction(21, 100)}
    assert exact_distribution(2, "double_bane")[3] == Fraction(3, 100)  # only naturals 19 and 20
    assert exact_distribution(2, "double_edge")[1] == 0


@pytest.mark.parametrize("characteristic", [-3, 0, 2, 5])
@pytest.mark.parametrize("state", list(STATES))
def test_every_pair_matches_the_reference(state: str, characteristic: int) -> None:
    edges, banes = STATES[state]
    for d1, d2 in product(range(1, 11), repeat=2):
        result = resolve(
            {"system": "drawsteel.power", "characteristic": characteristic, "edges": edges, "banes": banes},
            rng=Scripted([d1, d2]),
        )
        assert result["edge_state"] == state
        assert result["tier"] == reference_tier(d1, d2, characteristic, state), (d1, d2)


@pytest.mark.slow
@pytest.mark.parametrize("state", list(STATES))
def test_tier_frequencies_match_the_exact_distribution(state: str) -> None:
    edges, banes = STATES[state]
    intent = {"system": "drawsteel.power", "characteristic": CHARACTERISTIC, "edges": edges, "banes": banes}
    dice = SecureDice()
    observed = Counter(resolve(intent, rng=dice)["tier"] for _ in range(SAMPLES))
    exact = exact_distribution(CHARACTERISTIC, state)
    # A tier the rules make impossible must never appear; the others go into the chi-square test.
    possible = [tier for tier in (1, 2, 3) if exact[tier] > 0]
    for tier in (1, 2, 3):
        if exact[tier] == 0:
            assert observed[tier] == 0, (state, tier)
    f_obs = [observed[tier] for tier in possible]
    f_exp = [float(exact[tier]) * SAMPLES for tier in possible]
    assert sum(f_obs) == SAMPLES
    p_value = chisquare(f_obs, f_exp).pvalue
    assert p_value > P_THRESHOLD, (state, dict(observed), f_exp, p_value)
