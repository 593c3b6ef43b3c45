"""Evaluating a formula: parse (cached), roll the tree, collect the result."""

from __future__ import annotations

from typing import Any

from rules.args import type_name
from rules.dice.arith import Number, fmt
from rules.dice.fast import dice_of
from rules.dice.limits import MAX_FORMULA_LENGTH, limit
from rules.dice.nodes import Ctx, Out
from rules.dice.parser import DIALECT_NAMES, parse
from rules.dice.terms import Term
from rules.dice.text import describe
from rules.errors import RulesError
from rules.result import Die
from rules.rng import Dice

DIALECTS = tuple(DIALECT_NAMES)


class Evaluation:
    """One evaluated formula (see the package docstring for each field)."""

    __slots__ = ("_dice", "dialect", "dice_max", "formula", "terms", "text", "total")

    def __init__(
        self,
        total: Number,
        terms: list[Term],
        dice: list[Die] | None,
        formula: str,
        text: str,
        dice_max: int,
        dialect: str,
    ) -> None:
        self.total = total
        self.terms = terms
        self._dice = dice
        self.formula = formula
        self.text = text
        self.dice_max = dice_max
        self.dialect = dialect

    @property
    def dice(self) -> list[Die]:
        """Every die in the order rolled (made from the terms on first use when the fast path rolled)."""
        if self._dice is None:
            terms: Any = self.terms
            self._dice = dice_of(terms)
        return self._dice

    def __repr__(self) -> str:
        return f"Evaluation({self.text!r})"


def evaluate(formula: str, rng: Dice, dialect: str = "foundry") -> Evaluation:
    """Parse ``formula`` in ``dialect`` (``"foundry"`` or ``"roll20"``) and roll it with ``rng``."""
    if type(formula) is not str:
        raise RulesError("bad_type", f"A dice formula must be a string; got {type_name(formula)}.")
    if dialect not in DIALECT_NAMES:
        raise RulesError(
            "bad_value", f"The dice dialect must be 'foundry' or 'roll20'; got {str(dialect)[:40]!r}."
        )
    if len(formula) > MAX_FORMULA_LENGTH:
        limit(f"a formula may be at most {MAX_FORMULA_LENGTH} characters long")
    parsed = parse(formula, dialect)
    fast = parsed.fast
    if fast is not None:
        run = fast.run
        if run is None:
            run = fast.warm()
        if run is not None:
            # No typing.cast here or below: on this path building ``list[Term]`` costs more than a die.
            total, planned, text, dice_max = run(rng)
            return Evaluation(total, planned, None, parsed.formula, text, dice_max, dialect)  # type: ignore[arg-type]
    ctx = Ctx(rng, parsed.dice_asked)
    for node in parsed.inlines:
        node.evaluate_first(ctx)
    out: Out = []
    total = parsed.root.ev(ctx, out)
    terms: Any = out
    text = f"{describe(terms)} = {fmt(total)}"
    return Evaluation(total, terms, ctx.dice, parsed.formula, text, ctx.dice_max, dialect)
