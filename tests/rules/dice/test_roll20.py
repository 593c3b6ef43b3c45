"""Roll20 dialect conformance: every construct, exact totals and exact die marks.

Every test follows a passage of Roll20's Dice Reference (ROLL20, https://wiki.roll20.net/Dice_Reference,
the same text as Roll20's Help Center "Dice Reference"), named in the test.
"""

from __future__ import annotations

import pytest

from rules.errors import RulesError
from tests.rules.dice.helpers import active, faces_of, results, roll


def r20(formula: str, faces: list[int]):  # type: ignore[no-untyped-def]
    return roll(formula, faces, "roll20")


def test_basic_roll() -> None:
    # ROLL20 "How to Roll Dice": "/roll d20+5"; Basic Roll NdX rolls N dice with X sides.
    ev = r20("d20+5", [11])
    assert (ev.total, ev.formula, ev.text) == (16, "1d20 + 5", "1d20 (11) + 5 = 16")


def test_fate_dice() -> None:
    # ROLL20 "Fate/Fudge Roll NdF": three sides with values of -1, 0 and 1.
    ev = r20("4dF", [1, 2, 3, 2])
    assert ev.total == 0
    assert faces_of(ev) == [-1, 0, 1, 0]
    assert ev.terms[0]["kind"] == "fate"


def test_exploding_dice() -> None:
    # ROLL20 "Exploding Dice": "3d6! rolls 3d6 and explodes every time a 6 is rolled"; each extra die
    # follows the die that exploded.
    ev = r20("3d6!", [6, 6, 2, 3, 4])
    assert ev.total == 21
    assert results(ev) == [
        {"result": 6, "active": True, "exploded": True},
        {"result": 6, "active": True, "exploded": True},
        {"result": 2, "active": True},
        {"result": 3, "active": True},
        {"result": 4, "active": True},
    ]


def test_exploding_compare_points() -> None:
    # ROLL20 "Exploding Dice": "3d6!>5 ... explodes every time a 5 or 6 is rolled"; "3d6!3 would explode
    # only if a 3 is rolled".
    assert r20("1d6!>5", [5, 6, 1]).total == 12
    ev = r20("2d6!3", [3, 1, 6])
    assert ev.total == 10
    assert [r.get("exploded", False) for r in results(ev)] == [True, False, False]


def test_compounding_dice() -> None:
    # ROLL20 "Compounding Dice": "the additional rolls for each dice are added together as a single roll".
    ev = r20("5d6!!", [6, 4, 2, 3, 1, 1])
    assert ev.total == 17
    assert results(ev)[0] == {"result": 10, "active": True, "compounded": [6, 4]}
    assert len(results(ev)) == 5
    # "5d6!!5 - compound every time a 5 is rolled, 6's will be treated as a normal roll"
    assert r20("2d6!!5", [5, 6, 6]).total == 17


def test_penetrating_dice() -> None:
    # ROLL20 "Penetrating Dice": "the additional rolls for each dice have 1 subtracted from the roll", and
    # "a die can penetrate multiple times but the modifier is only ever -1 to each additional die".
    ev = r20("2d6!p", [6, 6, 3, 2])
    assert ev.total == 6 + 5 + 2 + 2
    assert results(ev) == [
        {"result": 6, "active": True, "exploded": True},
        {"result": 6, "active": True, "exploded": True, "penetrated": True},
        {"result": 3, "active": True, "penetrated": True},
        {"result": 2, "active": True},
    ]
    assert ev.text == "2d6!p (6!, 6-1!, 3-1, 2) = 15"


@pytest.mark.parametrize(
    ("formula", "total", "kept"),
    [
        # ROLL20 "Keep / Drop Dice": "8d100k4 - keep the four largest", "8d100d4 - drop the four smallest",
        # "8d100kl4 - keep the four smallest", "8d100dh4 - drop the four largest".
        ("8d100k4", 80 + 70 + 60 + 50, [False, True, False, True, False, True, False, True]),
        ("8d100kh4", 260, [False, True, False, True, False, True, False, True]),
        ("8d100kl4", 10 + 20 + 30 + 40, [True, False, True, False, True, False, True, False]),
        ("8d100d4", 260, [False, True, False, True, False, True, False, True]),
        ("8d100dl4", 260, [False, True, False, True, False, True, False, True]),
        ("8d100dh4", 100, [True, False, True, False, True, False, True, False]),
    ],
)
def test_keep_and_drop(formula: str, total: int, kept: list[bool]) -> None:
    ev = r20(formula, [10, 50, 20, 60, 30, 70, 40, 80])
    assert ev.total == total
    assert active(ev) == kept
    assert [d["kept"] for d in ev.dice] == kept


def test_success_targets() -> None:
    # ROLL20 "Target Number (Successes)": "3d6>3 ... count one success for each roll of 3 or higher" (ties
    # count), "10d6<4 ... one success for each roll of 4 or less".
    ev = r20("3d6>3", [1, 3, 6])
    assert ev.total == 2
    assert results(ev) == [
        {"result": 1, "active": True, "count": 0},
        {"result": 3, "active": True, "success": True, "count": 1},
        {"result": 6, "active": True, "success": True, "count": 1},
    ]
    assert r20("4d6<4", [4, 5, 1, 6]).total == 2
    assert r20("4d6=4", [4, 5, 4, 6]).total == 2


def test_failures_subtract_from_successes() -> None:
    # ROLL20 "Failures": "3d6>3f1 - count one success for each roll of 3 or higher and one failure for
    # each 1"; "each failure subtracts one from the total number of successes".
    ev = r20("3d6>3f1", [1, 3, 6])
    assert ev.total == 1
    assert results(ev)[0] == {"result": 1, "active": True, "failure": True, "count": -1}
    assert r20("4d6<4f>5", [1, 5, 6, 2]).total == 0


def test_failures_need_a_success_target() -> None:
    # ROLL20 "Failures": "Failure checks only work when a success check is already being done".
    with pytest.raises(RulesError, match="success target") as caught:
        r20("3d6f1", [1, 1, 1])
    assert caught.value.code == "bad_formula"


def test_reroll_until_it_no_longer_matches() -> None:
    # ROLL20 "Rerolling Dice": "2d10r<2 - reroll any time a 2 or lower is rolled"; "By default the dice will
    # continue to reroll until the result is inside the defined parameters"; "8d6r" rerolls 1s.
    ev = r20("2d8r<2", [1, 2, 5, 8])
    assert ev.total == 13
    assert results(ev) == [
        {"result": 1, "active": False, "rerolled": True},
        {"result": 2, "active": False, "rerolled": True},
        {"result": 5, "active": True},
        {"result": 8, "active": True},
    ]
    assert r20("2d6r", [1, 3, 4]).total == 7
    # "8d6r2r4r6 - reroll any time a 2, 4, or 6 is rolled"
    assert r20("1d6r2r4r6", [2, 4, 6, 5]).total == 5


def test_reroll_once() -> None:
    # ROLL20 "Reroll Once": "2d10ro<2 - reroll any time a 2 or lower is rolled, but only up to one time per
    # dice".
    ev = r20("2d6ro<2", [1, 1, 4])
    assert ev.total == 5
    assert active(ev) == [False, True, True]


def test_critical_marks_change_the_display_only() -> None:
    # ROLL20 "Critical Success and Fumble Points": "1d20cs>10" shows 10 or more as a critical success,
    # "1d20cf<3" 3 or less as a fumble; "These values will not affect other things ... It only affects the
    # display of the roll result."
    ev = r20("1d20cs>10", [15])
    assert ev.total == 15
    assert results(ev) == [{"result": 15, "active": True, "critical": "success"}]
    ev = r20("1d20cf<3", [2])
    assert (ev.total, results(ev)[0]["critical"]) == (2, "failure")
    # "1d20cs20cs10 - any roll equal to 20 or 10 exactly"
    assert results(r20("1d20cs20cs10", [10]))[0]["critical"] == "success"
    assert "critical" not in results(r20("1d20cs20cs10", [11]))[0]
    # "1d20!>18cs>18": the crit rule does not change what explodes
    ev = r20("1d20!>18cs>18", [19, 4])
    assert ev.total == 23
    assert [r.get("critical") for r in results(ev)] == ["success", None]


def test_sorting() -> None:
    # ROLL20 "Sorting Dice": "8d6s - sort the results in ascending order", "8d6sd - descending".
    ev = r20("4d6s", [5, 2, 6, 1])
    assert faces_of(ev) == [1, 2, 5, 6]
    assert [d["value"] for d in ev.dice] == [5, 2, 6, 1]  # the dice list stays in the order rolled
    assert faces_of(r20("4d6sd", [5, 2, 6, 1])) == [6, 5, 2, 1]
    assert r20("4d6sa", [5, 2, 6, 1]).total == 14


def test_modifier_order_is_fixed() -> None:
    # ROLL20 "Order of Operations for Modifiers": exploding and rerolls while rolling; then keep/drop,
    # successes, failures and sorting, whatever order they are written in.
    ev = r20("3d6kh2!", [6, 1, 2, 3])
    assert faces_of(ev) == [6, 1, 2, 3]
    assert ev.total == 9  # the 6 and the 3 are kept from 6, 1, 2, 3
    assert r20("3d6sd>4", [5, 1, 4]).total == 2


def test_group_with_one_expression_keeps_single_dice() -> None:
    # ROLL20 "Grouping Rolls": "{4d6+3d8}kh1 ... keep the highest dice roll across any of the pools".
    ev = r20("{4d6+3d8}kh1", [5, 6, 1, 3, 2, 8, 3])
    assert ev.total == 8
    pool = ev.terms[0]
    assert [r["active"] for r in pool["results"]] == [False] * 5 + [True, False]
    assert [d["kept"] for d in ev.dice] == [False] * 5 + [True, False]
    inner = pool["rolls"][0]["terms"]
    assert inner[2]["results"][1] == {"result": 8, "active": True}
    assert inner[0]["results"][0] == {"result": 5, "active": False, "discarded": True}
    # "{4d6+3d8}k4 - out of those 7 dice the highest 4 are kept and summed up"
    assert r20("{4d6+3d8}k4", [5, 6, 1, 3, 2, 8, 3]).total == 22


def test_group_with_several_expressions_keeps_totals() -> None:
    # ROLL20 "Grouping Rolls": "{4d6,3d8}kh1 ... will instead keep the highest group total".
    ev = r20("{4d6, 3d8}kh1", [5, 6, 1, 3, 2, 8, 3])
    assert ev.total == 15
    assert results(ev) == [{"result": 15, "active": True}, {"result": 13, "active": False, "discarded": True}]
    # "{4d6+2d8, 3d20+3, 5d10+1}d1 - Drop the sub-roll expression with the lowest total"
    faces = [*[1] * 6, *[10] * 3, *[5] * 5]  # 4d6+2d8, then 3d20, then 5d10
    assert r20("{4d6+2d8, 3d20+3, 5d10+1}d1", faces).total == 33 + 26


def test_group_success_with_one_expression() -> None:
    # ROLL20 "Grouped Roll Modifiers": "{3d20+5}>21 - Roll 3 d20's, for each roll add 5 and then count a
    # success for each result of 21 or more."
    ev = r20("{3d20+5}>21", [17, 4, 20])
    assert ev.total == 2
    assert results(ev) == [
        {"result": 22, "active": True, "success": True, "count": 1},
        {"result": 9, "active": True, "count": 0},
        {"result": 25, "active": True, "success": True, "count": 1},
    ]
    # "{2d6!}>4 - Roll 2d6 exploding and count a success for each roll of 4 or greater"
    assert r20("{2d6!}>4", [6, 2, 5]).total == 2
    # "{3d20+5}>21f<10": a failure for each result of 10 or less
    assert r20("{3d20+5}>21f<10", [17, 4, 20]).total == 1


def test_group_success_with_several_expressions() -> None:
    # ROLL20 "Grouped Roll Modifiers": "{4d6+2d8, 3d20+3, 5d10+1}>40 - count one success for each sub-roll
    # total of 40 or more."
    faces = [6, 6, 6, 6, 8, 8, 20, 20, 1, 1, 1, 1, 1, 1]  # 4d6+2d8, 3d20, 5d10
    assert r20("{4d6+2d8, 3d20+3, 5d10+1}>40", faces).total == 2


def test_group_expressions_must_be_the_same_kind() -> None:
    # ROLL20 "Grouped Rolls": "[[{1d6,5}kh1]] will fail, but [[ {1d6, 5 + 0d0}kh1 ]] ... will work".
    with pytest.raises(RulesError, match="same kind of roll") as caught:
        r20("{1d6, 5}kh1", [3])
    assert caught.value.code == "bad_formula"
    assert r20("{1d6, 5 + 0d0}kh1", [3]).total == 5
    assert r20("{[[1d6]], 5}kh1", [6]).total == 6


def test_labels() -> None:
    # ROLL20 "Inline labels": "/roll 2d20+5[Fire Damage] + 3d6+5[Ice Damage]".
    ev = r20("2d20+5[Fire Damage] + 3d6+5[Ice Damage]", [1, 2, 3, 4, 5])
    assert ev.total == 25
    assert [t.get("flavor") for t in ev.terms if t["type"] == "number"] == ["Fire Damage", "Ice Damage"]


def test_inline_rolls_are_rolled_first() -> None:
    # ROLL20 "Inline Dice Rolls" and "Order of Operations": inline rolls are executed first, deepest first,
    # and their result is substituted where they appear.
    ev = r20("1d6 + [[1d4]]", [3, 5])
    assert ev.total == 8
    assert [(d["faces"], d["value"]) for d in ev.dice] == [(4, 3), (6, 5)]
    inline = ev.terms[2]
    assert inline["type"] == "paren"
    assert inline.get("inline") is True
    assert inline["total"] == 3
    # "[[ 3d6>[[1+3]] ]]": an inline roll as the success target
    assert r20("[[3d6>[[1+3]]]]", [4, 3, 6]).total == 2


@pytest.mark.parametrize(
    ("formula", "total"),
    [
        ("floor(7/2) + 2", 5),  # "floor(7/2) + 2d6" from "Rounding Rolls and Math Functions"
        ("ceil(5.1)", 6),
        ("round(4.4) + round(4.5)", 9),
        ("abs(-3)", 3),
        ("2**3", 8),
        ("2**3**2", 512),  # right to left, as in mathematics
        ("-2**2", -4),
        ("9**0.5", 3),
        ("7 % 3", 1),
        ("-7 % 3", -1),  # "If a is less than 0, the result will be negative"
        ("7/2", 3.5),  # fractions are kept
        ("2 + 3 * 4", 14),
    ],
)
def test_math_operators_and_functions(formula: str, total: float) -> None:
    # ROLL20 "Math Operators and Functions": + - * / % **, floor round ceil abs, in the listed precedence.
    assert r20(formula, []).total == total


def test_power_is_a_pow_term() -> None:
    ev = r20("2**1d4", [3])
    assert ev.total == 8
    assert ev.terms[0]["type"] == "function"
    assert ev.terms[0]["name"] == "pow"


def test_foundry_only_constructs_are_refused() -> None:
    for formula in ("3dc", "min(1, 2)", "4d6x", "4d6xo", "4d6>=3", "4d6even"):
        with pytest.raises(RulesError) as caught:
            r20(formula, [1] * 10)
        assert caught.value.code == "bad_formula", formula
