"""Foundry VTT dialect conformance: every construct, exact totals and exact die marks.

Each test names the passage of Foundry's documentation it follows: the Dice Modifiers article
(FOUNDRY_MODIFIERS), the ``Die`` API page (FOUNDRY_DIE_API) and the Advanced Dice article (FOUNDRY_ADVANCED).
"""

from __future__ import annotations

import pytest

from rules.errors import RulesError
from tests.rules.dice.helpers import active, faces_of, results, roll


def test_plain_dice_and_a_number() -> None:
    # FOUNDRY_ADVANCED: a Die term rolls N dice of X faces; numeric terms and operators join terms.
    ev = roll("2d6 + 3", [4, 5])
    assert ev.total == 12
    assert ev.formula == "2d6 + 3"
    assert ev.text == "2d6 (4, 5) + 3 = 12"
    assert ev.terms == [
        {
            "type": "die",
            "number": 2,
            "faces": 6,
            "kind": "standard",
            "modifiers": [],
            "results": [{"result": 4, "active": True}, {"result": 5, "active": True}],
            "total": 9,
            "expression": "2d6",
        },
        {"type": "operator", "op": "+"},
        {"type": "number", "value": 3},
    ]
    assert ev.dice == [{"faces": 6, "value": 4, "kept": True}, {"faces": 6, "value": 5, "kept": True}]
    assert ev.dice_max == 12


def test_number_of_dice_defaults_to_one() -> None:
    # FOUNDRY_ADVANCED: "d20" is one twenty-sided die (the number is optional).
    ev = roll("d20", [13])
    assert (ev.total, ev.formula) == (13, "1d20")


def test_fate_dice() -> None:
    # FOUNDRY_ADVANCED / FateDie API: a Fate die behaves like 1d3-2; -1 is marked a failure, +1 a success.
    ev = roll("4dF", [1, 2, 3, 3])
    assert ev.total == 1
    assert results(ev) == [
        {"result": -1, "active": True, "failure": True},
        {"result": 0, "active": True},
        {"result": 1, "active": True, "success": True},
        {"result": 1, "active": True, "success": True},
    ]
    assert ev.terms[0]["faces"] == 3  # type: ignore[typeddict-item]
    assert ev.dice[0] == {"faces": 3, "value": -1, "kept": True, "failure": True, "kind": "fate"}


def test_coins_and_calling_them() -> None:
    # Coin API: "dc" flips a coin (1 heads, 0 tails); "3dcc1 flip 3 coins and treat heads as successes".
    assert roll("3dc", [2, 1, 2]).total == 2
    ev = roll("3dcc1", [2, 1, 2])
    assert ev.total == 2
    assert results(ev)[1] == {"result": 0, "active": True, "success": False, "count": 0}
    assert ev.text == "3dcc1 (H, T, H) = 2"


@pytest.mark.parametrize(
    ("formula", "total"),
    [
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("7 / 2", 3.5),  # Foundry keeps the fraction (the total is JavaScript arithmetic)
        ("6 / 2", 3),
        ("7 % 3", 1),
        ("-7 % 3", -1),  # JavaScript's remainder keeps the sign of the dividend
        ("10 - 2 - 3", 5),
        ("-3 + 5", 2),
        ("1.5 * 2", 3),
    ],
)
def test_arithmetic(formula: str, total: float) -> None:
    # FOUNDRY_ADVANCED: arithmetic + - * / % with parentheses, evaluated like a JavaScript expression.
    ev = roll(formula, [])
    assert ev.total == total
    assert type(ev.total) is type(total)


def test_parentheses_hold_their_terms() -> None:
    # FOUNDRY_ADVANCED: parenthetical terms group a sub-expression.
    ev = roll("(1d6 + 2) * 3", [4])
    assert ev.total == 18
    paren = ev.terms[0]
    assert paren["type"] == "paren"
    assert paren["total"] == 6
    assert [t["type"] for t in paren["terms"]] == ["die", "operator", "number"]


@pytest.mark.parametrize(
    ("formula", "faces", "total"),
    [
        ("floor(7 / 2)", [], 3),
        ("ceil(7 / 2)", [], 4),
        ("round(2.5)", [], 3),
        ("round(-2.5)", [], -2),  # Math.round takes halves up
        ("abs(-3)", [], 3),
        ("min(1d6, 3)", [5], 3),
        ("max(2, 5, 1d4)", [4], 5),
    ],
)
def test_functions(formula: str, faces: list[int], total: int) -> None:
    # FOUNDRY_ADVANCED: math functions such as floor, ceil, round, abs, min and max wrap expressions.
    ev = roll(formula, faces)
    assert ev.total == total
    assert ev.terms[0]["type"] == "function"


def test_pool_keeps_the_highest_expression() -> None:
    # FOUNDRY_ADVANCED (Dice Pools): "{1d20, 1d20 + 5}kh" rolls both and keeps the higher total.
    ev = roll("{1d20, 1d20 + 5}kh", [12, 3])
    assert ev.total == 12
    pool = ev.terms[0]
    assert pool["type"] == "pool"
    assert pool["results"] == [
        {"result": 12, "active": True},
        {"result": 8, "active": False, "discarded": True},
    ]
    assert [r["formula"] for r in pool["rolls"]] == ["1d20", "1d20 + 5"]
    assert [d["kept"] for d in ev.dice] == [True, False]


def test_pool_drop_and_count_successes() -> None:
    # PoolTerm API: "{1d6,1d8,1d10,1d12}dl3" drops the 3 worst; cs counts results meeting a target.
    assert roll("{1d6, 1d8, 1d10, 1d12}dl3", [6, 2, 9, 1]).total == 9
    ev = roll("{1d20, 1d20, 1d20}cs>=10", [10, 9, 20])
    assert ev.total == 2
    assert [r.get("success") for r in results(ev)] == [True, False, True]


def test_flavor_text() -> None:
    # FOUNDRY_ADVANCED (Flavor Text): "[fire]" after a term describes it.
    ev = roll("2d6[fire] + 1d4[cold] + 2[bonus]", [1, 2, 3])
    assert ev.total == 8
    assert [t.get("flavor") for t in ev.terms if t["type"] != "operator"] == ["fire", "cold", "bonus"]
    assert ev.formula == "2d6[fire] + 1d4[cold] + 2[bonus]"


@pytest.mark.parametrize(
    ("formula", "faces", "total", "kept"),
    [
        # FOUNDRY_DIE_API keep(): "20d20k Keep the 1 highest die", "kh10 Keep the 10 highest".
        ("4d6k3", [1, 2, 3, 4], 9, [False, True, True, True]),
        ("4d6kh3", [6, 2, 5, 3], 14, [True, False, True, True]),
        ("2d20k", [5, 15], 15, [False, True]),
        ("2d20kl", [5, 15], 5, [True, False]),
        # drop(): "20d20d Drop the 1 lowest die", "dh10 Drop the 10 highest".
        ("4d6d", [3, 1, 4, 6], 13, [True, False, True, True]),
        ("4d6dl2", [3, 1, 4, 6], 10, [False, False, True, True]),
        ("4d6dh1", [3, 1, 4, 6], 8, [True, True, True, False]),
        # Ties: the earlier of equal dice is dropped first.
        ("4d6kh3", [3, 3, 5, 3], 11, [False, True, True, True]),
    ],
)
def test_keep_and_drop(formula: str, faces: list[int], total: int, kept: list[bool]) -> None:
    ev = roll(formula, faces)
    assert ev.total == total
    assert active(ev) == kept
    assert all(r.get("discarded") is (not r["active"]) or r["active"] for r in results(ev))
    assert [d["kept"] for d in ev.dice] == kept


def test_explode_on_the_maximum() -> None:
    # FOUNDRY_MODIFIERS: "x: Explode - rerolls a die continually ... each occurrence rolls again".
    ev = roll("2d6x", [6, 3, 6, 2])
    assert ev.total == 17
    assert results(ev) == [
        {"result": 6, "active": True, "exploded": True},
        {"result": 3, "active": True},
        {"result": 6, "active": True, "exploded": True},
        {"result": 2, "active": True},
    ]
    assert ev.text == "2d6x (6!, 3, 6!, 2) = 17"
    assert len(ev.dice) == 4


def test_explode_on_a_comparison_and_on_a_number() -> None:
    # FOUNDRY_MODIFIERS: "/r 5d10x10" explodes on 10s; comparisons such as x>=5 set the trigger.
    ev = roll("1d6x>=5", [5, 6, 1])
    assert ev.total == 12
    assert [r.get("exploded", False) for r in results(ev)] == [True, True, False]
    assert roll("2d10x10", [10, 4, 3]).total == 17


def test_explode_once() -> None:
    # FOUNDRY_MODIFIERS: "xo: Explode Once - rerolls a die once based on the set condition".
    ev = roll("2d6xo", [6, 6, 6, 1])
    assert ev.total == 19
    assert [r.get("exploded", False) for r in results(ev)] == [True, True, False, False]


def test_reroll_once() -> None:
    # FOUNDRY_MODIFIERS: "r: Reroll ... will only reroll the die once"; "/roll 1d10r1".
    ev = roll("1d10r1", [1, 1])
    assert ev.total == 1
    assert results(ev) == [
        {"result": 1, "active": False, "rerolled": True},
        {"result": 1, "active": True},
    ]
    assert ev.dice[0] == {"faces": 10, "value": 1, "kept": False, "rerolled": True}
    assert roll("1d20r<10", [2, 15]).total == 15


def test_reroll_recursively() -> None:
    # FOUNDRY_MODIFIERS: "/r 1d20rr<3" rerolls results under 3, including new ones.
    ev = roll("1d20rr<3", [1, 2, 17])
    assert ev.total == 17
    assert active(ev) == [False, False, True]


def test_reroll_with_a_count() -> None:
    # FOUNDRY_DIE_API reroll(): "20d20r1=1 reroll a single 1".
    ev = roll("3d6r1=1", [1, 1, 4, 5])
    assert ev.total == 10
    assert active(ev) == [False, True, True, True]


def test_minimum_and_maximum() -> None:
    # FOUNDRY_DIE_API minimum()/maximum(): "6d6min2 ... each result must be at least 2". The die keeps its
    # face and counts as the bound (Foundry sets count and flags the result rerolled).
    ev = roll("4d6min3", [1, 2, 5, 6])
    assert ev.total == 17
    assert results(ev)[0] == {"result": 1, "active": True, "count": 3, "rerolled": True}
    assert results(ev)[2] == {"result": 5, "active": True}
    assert roll("4d6max4", [1, 5, 6, 2]).total == 11


@pytest.mark.parametrize(
    ("formula", "total"),
    [("5d6cs=3", 1), ("5d6cs<3", 2), ("5d6cs<=3", 3), ("5d6cs>3", 2), ("5d6cs>=3", 3), ("5d6cs5", 1)],
)
def test_count_successes_with_every_comparison(formula: str, total: int) -> None:
    # FOUNDRY_DIE_API countSuccess(): "20d20cs>10 Count the number of dice which rolled higher than 10";
    # a target without a comparison is "=" (a bare "cs" is refused: test_foundry_gaps.py).
    ev = roll(formula, [1, 2, 3, 4, 5])
    assert ev.total == total
    assert all(r["count"] in (0, 1) and r["success"] is (r["count"] == 1) for r in results(ev))


def test_count_successes_marks() -> None:
    # FOUNDRY_MODIFIERS (cs): each die meeting the target counts 1, the others 0.
    ev = roll("6d6cs>=5", [1, 5, 6, 4, 5, 2])
    assert ev.total == 3
    assert results(ev)[0] == {"result": 1, "active": True, "success": False, "count": 0}
    assert results(ev)[1] == {"result": 5, "active": True, "success": True, "count": 1}


def test_count_failures() -> None:
    # FOUNDRY_DIE_API countFailures(): "6d6cf<=3 Count the number of dice which rolled less than 3".
    ev = roll("6d6cf<=2", [1, 2, 3, 4, 5, 6])
    assert ev.total == 2
    assert results(ev)[0] == {"result": 1, "active": True, "failure": True, "count": 1}
    assert roll("3d6cf1", [1, 1, 6]).total == 2  # a target alone is "="


def test_deduct_failures() -> None:
    # FOUNDRY_DIE_API deductFailures(): "6d6cs>3df Subtract the number of dice which rolled a 3 or less
    # from the non-failed count."
    ev = roll("6d6cs>3df", [1, 4, 5, 2, 6, 3])
    assert ev.total == 0
    assert results(ev)[0] == {"result": 1, "active": True, "count": -1, "failure": True}
    assert results(ev)[1] == {"result": 4, "active": True, "success": True, "count": 1}
    # With its own comparison: failures count -1, the others their face.
    assert roll("3d6df<3", [1, 5, 6]).total == 10


def test_subtract_failures() -> None:
    # FOUNDRY_DIE_API subtractFailures(): each failure subtracts its own value.
    assert roll("3d6cs>3sf", [1, 5, 2]).total == -2


def test_margin_of_success() -> None:
    # FOUNDRY_DIE_API marginSuccess(): "6d6ms>12 Roll 6d6 and subtract 12 from the resulting total";
    # with < or <= the total is subtracted from the target.
    assert roll("3d6ms>10", [4, 5, 6]).total == 5
    assert roll("3d6ms<10", [1, 2, 3]).total == 4


def test_even_and_odd() -> None:
    # FOUNDRY_DIE_API countEven()/countOdd(): even (odd) results are successes counted 1.
    ev = roll("4d6even", [1, 2, 3, 4])
    assert ev.total == 2
    assert [r["success"] for r in results(ev)] == [False, True, False, True]
    assert roll("5d6odd", [1, 2, 3, 4, 5]).total == 3


def test_modifiers_apply_in_written_order() -> None:
    # FOUNDRY_ADVANCED: modifiers are evaluated in order; here explode first, then keep the 2 highest.
    ev = roll("3d6x6kh2", [6, 2, 1, 5])
    assert faces_of(ev) == [6, 2, 1, 5]
    assert ev.total == 11
    assert active(ev) == [True, False, False, True]


def test_modifiers_are_case_insensitive_and_normalised() -> None:
    ev = roll("4D6KH3", [1, 2, 3, 4])
    assert (ev.total, ev.formula) == (9, "4d6kh3")


@pytest.mark.parametrize(
    ("formula", "where"),
    [
        ("1d20 +", "character 7"),
        ("2d", "number of faces"),
        ("4d6q", "modifiers dice take"),
        ("4dFx", "Fate dice take"),
        ("(1d6", "')'"),
        ("sqrt(4)", "functions"),
        ("1d6 ** 2", "operator (+ - * / %)"),
        ("3dcc2", "'c1'"),
        ("", "empty"),
        ("1d20 @str", "operator"),
        ("2.5d6", "whole number of dice"),
    ],
)
def test_parse_errors_say_where_and_what(formula: str, where: str) -> None:
    with pytest.raises(RulesError) as caught:
        roll(formula, [1] * 10)
    assert caught.value.code == "bad_formula"
    assert where in caught.value.message
    assert caught.value.message.endswith(".")


def test_division_by_zero_is_refused() -> None:
    with pytest.raises(RulesError, match="divides by zero") as caught:
        roll("1d6 / 0", [3])
    assert caught.value.code == "bad_formula"
