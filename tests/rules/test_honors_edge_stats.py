"""Honor's Edge with the real random source, against exact distributions computed here.

The exact distribution of a kept total comes from a dynamic programme over the faces of one die
(exploding or not), walked from the highest value down, so the kept dice are always the first ones
placed. An exploding d10 has no largest value; the programme drops every chain of more than
``TENS`` tens, which is a probability of 10**-(TENS + 1) per die, at most 6e-7 for the largest pool
here, far below what these sample sizes can see (the standard error of a probability is about 3e-3).

False alarms: each z-test fails at |z| > 5 (two-sided probability 5.7e-7) and each chi-square test at
p < 1e-5. With 16 z-tests and 6 chi-square tests the whole file raises a false alarm with probability
below 7e-5.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import pytest
from scipy import stats

from rules import resolve
from rules.rng import SecureDice

TENS = 6
SAMPLES = 20_000
Z_LIMIT = 5.0
P_LIMIT = 1e-5

Distribution = dict[int, float]


def one_die(explode: bool) -> Distribution:
    """The value of one d10: an exploding chain of k tens then r in 1..9 is 10k + r, with P = 10**-(k+1)."""
    if not explode:
        return dict.fromkeys(range(1, 11), 0.1)
    return {10 * k + r: 10.0 ** -(k + 1) for k in range(TENS + 1) for r in range(1, 10)}


def kept_total(die: Distribution, rolled: int, kept: int) -> Distribution:
    """The distribution of the sum of the ``kept`` highest of ``rolled`` independent dice.

    Values are placed from the highest down: choosing how many of the not-yet-placed dice show value
    v (a binomial count) fixes how many of them are kept, because every die placed earlier is higher.
    """
    states: dict[tuple[int, int, int], float] = {(0, 0, 0): 1.0}  # (placed, kept so far, sum) -> P
    for value in sorted(die, reverse=True):
        p = die[value]
        following: dict[tuple[int, int, int], float] = defaultdict(float)
        for (placed, taken, total), weight in states.items():
            left = rolled - placed
            for count in range(left + 1):
                keep = min(count, kept - taken)
                chance = weight * math.comb(left, count) * p**count
                if chance < 1e-300:
                    break
                following[(placed + count, taken + keep, total + keep * value)] += chance
        states = following
    result: Distribution = defaultdict(float)
    for (placed, _taken, total), weight in states.items():
        if placed == rolled:
            result[total] += weight
    return dict(result)


def mean(dist: Distribution) -> float:
    return sum(total * p for total, p in dist.items())


def variance(dist: Distribution) -> float:
    mu = mean(dist)
    return sum((total - mu) ** 2 * p for total, p in dist.items())


def at_least(dist: Distribution, tn: int) -> float:
    return sum(p for total, p in dist.items() if total >= tn)


# --- the exact programme checked against brute force ---------------------------------------------------


@pytest.mark.parametrize(("rolled", "kept"), [(3, 2), (4, 1), (2, 4), (3, 3), (1, 0)])
def test_programme_matches_enumeration_without_explosions(rolled: int, kept: int) -> None:
    brute: Distribution = defaultdict(float)
    for faces in itertools.product(range(1, 11), repeat=rolled):
        brute[sum(sorted(faces, reverse=True)[:kept])] += 0.1**rolled
    exact = kept_total(one_die(False), rolled, kept)
    assert exact.keys() == brute.keys()
    for total, p in brute.items():
        assert exact[total] == pytest.approx(p, abs=1e-12)


def test_programme_for_one_exploding_die_matches_its_closed_form() -> None:
    # E[one exploding d10] = 5.5 / (1 - 1/10); the missing tail is below 1e-7 of mass.
    dist = kept_total(one_die(True), 1, 1)
    assert sum(dist.values()) == pytest.approx(1, abs=2e-7)
    assert mean(dist) == pytest.approx(5.5 / 0.9, abs=1e-4)
    # Two exploding dice keep 1: P(max >= 10) = 1 - 0.9**2.
    assert at_least(kept_total(one_die(True), 2, 1), 10) == pytest.approx(1 - 0.81, abs=1e-6)


# --- the real dice -------------------------------------------------------------------------------------

POOLS = [
    (3, 2, True),
    (5, 3, True),
    (6, 3, True),
    (5, 3, False),
    (2, 4, True),
]


def sample(rolled: int, kept: int, explode: bool) -> list[int]:
    dice = SecureDice()
    intent = {"system": "honors_edge.roll", "rolled": rolled, "kept": kept, "explode": explode}
    return [resolve(intent, rng=dice)["total"] for _ in range(SAMPLES)]


def z_of_proportion(hits: int, p: float) -> float:
    return (hits - SAMPLES * p) / math.sqrt(SAMPLES * p * (1 - p))


@pytest.mark.slow
@pytest.mark.parametrize(("rolled", "kept", "explode"), POOLS)
def test_totals_follow_the_exact_distribution(rolled: int, kept: int, explode: bool) -> None:
    exact = kept_total(one_die(explode), rolled, kept)
    totals = sample(rolled, kept, explode)

    mu, sd = mean(exact), math.sqrt(variance(exact))
    z_mean = (sum(totals) / SAMPLES - mu) / (sd / math.sqrt(SAMPLES))
    assert abs(z_mean) < Z_LIMIT, f"{rolled}k{kept}: mean {sum(totals) / SAMPLES:.3f} vs {mu:.3f}"

    for tn in (15, 20):
        p = at_least(exact, tn)
        hits = sum(1 for t in totals if t >= tn)
        z = z_of_proportion(hits, p)
        assert abs(z) < Z_LIMIT, f"{rolled}k{kept} vs TN {tn}: {hits / SAMPLES:.4f} vs {p:.4f}"

    # Chi-square over the totals, merging values (in order) until each bin expects at least 20.
    observed_by_total: dict[int, int] = defaultdict(int)
    for t in totals:
        observed_by_total[t] += 1
    assert set(observed_by_total) <= set(exact), "a total the rules cannot produce"
    bins: list[tuple[float, int]] = []
    expected = observed = 0.0
    for total in sorted(exact):
        expected += exact[total] * SAMPLES
        observed += observed_by_total.get(total, 0)
        if expected >= 20:
            bins.append((expected, int(observed)))
            expected = observed = 0.0
    # The tail (and the truncated mass) joins the last bin.
    _, last_observed = bins.pop()
    bins.append((SAMPLES - sum(e for e, _ in bins), int(last_observed + observed)))
    assert sum(o for _, o in bins) == SAMPLES
    chi2 = sum((o - e) ** 2 / e for e, o in bins)
    p_value = stats.chi2.sf(chi2, len(bins) - 1)
    assert p_value >= P_LIMIT, f"{rolled}k{kept}: chi-square {chi2:.1f}, {len(bins)} bins, p={p_value:.2e}"


@pytest.mark.slow
def test_one_die_in_ten_explodes_and_chains_are_one_die() -> None:
    dice = SecureDice()
    n = SAMPLES
    firsts: list[int] = []
    exploded = 0
    for _ in range(n // 4):
        result = resolve({"system": "honors_edge.roll", "pool": "4k4"}, rng=dice)
        assert len(result["dice"]) == 4
        for d in result["dice"]:
            assert d["value"] == sum(d["chain"])
            assert d["exploded"] is (d["chain"][0] == 10)
            assert all(face == 10 for face in d["chain"][:-1])
            assert d["chain"][-1] != 10
            firsts.append(d["chain"][0])
            exploded += d["exploded"]
    z = z_of_proportion(exploded, 0.1)
    assert abs(z) < Z_LIMIT, exploded / n
    counts = [firsts.count(face) for face in range(1, 11)]
    assert stats.chisquare(counts).pvalue >= P_LIMIT, counts
