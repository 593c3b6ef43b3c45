"""rules.render.to_foundry: Foundry Roll JSON, exact per system and per term type, and always our total."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rules.render import to_foundry
from tests.rules.render import foundry_model as fm
from tests.rules.render.samples import (
    die,
    formula_result,
    formula_results,
    num,
    off,
    on,
    op,
    random_results,
    scripted,
    scripted_results,
)

ALL = list(scripted_results()) + list(formula_results())


def _term(cls: str, **fields: Any) -> dict[str, Any]:
    options = fields.pop("options", {})
    return {"class": cls, "options": options, "evaluated": True, **fields}


def _roll(formula: str, terms: list[dict[str, Any]], total: float) -> dict[str, Any]:
    return {
        "class": "Roll",
        "options": {},
        "dice": [],
        "formula": formula,
        "terms": terms,
        "total": total,
        "evaluated": True,
    }


PLUS = _term("OperatorTerm", operator="+")
MINUS = _term("OperatorTerm", operator="-")

# ---------------------------------------------------------------------------------------------------
# Exact JSON, per system.


def test_duality_roll_is_hope_and_fear_dice_and_the_modifier() -> None:
    result = scripted({"system": "daggerheart.duality", "modifier": 2, "difficulty": 15}, [7, 10])
    assert to_foundry(result) == _roll(
        "1d12[hope] + 1d12[fear] + 2",
        [
            _term("Die", options={"flavor": "hope"}, number=1, faces=12, modifiers=[], results=[on(7)]),
            PLUS,
            _term("Die", options={"flavor": "fear"}, number=1, faces=12, modifiers=[], results=[on(10)]),
            PLUS,
            _term("NumericTerm", number=2),
        ],
        19,
    )


def test_duality_disadvantage_subtracts_its_d6_and_experience_is_flavoured() -> None:
    intent = {
        "system": "daggerheart.duality",
        "modifier": 1,
        "disadvantage": 1,
        "experience": 2,
        "spend_hope": True,
    }
    roll = to_foundry(scripted(intent, [8, 2, 5]))
    assert roll["formula"] == "1d12[hope] + 1d12[fear] - 1d6[disadvantage] + 1 + 2[experience]"
    assert [t["class"] for t in roll["terms"]][4:7] == ["Die", "OperatorTerm", "NumericTerm"]
    assert roll["terms"][3] == MINUS
    assert roll["terms"][-1] == _term("NumericTerm", options={"flavor": "experience"}, number=2)
    assert roll["total"] == 8 + 2 - 5 + 1 + 2


def test_adversary_advantage_is_2d20kh_with_the_lower_die_discarded() -> None:
    roll = to_foundry(scripted({"system": "daggerheart.attack", "modifier": 2, "advantage": True}, [6, 17]))
    assert roll["formula"] == "2d20kh + 2"
    assert roll["terms"][0] == _term(
        "Die", number=2, faces=20, modifiers=["kh"], results=[off(6, discarded=True), on(17)]
    )
    assert roll["total"] == 19


def test_adversary_disadvantage_is_2d20kl() -> None:
    roll = to_foundry(
        scripted({"system": "daggerheart.attack", "modifier": -1, "disadvantage": True}, [6, 17])
    )
    assert roll["formula"] == "2d20kl - 1"
    assert roll["terms"][0]["results"] == [on(6), off(17, discarded=True)]
    assert roll["total"] == 5


def test_honors_edge_chain_faces_are_results_with_exploded_tens_and_whole_chains_kept() -> None:
    # 3k1 rolling 6, 7 and 10 → 10 → 2: the 22 chain is kept whole, the others are dropped. The bare
    # x is written x10 so that it cannot run together with the kh after it.
    roll = to_foundry(scripted({"system": "honors_edge.roll", "pool": "3k1", "bonus": 2}, [6, 7, 10, 10, 2]))
    assert roll == _roll(
        "3d10x10kh + 2",
        [
            _term(
                "Die",
                number=3,
                faces=10,
                modifiers=["x10", "kh"],
                results=[
                    off(6, discarded=True),
                    off(7, discarded=True),
                    on(10, exploded=True),
                    on(10, exploded=True),
                    on(2),
                ],
            ),
            PLUS,
            _term("NumericTerm", number=2),
        ],
        24,
    )


def test_honors_edge_without_explosions_has_no_x_and_assists_are_flavoured() -> None:
    roll = to_foundry(scripted({"system": "honors_edge.roll", "pool": "2k1", "explode": False}, [10, 4]))
    assert roll["terms"][0]["modifiers"] == ["kh"]
    assert roll["terms"][0]["results"] == [on(10), off(4, discarded=True)]
    coop = to_foundry(scripted({"system": "honors_edge.skill", "attribute": 1, "assist_ranks": [2, 1]}, [5]))
    assert coop["formula"] == "1d10 + 3[assist]"
    assert coop["total"] == 8


def test_honors_edge_rolling_fewer_than_kept_keeps_everything() -> None:
    roll = to_foundry(scripted({"system": "honors_edge.roll", "rolled": 2, "kept": 4}, [3, 10, 4]))
    assert roll["formula"] == "2d10x"
    assert roll["terms"][0]["results"] == [on(3), on(10, exploded=True), on(4)]
    assert roll["total"] == 17


def test_draw_steel_power_roll_is_2d10_and_the_rest_of_the_total() -> None:
    roll = to_foundry(scripted({"system": "drawsteel.power", "characteristic": 2}, [7, 8]))
    assert roll == _roll(
        "2d10 + 2",
        [
            _term("Die", number=2, faces=10, modifiers=[], results=[on(7), on(8)]),
            PLUS,
            _term("NumericTerm", number=2),
        ],
        17,
    )


def test_nexus_attribute_die_adjustment_skill_and_boons_are_separate_numbers() -> None:
    intent = {"system": "nexus.test", "attribute_die": "d12+1", "skill_rank": 1, "boons": 3}
    roll = to_foundry(scripted(intent, [7, 2, 5]))
    assert roll["formula"] == "1d12[attribute] + 2d6kh + 1 + 1[skill] + 2[boons]"
    assert roll["terms"][2]["results"] == [off(2, discarded=True), on(5)]
    assert roll["total"] == 7 + 1 + 5 + 1 + 2


def test_a_result_without_a_total_shows_its_dice_or_zero() -> None:
    last = scripted({"system": "nexus.check", "kind": "supply", "die": "1"}, [])
    assert last["total"] is None
    assert to_foundry(last) == _roll("0", [_term("NumericTerm", number=0)], 0)
    # Hand-built: a system with dice but no total shows the kept dice.
    handmade = {
        "system": "example.pick",
        "dice": [{"faces": 6, "value": 4, "kept": True}, {"faces": 6, "value": 2, "kept": False}],
        "total": None,
        "formula": "2d6",
        "text": "picked 4",
    }
    roll = to_foundry(handmade)
    assert roll["formula"] == "2d6kh"
    assert roll["total"] == 4


def test_an_unknown_system_still_adds_up_to_its_total() -> None:
    handmade = {
        "system": "example.sum",
        "dice": [
            {"faces": 8, "value": 3, "kept": True},
            {"faces": 4, "value": 2, "kept": True, "role": "bonus_die"},
        ],
        "total": 12,
        "formula": "1d8 + 1d4 + 7",
        "text": "12",
    }
    assert to_foundry(handmade)["formula"] == "1d8 + 1d4[bonus die] + 7"
    assert to_foundry(handmade)["total"] == 12


# ---------------------------------------------------------------------------------------------------
# Exact JSON, per term type (hand-built terms in the rules.dice.terms format).


def test_die_result_flags_pass_through_and_flavor_becomes_options() -> None:
    results = [on(6, exploded=True), on(3), off(1, rerolled=True), on(5, success=True, count=1)]
    term = die(3, 6, results, ["x", "r1"], flavor="fire")
    roll = to_foundry(formula_result([term], 14))
    assert roll["terms"] == [
        _term("Die", options={"flavor": "fire"}, number=3, faces=6, modifiers=["x6", "r1"], results=results)
    ]
    assert roll["formula"] == "3d6x6r1[fire]"


def test_fate_and_coin_dice_use_their_classes_and_denominations() -> None:
    fate = {**die(2, 3, [on(1, success=True), on(-1, failure=True)]), "kind": "fate", "expression": "2dF"}
    coin = {**die(2, 2, [on(1), on(0)]), "kind": "coin", "expression": "2dc"}
    roll = to_foundry(formula_result([fate, op("+"), coin], 1))
    assert [t["class"] for t in roll["terms"]] == ["FateDie", "OperatorTerm", "Coin"]
    assert roll["terms"][0]["faces"] == 3
    assert roll["formula"] == "2df + 2dc"


def test_numbers_operators_and_signs() -> None:
    terms = [op("-"), num(3, flavor="penalty"), op("*"), op("-"), num(2), op("/"), num(4), op("%"), num(5)]
    roll = to_foundry(formula_result(terms, 1.5))
    assert roll["formula"] == "-3[penalty] * -2 / 4 % 5"
    assert roll["terms"][1] == _term("NumericTerm", options={"flavor": "penalty"}, number=3)
    assert [t["operator"] for t in roll["terms"] if t["class"] == "OperatorTerm"] == ["-", "*", "-", "/", "%"]


def test_parenthetical_carries_its_inner_roll() -> None:
    inner = [die(1, 6, [on(4)]), op("+"), num(1)]
    paren = {"type": "paren", "terms": inner, "total": 5, "flavor": "bonus"}
    roll = to_foundry(formula_result([paren, op("*"), num(2)], 10))
    assert roll["terms"][0] == _term(
        "ParentheticalTerm",
        options={"flavor": "bonus"},
        term="1d6 + 1",
        roll=_roll(
            "1d6 + 1",
            [
                _term("Die", number=1, faces=6, modifiers=[], results=[on(4)]),
                PLUS,
                _term("NumericTerm", number=1),
            ],
            5,
        ),
    )
    assert roll["formula"] == "(1d6 + 1)[bonus] * 2"


def test_function_carries_one_roll_per_argument_and_its_result() -> None:
    fn = {
        "type": "function",
        "name": "max",
        "args": [[die(1, 4, [on(3)])], [die(1, 6, [on(2)]), op("+"), num(2)]],
        "total": 4,
    }
    roll = to_foundry(formula_result([fn], 4))
    term = roll["terms"][0]
    assert term["class"] == "FunctionTerm"
    assert term["fn"] == "max"
    assert term["terms"] == ["1d4", "1d6 + 2"]
    assert [r["total"] for r in term["rolls"]] == [3, 4]
    assert term["result"] == 4
    assert roll["formula"] == "max(1d4,1d6 + 2)"


def test_pool_carries_its_sub_rolls_and_kept_results() -> None:
    pool = {
        "type": "pool",
        "rolls": [
            {"terms": [die(1, 8, [on(4)])], "total": 4, "formula": "1d8"},
            {"terms": [die(1, 10, [on(7)])], "total": 7, "formula": "1d10"},
        ],
        "modifiers": ["kh"],
        "results": [off(4, discarded=True), on(7)],
        "total": 7,
    }
    roll = to_foundry(formula_result([pool], 7))
    term = roll["terms"][0]
    assert term == _term(
        "PoolTerm",
        terms=["1d8", "1d10"],
        modifiers=["kh"],
        rolls=[
            _roll("1d8", [_term("Die", number=1, faces=8, modifiers=[], results=[on(4)])], 4),
            _roll("1d10", [_term("Die", number=1, faces=10, modifiers=[], results=[on(7)])], 7),
        ],
        results=[off(4, discarded=True), on(7)],
    )
    assert roll["formula"] == "{1d8,1d10}kh"


def test_roll20_compounded_die_shows_each_face_it_added() -> None:
    term = die(2, 6, [on(15, compounded=[6, 6, 3]), on(2)], ["!!"])
    roll = to_foundry(formula_result([term], 17, "roll20"))
    assert roll["terms"][0]["results"] == [on(6, exploded=True), on(6, exploded=True), on(3), on(2)]
    assert roll["terms"][0]["modifiers"] == ["x"]
    assert roll["total"] == fm.roll_total(roll) == 17


def test_roll20_compounded_die_that_counts_a_success_counts_it_once() -> None:
    term = die(1, 6, [on(8, compounded=[6, 2], success=True, count=1)], ["!!", ">7"])
    roll = to_foundry(formula_result([term], 1, "roll20"))
    assert roll["terms"][0]["results"] == [on(6, exploded=True, count=0), on(2, success=True, count=1)]
    assert fm.roll_total(roll) == 1


def test_roll20_penetrating_die_counts_one_less_than_its_face() -> None:
    term = die(1, 6, [on(6, exploded=True), on(4, penetrated=True)], ["!p"])
    roll = to_foundry(formula_result([term], 9, "roll20"))
    assert roll["terms"][0]["results"] == [on(6, exploded=True), on(4, count=3)]
    assert fm.roll_total(roll) == 9


def test_roll20_only_marks_are_dropped() -> None:
    term = die(1, 20, [on(20, critical="success")], ["cs20"])
    roll = to_foundry(formula_result([term], 20, "roll20"))
    assert roll["terms"][0]["results"] == [on(20)]
    assert roll["terms"][0]["modifiers"] == []


@pytest.mark.parametrize(
    ("roll20", "foundry"),
    [
        (["!"], ["x"]),
        (["!>5"], ["x>=5"]),
        (["!!"], ["x"]),
        (["!p"], ["x"]),
        (["k3"], ["kh3"]),
        (["kl1"], ["kl1"]),
        (["d1"], ["dl1"]),
        (["dh2"], ["dh2"]),
        ([">4"], ["cs>=4"]),
        (["<2"], ["cs<=2"]),
        (["=6"], ["cs=6"]),
        ([">4", "f1"], ["cs>=4", "df=1"]),
        (["f<2"], ["df<=2"]),
        (["r<2"], ["rr<=2"]),
        (["ro1"], ["r1"]),
        (["cs>19", "cf1"], []),
        (["sa"], []),
        (["mt"], []),
    ],
)
def test_roll20_modifiers_are_written_in_foundry_notation(roll20: list[str], foundry: list[str]) -> None:
    term = die(2, 6, [on(3), on(4)], roll20)
    assert to_foundry(formula_result([term], 7, "roll20"))["terms"][0]["modifiers"] == foundry


def test_foundry_modifiers_pass_through_as_written() -> None:
    term = die(4, 6, [on(3), on(4), on(6), on(1)], ["xo>=6", "kh3", "min2", "ms>10"])
    modifiers = ["xo>=6", "kh3", "min2", "ms>10"]
    assert to_foundry(formula_result([term], 14))["terms"][0]["modifiers"] == modifiers


@pytest.mark.parametrize(
    ("modifiers", "faces", "written"),
    [
        # Foundry reads "xkh3" as x then kh (keep 1): the bare modifier gets the number Foundry assumes.
        (["x", "kh3"], 10, ["x10", "kh3"]),
        (["xo", "kh3"], 6, ["xo6", "kh3"]),
        (["r", "dl2"], 6, ["r1", "dl2"]),
        (["rr", "x"], 6, ["rr1", "x"]),
        (["k", "x"], 6, ["kh1", "x"]),
        (["d", "x"], 6, ["dl1", "x"]),
        (["kl", "cs>=4"], 6, ["kl1", "cs>=4"]),
        (["x"], 6, ["x"]),  # last: nothing follows it
        (["kh3", "x"], 6, ["kh3", "x"]),  # has its number already
    ],
)
def test_a_bare_modifier_followed_by_another_is_written_with_its_number(
    modifiers: list[str], faces: int, written: list[str]
) -> None:
    term = die(2, faces, [on(3), on(4)], modifiers)
    roll = to_foundry(formula_result([term], 7))
    assert roll["terms"][0]["modifiers"] == written
    assert roll["formula"] == f"2d{faces}{''.join(written)}"


def test_roll20_explosion_then_keep_is_written_so_foundry_keeps_as_many() -> None:
    # Roll20's 4d6!k3 becomes Foundry's x then kh3, which must not be "xkh3" (Foundry would keep 1).
    result = scripted({"system": "dice", "formula": "4d6!k3", "dialect": "roll20"}, [6, 2, 5, 3, 4])
    roll = to_foundry(result)
    assert roll["formula"] == "4d6x6kh3"
    assert roll["total"] == result["total"] == 15


# ---------------------------------------------------------------------------------------------------
# Every sample and many random rolls: the total is ours, Foundry would compute the same, the formula
# is Foundry's getFormula of the terms, and the faces are the faces rolled.


def _check(result: dict[str, Any]) -> None:
    roll = to_foundry(result)
    expected = result["total"] if result["total"] is not None else roll["total"]
    assert roll["total"] == expected
    assert fm.roll_total(roll) == pytest.approx(expected)
    for inner in fm.walk_rolls(roll):
        assert fm.formula_of(inner).replace(" ", "") == inner["formula"].replace(" ", "")
    assert json.loads(json.dumps(roll)) == roll
    faces = sorted(fm.dice_faces(roll))
    if result["system"] != "dice":
        rolled = sorted(f for d in result["dice"] for f in d.get("chain", [d["value"]]))
        assert faces == rolled


@pytest.mark.parametrize(("name", "result"), ALL, ids=[name for name, _ in ALL])
def test_sample_totals_and_formulas(name: str, result: dict[str, Any]) -> None:
    _check(result)


def test_random_rolls_of_every_system_and_formula_keep_their_totals() -> None:
    count = 0
    for result in random_results(40):
        _check(result)
        count += 1
    assert count == 40 * len(ALL)


def test_formula_results_show_every_rolled_face() -> None:
    for _, result in formula_results():
        # A compounded Roll20 die is one die of the result but one Foundry result per face it added.
        rolled = sorted(f for d in result["dice"] for f in d.get("compounded", [d["value"]]))
        assert sorted(fm.dice_faces(to_foundry(result))) == rolled


def test_draw_steel_ability_shows_only_the_power_roll_dice() -> None:
    # A tier entry's damage dice follow the 2d10 in `dice`; they are not part of the power roll's total
    # and are left out of its rendering.
    result = scripted(
        {
            "system": "drawsteel.ability",
            "characteristics": {"M": 2, "A": 1, "R": 0, "I": 0, "P": 0},
            "roll_with": "M",
            "tiers": ["2 + M damage", "1d6 + M damage", "7 + M damage"],
        },
        [6, 5, 4],
    )
    assert [d.get("role") for d in result["dice"]][-1] == "damage"
    roll = to_foundry(result)
    assert roll["formula"] == "2d10 + 2"
    assert roll["total"] == result["total"] == 13


def test_daggerheart_attack_leaves_its_damage_dice_out_of_the_attack_roll() -> None:
    # The damage formula is rolled on a hit, after the d20; the attack roll's rendering is the d20 and
    # the modifier only, whatever the number of d20s (advantage adds one).
    for extra, faces in (({}, [15, 7, 2]), ({"advantage": True}, [15, 3, 7, 2])):
        result = scripted(
            {
                "system": "daggerheart.attack",
                "modifier": 3,
                "targets": [{"name": "Ana", "evasion": 12}],
                "damage": "2d8+3",
                **extra,
            },
            faces,
        )
        assert result["damage"] == 12
        roll = to_foundry(result)
        assert roll["formula"].startswith(("1d20 + 3", "2d20kh + 3", "2d20kh1 + 3")), roll["formula"]
        assert "d8" not in roll["formula"]
        assert roll["total"] == result["total"] == 18
        assert sorted(fm.dice_faces(roll)) == sorted(faces[: len(faces) - 2])


# ---------------------------------------------------------------------------------------------------
# Computed dice and the details of Die that the renderer carries.


def test_computed_number_is_written_as_dice_term_to_json_writes_it() -> None:
    # DiceTerm#toJSON: number through its getter (the inner roll's total), the inner Roll as _number. The
    # inner Roll is Roll.fromTerms([ParentheticalTerm]), as DiceTerm.fromParseNode builds it.
    result = scripted({"system": "dice", "formula": "(1d4)d6 + 1"}, [3, 2, 5, 1])
    roll = to_foundry(result)
    d4 = _term("Die", number=1, faces=4, modifiers=[], results=[on(3)])
    inner = _roll("(1d4)", [_term("ParentheticalTerm", term="1d4", roll=_roll("1d4", [d4], 3))], 3)
    assert roll == _roll(
        "(1d4)d6 + 1",
        [
            _term("Die", number=3, faces=6, modifiers=[], results=[on(2), on(5), on(1)], _number=inner),
            PLUS,
            _term("NumericTerm", number=1),
        ],
        9,
    )
    assert fm.dice_faces(roll) == [2, 5, 1, 3]  # Dice So Nice animates the inner d4 too


def test_computed_faces_are_written_as_faces_and_faces_roll() -> None:
    roll = to_foundry(scripted({"system": "dice", "formula": "1d(2 * 3)[fire]"}, [5]))
    term = roll["terms"][0]
    assert (term["number"], term["faces"], term["options"]) == (1, 6, {"flavor": "fire"})
    assert "_number" not in term
    assert term["_faces"]["formula"] == "(2 * 3)"
    assert term["_faces"]["terms"][0]["roll"]["formula"] == "2 * 3"
    assert roll["formula"] == "1d(2 * 3)[fire]"


def test_honors_edge_pool_is_written_so_foundry_keeps_three() -> None:
    # 5k3 with an exploding 10: Foundry would read "5d10xkh3" as x then kh (keep one).
    result = scripted({"system": "honors_edge.roll", "pool": "5k3"}, [10, 4, 3, 2, 1, 7])
    roll = to_foundry(result)
    assert roll["formula"] == "5d10x10kh3"
    assert roll["terms"][0]["modifiers"] == ["x10", "kh3"]
    assert roll["total"] == result["total"] == 17 + 4 + 3


def test_two_margins_are_both_kept_in_the_options() -> None:
    result = scripted({"system": "dice", "formula": "3d6ms<20ms>5"}, [1, 2, 3])
    roll = to_foundry(result)
    assert roll["terms"][0]["options"] == {"marginFailure": 20, "marginSuccess": 5}
    assert fm.roll_total(roll) == roll["total"] == result["total"] == 1
