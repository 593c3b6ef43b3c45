"""How Draw Steel rolls are written for people: formulas and the steps that led to a tier."""

from __future__ import annotations

from collections.abc import Sequence

from rules.result import signed
from rules.systems.drawsteel.outcome import EDGE_BONUS, NATURAL_TIER_3, EdgeState, Outcome


def formula_terms(
    characteristic: int, bonus: int, state: EdgeState, *, letter: str | None = None
) -> list[str]:
    """``["2d10", " + 2 (M)", " + 1 (bonus)", " + 2 (edge)"]``: the terms that make the total.

    A double edge or bane adds nothing to the total, so it is not a term (the tier steps say it).
    A named characteristic is shown even when it is zero, so the reader sees which one was used.
    """
    terms = ["2d10"]
    if letter is not None:
        terms.append(f"{signed(characteristic) or ' + 0'} ({letter})")
    elif characteristic:
        terms.append(signed(characteristic))
    if bonus:
        terms.append(f"{signed(bonus)} ({'bonus' if bonus > 0 else 'penalty'})")
    if state == "edge":
        terms.append(f"{signed(EDGE_BONUS)} (edge)")
    elif state == "bane":
        terms.append(f"{signed(-EDGE_BONUS)} (bane)")
    return terms


def tier_steps(outcome: Outcome, auto_tiers: Sequence[int]) -> list[str]:
    """``["tier 2", "double edge → tier 3", "critical hit"]``: how the tier came about, in order."""
    steps = [f"tier {outcome.tier_from_total}"]
    if outcome.edge_state == "double_edge":
        steps.append(f"double edge → tier {min(3, outcome.tier_from_total + 1)}")
    elif outcome.edge_state == "double_bane":
        steps.append(f"double bane → tier {max(1, outcome.tier_from_total - 1)}")
    if outcome.natural >= NATURAL_TIER_3:
        steps.append(f"natural {outcome.natural} → tier 3")
    if outcome.automatic is not None:
        steps.append(f"automatic tier {outcome.automatic}")
    elif outcome.automatic_cancelled:
        tiers = " and ".join(str(t) for t in sorted(set(auto_tiers)))
        steps.append(f"automatic tiers {tiers} cancel out")
    if outcome.downgraded:
        steps.append(f"downgraded to tier {outcome.tier}")
    if outcome.critical:
        steps.append("critical hit")
    return steps


def shown(terms: Sequence[str], faces: Sequence[int]) -> str:
    """``2d10 (7, 8) + 2``: the formula with the faces rolled written after the dice."""
    first, second = faces  # a power roll is always two d10s
    rest = "".join(terms[1:]) if len(terms) > 2 else terms[1] if len(terms) == 2 else ""
    return f"{terms[0]} ({first}, {second}){rest}"


def rolled(terms: Sequence[str], faces: Sequence[int], total: int) -> str:
    """``2d10 (7, 8) + 2 = 17``: the formula with the faces shown, and the total."""
    return f"{shown(terms, faces)} = {total}"
