"""The fast path (``rules.dice.fast``) gives exactly what the tree gives, for every formula it accepts."""

from __future__ import annotations

import pytest

from rules.dice import evaluate
from rules.dice.arith import fmt
from rules.dice.nodes import Ctx
from rules.dice.parser import parse
from rules.dice.text import describe
from rules.rng import Scripted

CASES = [
    ("1d20 + 5", [17]),
    ("4d6kh3", [3, 3, 5, 3]),
    ("2d20kl + 7 - 1d4", [5, 15, 2]),
    ("8d6", [1, 2, 3, 4, 5, 6, 1, 2]),
    ("10d10x", [10, 10, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
    ("3d6 + 2d8[fire] + 1d4 + 5[bonus]", [1, 2, 3, 4, 5, 3]),
    ("4d6dh2 - 3", [6, 1, 5, 2]),
]


@pytest.mark.parametrize(("formula", "faces"), CASES)
@pytest.mark.parametrize("dialect", ["foundry", "roll20"])
def test_fast_equals_tree(formula: str, faces: list[int], dialect: str) -> None:
    if dialect == "roll20" and "x" in formula:
        return  # Foundry's x is not Roll20 notation
    parsed = parse(formula, dialect)
    if dialect == "roll20" and any(m in formula for m in ("kh", "kl", "dh")):
        assert parsed.fast is None  # Roll20 modifiers always take the tree
        return
    assert parsed.fast is not None
    fast = evaluate(formula, Scripted(faces), dialect)
    ctx = Ctx(Scripted(faces))
    terms: list[dict[str, object]] = []
    total = parsed.root.ev(ctx, terms)
    assert fast.total == total
    assert fast.terms == terms
    assert fast.dice == ctx.dice
    assert fast.dice_max == ctx.dice_max
    assert fast.text == f"{describe(terms)} = {fmt(total)}"  # type: ignore[arg-type]
