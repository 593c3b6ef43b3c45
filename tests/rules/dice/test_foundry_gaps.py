"""Where the Foundry dialect follows Foundry VTT's own dice code (v12/v13) rather than only its articles.

Computed dice (FOUNDRY_ADVANCED, "Parenthetical Expressions"; ``DiceTerm#_evaluateAsync`` rolls the faces
roll before the number roll), modifier letters that run together (``DiceTerm.MODIFIER_REGEXP`` and
``DiceTerm#_evaluateModifiers``), ``cs``/``cf`` without a target (``Die#countSuccess`` reads the missing
target as NaN), and the small places where ``Die`` and ``DiceTerm._keepOrDrop`` differ from the articles.
"""

from __future__ import annotations

import pytest

from rules.dice import evaluate
from rules.dice.limits import MAX_DICE, MAX_FACES
from rules.errors import RulesError
from rules.rng import Scripted
from tests.rules.dice.helpers import active, faces_of, results, roll


def refused(formula: str, code: str = "bad_formula", dialect: str = "foundry") -> str:
    with pytest.raises(RulesError) as caught:
        evaluate(formula, Scripted([1] * 2100), dialect)
    assert caught.value.code == code
    return str(caught.value)


# ---------------------------------------------------------------------------------------------------
# Computed dice.


def test_a_rolled_number_of_dice() -> None:
    # (1d4)d6: the d4 rolls 3, then three d6. The inner die is a result too, rolled first.
    ev = roll("(1d4)d6", [3, 2, 5, 1])
    assert ev.total == 8
    assert ev.formula == "(1d4)d6"
    assert ev.text == "(1d4 (3))d6 (2, 5, 1) = 8"
    assert [(d["faces"], d["value"]) for d in ev.dice] == [(4, 3), (6, 2), (6, 5), (6, 1)]
    assert ev.dice_max == 4 + 3 * 6
    assert ev.terms == [
        {
            "type": "die",
            "number": 3,
            "faces": 6,
            "kind": "standard",
            "modifiers": [],
            "results": [
                {"result": 2, "active": True},
                {"result": 5, "active": True},
                {"result": 1, "active": True},
            ],
            "total": 8,
            "expression": "(1d4)d6",
            "number_roll": {
                "terms": [
                    {
                        "type": "paren",
                        "terms": [
                            {
                                "type": "die",
                                "number": 1,
                                "faces": 4,
                                "kind": "standard",
                                "modifiers": [],
                                "results": [{"result": 3, "active": True}],
                                "total": 3,
                                "expression": "1d4",
                            }
                        ],
                        "total": 3,
                    }
                ],
                "total": 3,
                "formula": "(1d4)",
            },
        }
    ]


def test_computed_faces() -> None:
    # 1d(2*3) is a d6: a 6 is a valid face, a 7 is not (Scripted refuses a face above the die's faces).
    ev = roll("1d(2*3)", [6])
    assert (ev.total, ev.formula, ev.text) == (6, "1d(2 * 3)", "1d(2 * 3) (6) = 6")
    assert ev.dice == [{"faces": 6, "value": 6, "kept": True}]
    assert ev.terms[0]["faces_roll"] == {  # type: ignore[typeddict-item]
        "terms": [
            {
                "type": "paren",
                "terms": [
                    {"type": "number", "value": 2},
                    {"type": "operator", "op": "*"},
                    {"type": "number", "value": 3},
                ],
                "total": 6,
            }
        ],
        "total": 6,
        "formula": "(2 * 3)",
    }
    with pytest.raises(RulesError):
        evaluate("1d(2*3)", Scripted([7]))


def test_faces_are_rolled_before_the_number() -> None:
    # DiceTerm#_evaluateAsync evaluates [this._faces, this._number] in that order: the d8 (faces) takes
    # the first face, the d4 (number) the second, then the two d7 dice.
    ev = roll("(1d4)d(1d8)", [7, 2, 7, 1])
    assert [(d["faces"], d["value"]) for d in ev.dice] == [(8, 7), (4, 2), (7, 7), (7, 1)]
    assert ev.total == 8
    assert ev.text == "(1d4 (2))d(1d8 (7)) (7, 1) = 8"
    # Rolled the other way round, the d4 would have been handed a 7.


def test_both_computed_with_modifiers_and_arithmetic() -> None:
    # (2+1)d(1d4+4)kh2 + 1: the faces' d4 rolls 2 (a d6), three d6 roll 1, 6, 3, the two highest count.
    ev = roll("(2+1)d(1d4+4)kh2 + 1", [2, 1, 6, 3])
    assert ev.total == 10
    assert ev.formula == "(2 + 1)d(1d4 + 4)kh2 + 1"
    assert ev.text == "(2 + 1)d(1d4 (2) + 4)kh2 (~~1~~, 6, 3) + 1 = 10"
    assert active(ev) == [False, True, True]
    assert [d["kept"] for d in ev.dice] == [True, False, True, True]


def test_a_substituted_attribute_and_zero_dice() -> None:
    # (@abilities.str.mod)d6 reaches the engine after data substitution as (3)d6.
    ev = roll("(3)d6 + 2", [4, 4, 1])
    assert (ev.total, ev.formula) == (11, "(3)d6 + 2")
    ev = roll("(0)d6 + 2", [])
    assert (ev.total, ev.dice, faces_of(ev)) == (2, [], [])


def test_computed_fate_dice_and_coins() -> None:
    ev = roll("(1d2)dF", [2, 1, 3])
    assert ev.total == 0
    assert [d.get("kind") for d in ev.dice] == [None, "fate", "fate"]
    assert roll("(2)dcc1", [2, 2]).total == 2


def test_computed_dice_roll_again_from_the_cache() -> None:
    # The parsed tree is cached and shared: every roll computes its own number.
    assert [roll("(1d4)d6", faces).total for faces in ([1, 6], [2, 6, 6], [1, 3], [3, 1, 1, 1])] == [
        6,
        12,
        3,
        3,
    ]


@pytest.mark.parametrize(
    ("formula", "words"),
    [
        ("(1d4 - 5)d6", "The number of dice (1d4 - 5) came to -4; it must be a whole number, 0 or more."),
        ("(5 / 2)d6", "The number of dice (5 / 2) came to 2.5; it must be a whole number, 0 or more."),
        ("1d(1 - 1)", "The number of faces (1 - 1) came to 0; it must be a whole number, at least 1."),
        ("1d(7 / 2)", "The number of faces (7 / 2) came to 3.5"),
    ],
)
def test_computed_values_must_be_whole_and_in_range(formula: str, words: str) -> None:
    assert words in refused(formula)


@pytest.mark.parametrize(
    ("formula", "words"),
    [
        (f"({MAX_DICE + 1})d6", f"at most {MAX_DICE} dice"),
        (f"{MAX_DICE - 1}d1 + (2)d1", f"at most {MAX_DICE} dice"),  # written and computed dice add up
        (f"({MAX_DICE})d1 + (1)d1", f"at most {MAX_DICE} dice"),
        (f"1d({MAX_FACES + 1})", f"at most {MAX_FACES:,} faces"),
        ("1d(1000 * 1000 * 1000)", f"at most {MAX_FACES:,} faces"),
        ("(" * 40 + "2" + ")" * 40 + "d6", "nest at most"),
    ],
)
def test_computed_dice_respect_the_limits(formula: str, words: str) -> None:
    assert words in refused(formula, "limit")


def test_roll20_refuses_computed_dice_with_a_sentence() -> None:
    for formula in ("(1d4)d6", "1d(2*3)", "(2)dF"):
        message = refused(formula, dialect="roll20")
        assert "computed dice" in message
        assert "not supported in Roll20 notation" in message


# ---------------------------------------------------------------------------------------------------
# Modifier letters that run together.


def test_modifier_letters_without_numbers_are_split_as_foundry_splits_them() -> None:
    # "xkh" names no modifier, so Foundry splits it longest name first: x, then kh (keep 1).
    ev = roll("4d6xkh", [6, 5, 1, 2, 3])
    assert faces_of(ev) == [6, 5, 1, 2, 3]
    assert ev.total == 6
    assert ev.terms[0]["modifiers"] == ["x", "kh"]  # type: ignore[typeddict-item]
    # "xodd" is xo, d, d (not x, odd): explode once, then drop the lowest twice.
    ev = roll("3d6xodd", [6, 4, 1, 2])
    assert ev.terms[0]["modifiers"] == ["xo", "d", "d"]  # type: ignore[typeddict-item]
    assert (ev.total, active(ev)) == (10, [True, True, False, False])


@pytest.mark.parametrize(
    ("formula", "hint"),
    [
        ("4d6xkh3", "write 'x6kh3'"),
        ("5d10xkh3", "write 'x10kh3'"),
        ("4d6rkh3", "write 'r1kh3'"),
        ("4d6xokl>=2", "write 'xo6kl>=2'"),
        ("4d6evenkh3", "give each modifier before the last its own number"),
        ("(2)d(6)xkh3", "give each modifier before the last its own number"),
    ],
)
def test_a_number_foundry_would_lose_is_refused(formula: str, hint: str) -> None:
    message = refused(formula)
    assert "Foundry VTT reads the modifier letters" in message
    assert "ignores the" in message
    assert hint in message


def test_the_suggested_spelling_rolls_as_meant() -> None:
    ev = roll("4d6x6kh3", [6, 2, 5, 3, 4])
    assert (ev.total, ev.terms[0]["modifiers"]) == (15, ["x6", "kh3"])  # type: ignore[typeddict-item]


def test_unknown_letters_in_a_run_are_refused_where_they_start() -> None:
    assert "at character 5 'q' begins" in refused("4d6xq")


# ---------------------------------------------------------------------------------------------------
# cs and cf without a target.


@pytest.mark.parametrize("formula", ["5d6cs", "5d6cf", "5d6cskh", "5d6xcs", "{1d6, 1d8}cs", "5d6cs>=4cf"])
def test_cs_and_cf_without_a_target_are_refused(formula: str) -> None:
    message = refused(formula)
    assert "needs a target" in message
    assert "counts nothing" in message


def test_cs_and_cf_with_a_target_alone_compare_equal() -> None:
    assert roll("5d6cs6", [6, 1, 6, 2, 5]).total == 2
    assert roll("5d6cf1", [6, 1, 6, 1, 5]).total == 2


# ---------------------------------------------------------------------------------------------------
# Die and DiceTerm details.


def test_deduct_failures_with_a_target_and_no_comparison() -> None:
    # Die#deductFailures: "if ( comparison || target )" the comparison defaults to "=": df1 is df=1.
    ev = roll("6d6df1", [1, 4, 5, 2, 6, 1])
    assert ev.total == 4 + 5 + 2 + 6 - 2
    assert results(ev)[0] == {"result": 1, "active": True, "failure": True, "count": -1}
    assert roll("3d6sf2", [2, 5, 1]).total == 5 + 1 - 2


def test_a_margin_of_zero_is_no_margin() -> None:
    # Die#total tests options.marginSuccess / marginFailure for truth: 0 is none.
    assert roll("3d6ms<0", [1, 2, 3]).total == 6
    assert roll("3d6ms>0", [1, 2, 3]).total == 6


def test_with_two_margins_the_success_margin_wins() -> None:
    assert roll("3d6ms<20ms>5", [1, 2, 3]).total == 1
    assert roll("3d6ms>5ms<20", [1, 2, 3]).total == 1
    assert roll("3d6ms<20ms<10", [1, 2, 3]).total == 4  # the later one of a kind replaces the earlier


@pytest.mark.parametrize(
    ("formula", "faces", "total"),
    [
        ("2d6d2", [3, 4], 7),  # dropping every die drops none
        ("2d6dh3", [3, 4], 7),
        ("3d6kh2d2", [1, 5, 6], 11),  # two remain active after kh2, so d2 drops none
        ("3d6kh2d1", [1, 5, 6], 6),
        ("{1d4, 1d6}d2", [2, 3], 5),
        ("{1d4, 1d6}dl", [2, 3], 3),
    ],
)
def test_dropping_as_many_dice_as_remain_drops_none(formula: str, faces: list[int], total: int) -> None:
    # DiceTerm._keepOrDrop cuts the sorted values at values[number]; dropping all of them cuts past the
    # end, and no result compares with undefined.
    assert roll(formula, faces).total == total


def test_reroll_once_also_looks_at_a_new_die_when_the_last_original_one_is_inactive() -> None:
    # Die#reroll checks "checked >= initial" only after an active result. 3d6dh1r: the 6 is dropped
    # (the last original result), the 1 is rerolled into another 1, the 2 stays; the dropped 6 is
    # skipped without the check, so the new 1 is rerolled too (into a 4), and then the loop stops.
    ev = roll("3d6dh1r", [1, 2, 6, 1, 4])
    assert faces_of(ev) == [1, 2, 6, 1, 4]
    assert ev.total == 6
    ev = roll("3d6r", [1, 2, 6, 1])  # the last original result is active: one reroll only
    assert (faces_of(ev), ev.total) == ([1, 2, 6, 1], 9)


def test_explode_once_keeps_exploding_when_the_last_original_die_is_inactive() -> None:
    # Die#explode stops a non-recursive explosion at "checked === initial", tested only after an active
    # result: with the last original die dropped, xo explodes the new dice too.
    ev = roll("3d8dh1xo=6", [6, 2, 8, 6, 6, 1])
    assert faces_of(ev) == [6, 2, 8, 6, 6, 1]
    assert ev.total == 6 + 2 + 6 + 6 + 1
    ev = roll("3d8xo=6", [6, 2, 8, 6])
    assert (faces_of(ev), ev.total) == ([6, 2, 8, 6], 22)
