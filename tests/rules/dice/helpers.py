"""Shared helpers for the dice tests: evaluate with scripted faces and check every face was used."""

from __future__ import annotations

from typing import Any

from rules.dice import Evaluation, evaluate
from rules.dice.terms import DieResult
from rules.rng import Scripted

FOUNDRY_MODIFIERS = "https://foundryvtt.com/article/dice-modifiers/"
FOUNDRY_DIE_API = "https://foundryvtt.com/api/v12/classes/foundry.dice.terms.Die.html"
FOUNDRY_ADVANCED = "https://foundryvtt.com/article/dice-advanced/"
ROLL20 = "https://wiki.roll20.net/Dice_Reference"


def roll(formula: str, faces: list[int], dialect: str = "foundry") -> Evaluation:
    """Evaluate ``formula`` with exactly ``faces`` (every scripted face must be used)."""
    rng = Scripted(faces)
    result = evaluate(formula, rng, dialect)
    assert rng.remaining == 0, f"{rng.remaining} scripted faces were not rolled"
    return result


def results(ev: Evaluation, index: int = 0) -> list[DieResult]:
    """The results of the term at ``index`` of the top-level terms."""
    term = ev.terms[index]
    assert term["type"] == "die" or term["type"] == "pool", term
    return term["results"]


def faces_of(ev: Evaluation, index: int = 0) -> list[Any]:
    return [r["result"] for r in results(ev, index)]


def active(ev: Evaluation, index: int = 0) -> list[bool]:
    return [r["active"] for r in results(ev, index)]
