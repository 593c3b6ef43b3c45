"""The ``dice`` system: a formula in Foundry VTT or Roll20 notation (see docs/notation.md)."""

from __future__ import annotations

from rules.args import Args
from rules.dice import DIALECTS, evaluate
from rules.dice.limits import MAX_FORMULA_LENGTH
from rules.registry import system
from rules.result import Result
from rules.rng import Dice


@system("dice", "a dice formula in Foundry VTT or Roll20 notation, e.g. 4d6kh3 or {4d6+3d8}kh1")
def roll_formula(args: Args, rng: Dice) -> Result:
    formula = args.string("formula", max_len=MAX_FORMULA_LENGTH)
    dialect = args.string("dialect", "foundry", choices=DIALECTS)
    args.finish()
    ev = evaluate(formula, rng, dialect)
    # A fraction made by "/" stays a fraction, as both platforms keep it (docs/notation.md, "Totals").
    # rules.result.make_result's fields in its order, written out (no effects or requires here).
    return {
        "system": "dice",
        "dice": ev.dice,
        "total": ev.total,
        "formula": ev.formula,
        "text": ev.text,
        "terms": ev.terms,
        "dialect": dialect,
        "dice_max": ev.dice_max,
    }
