"""Damage formulas for system resolvers: check one before rolling, roll it once, add a critical's maximum.

A resolver that takes a damage formula (``daggerheart.attack``'s ``damage``, a Draw Steel tier entry's
``2d6 + M``) calls ``check_damage`` while it reads its arguments, so a bad formula is refused before any
die is rolled, and ``roll_damage`` when the damage is dealt. Damage is a whole number and never negative:
a fraction made by ``/`` is rounded down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rules.dice import evaluate
from rules.dice.parser import parse
from rules.errors import RulesError
from rules.result import Die
from rules.rng import Dice


@dataclass(frozen=True)
class DamageRoll:
    """A rolled damage formula: the amount dealt and how it was made."""

    amount: int
    formula: str
    text: str
    dice: list[Die]
    terms: list[Any]
    critical_bonus: int

    def as_result(self) -> dict[str, Any]:
        """The ``damage_roll`` field of a result: formula, text, terms, dice maximum added."""
        return {
            "formula": self.formula,
            "text": self.text,
            "terms": self.terms,
            "critical_bonus": self.critical_bonus,
        }


def check_damage(where: str, formula: str, dialect: str = "foundry") -> None:
    """Refuse ``formula`` now (naming ``where``) if it cannot be rolled; nothing is rolled."""
    try:
        parse(formula, dialect)
    except RulesError as error:
        raise RulesError(error.code, f"{where}: {error.message}") from None


def roll_damage(formula: str, rng: Dice, *, critical: bool = False, dialect: str = "foundry") -> DamageRoll:
    """Roll ``formula`` once; a critical adds the maximum of its dice (``dice_max``)."""
    ev = evaluate(formula, rng, dialect)
    bonus = ev.dice_max if critical else 0
    amount = max(0, math.floor(ev.total) + bonus)
    text = ev.text if not bonus else f"{ev.text}, + {bonus} (critical: the dice's maximum) = {amount}"
    dice = [{**d, "role": "damage"} for d in ev.dice]
    return DamageRoll(amount, ev.formula, text, dice, list(ev.terms), bonus)
