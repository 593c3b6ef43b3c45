"""The fast path (``rules.dice.fast``) gives exactly what the tree gives, for every formula it accepts."""

from __future__ import annotations

import pytest

from rules.dice import evaluate
from rules.dice.arith import fmt
from rules.dice.fast import COMPILE_AFTER, MAX_ITEMS, Simple
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
    parsed.fast.compile()  # evaluate() below takes the compiled function, whatever ran before
    rng = Scripted(faces)
    fast = evaluate(formula, rng, dialect)
    assert rng.remaining == 0
    ctx = Ctx(Scripted(faces))
    terms: list[dict[str, object]] = []
    total = parsed.root.ev(ctx, terms)
    assert fast.total == total
    assert fast.terms == terms
    assert fast.dice == ctx.dice
    assert fast.dice_max == ctx.dice_max
    assert fast.text == f"{describe(terms)} = {fmt(total)}"  # type: ignore[arg-type]


def compiled(plan: Simple) -> bool:
    # Read through a call: mypy keeps an asserted attribute narrowed past the rolls that compile the plan.
    return plan.run is not None


def test_a_formula_is_compiled_after_a_few_rolls_and_rolls_the_same() -> None:
    formula = "2d20kh1 + 3d6[fire] - 2"  # a formula no other test rolls, so its plan starts cold
    plan = parse(formula, "foundry").fast
    assert plan is not None
    assert not compiled(plan)
    faces = [4, 17, 1, 2, 3]
    seen = []
    for _ in range(COMPILE_AFTER + 2):
        ev = evaluate(formula, Scripted(faces))
        seen.append((ev.total, ev.terms, ev.dice, ev.text, ev.dice_max))
    assert compiled(plan)  # on the COMPILE_AFTER-th roll
    assert all(s == seen[0] for s in seen)  # the tree's rolls and the compiled rolls agree
    assert seen[0][0] == 17 + 6 - 2
    assert seen[0][3] == "2d20kh1 (~~4~~, 17) + 3d6[fire] (1, 2, 3) - 2 = 21"


def test_long_sums_walk_the_tree() -> None:
    formula = " + ".join(["1d4"] * (MAX_ITEMS + 1))
    assert parse(formula, "foundry").fast is None
    assert parse(" + ".join(["1d4"] * MAX_ITEMS), "foundry").fast is not None
    ev = evaluate(formula, Scripted([2] * (MAX_ITEMS + 1)))
    assert ev.total == 2 * (MAX_ITEMS + 1)


@pytest.mark.parametrize(
    ("formula", "faces", "text"),
    [
        ("6d6kh4", [3, 3, 5, 3, 1, 6], "6d6kh4 (~~3~~, 3, 5, 3, ~~1~~, 6) = 17"),
        ("5d6dh2", [6, 1, 6, 2, 6], "5d6dh2 (~~6~~, 1, ~~6~~, 2, 6) = 9"),
        ("3d8kl1", [5, 2, 2], "3d8kl1 (~~5~~, ~~2~~, 2) = 2"),
        ("1d6kh", [4], "1d6kh (4) = 4"),
        ("0d6 + 1", [], "0d6 () + 1 = 1"),
        ("12d4", [1] * 12, "12d4 (" + ", ".join(["1"] * 12) + ") = 12"),
        ("2d6x + 1d6x", [6, 2, 3, 6, 6, 1], "2d6x (6!, 2, 3) + 1d6x (6!, 6!, 1) = 24"),
    ],
)
def test_compiled_keep_drop_and_explosions_match_the_tree(formula: str, faces: list[int], text: str) -> None:
    parsed = parse(formula, "foundry")
    assert parsed.fast is not None
    rng = Scripted(faces)
    total, terms, shown, dice_max = parsed.fast.compile()(rng)
    assert rng.remaining == 0
    ctx = Ctx(Scripted(faces))
    tree_terms: list[dict[str, object]] = []
    assert total == parsed.root.ev(ctx, tree_terms)
    assert terms == tree_terms
    assert dice_max == ctx.dice_max
    assert shown == text == f"{describe(tree_terms)} = {fmt(total)}"  # type: ignore[arg-type]
