"""Nexus RPG with scripted dice: the seed 004 examples for skill tests and dice checks, plus bad input."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules import RulesError, resolve, systems
from rules.rng import Scripted
from rules.systems.nexus.checks import FRIGHTENED, supply_step
from rules.systems.nexus.skill_test import boon_modifier, success_level
from tests.rules.scripted import refused, roll


def skill(script: list[int], **args: Any) -> dict[str, Any]:
    return roll("nexus.test", script, **args)


def check(script: list[int], **args: Any) -> dict[str, Any]:
    return roll("nexus.check", script, **args)


def test_both_systems_are_registered_with_a_description() -> None:
    listed = systems()
    assert "skill test" in listed["nexus.test"]
    assert "supply" in listed["nexus.check"]


# --- skill tests: the seed's TN 8 example and its success table ----------------------------------------


@pytest.mark.parametrize(
    ("attribute", "d6", "rank", "total", "level"),
    [
        (1, 1, 0, 2, "blunder"),
        (1, 1, 1, 3, "failure"),
        (3, 3, 1, 7, "failure"),
        (4, 3, 1, 8, "weak"),
        (5, 3, 1, 9, "weak"),
        (5, 4, 1, 10, "weak"),
        (6, 4, 1, 11, "strong"),
        (6, 5, 1, 12, "strong"),
        (7, 5, 1, 13, "strong"),
        (8, 5, 1, 14, "critical"),
        (8, 6, 1, 15, "critical"),
    ],
)
def test_medium_tn_8_success_levels(attribute: int, d6: int, rank: int, total: int, level: str) -> None:
    # The seed's example: against medium (8), 8-10 is weak, 11-13 strong, 14 or more critical.
    result = skill([attribute, d6], attribute_die="d8", skill_rank=rank)
    assert result["total"] == total
    assert result["tn"] == 8
    assert result["difference"] == total - 8
    assert result["success_level"] == level
    assert result["success"] is (total >= 8)


def test_the_table_boundaries() -> None:
    assert [success_level(d) for d in (-7, -6, -5, -1, 0, 2, 3, 5, 6, 30)] == [
        "blunder",
        "blunder",
        "failure",
        "failure",
        "weak",
        "weak",
        "strong",
        "strong",
        "critical",
        "critical",
    ]


def test_a_plain_test_result_in_full() -> None:
    result = skill([5, 4], attribute_die="d8", skill_rank=2)
    assert result["dice"] == [
        {"faces": 8, "value": 5, "kept": True, "role": "attribute"},
        {"faces": 6, "value": 4, "kept": True, "role": "d6"},
    ]
    assert result["total"] == 11
    assert result["attribute_value"] == 5
    assert (result["d6"], result["d6_used"], result["boon_modifier"]) == ([4], 4, 0)
    assert result["formula"] == "1d8 + 1d6 + 2 (skill)"
    assert result["text"] == "Nexus test 11 vs TN 8: strong success (+3)."
    assert result["success_level"] == "strong"
    assert "effects" not in result
    assert "requires" not in result


def test_difficulty_names_set_the_tn() -> None:
    for name, tn in (
        ("trivial", 4),
        ("easy", 6),
        ("medium", 8),
        ("hard", 10),
        ("very_hard", 12),
        ("extreme", 14),
        ("legendary", 16),
    ):
        assert skill([3, 3], attribute_die="d6", difficulty=name)["tn"] == tn
    result = skill([6, 6], attribute_die="d6", skill_rank=3, tn=15)
    assert (result["tn"], result["difference"], result["success_level"]) == (15, 0, "weak")


def test_a_blunder_six_below() -> None:
    result = skill([1, 1], attribute_die="d6", tn=8)
    assert (result["difference"], result["success_level"], result["success"]) == (-6, "blunder", False)
    assert "blunder" in result["text"]


# --- the d4-1 and d12+1 attribute dice -------------------------------------------------------------------


def test_d4_minus_1_rolls_a_d4_and_subtracts_one_with_a_floor_of_zero() -> None:
    low = skill([1, 3], attribute_die="d4-1")
    assert low["dice"][0] == {"faces": 4, "value": 1, "kept": True, "role": "attribute"}
    assert low["attribute_value"] == 0
    assert low["total"] == 3
    assert low["formula"] == "(1d4 - 1) + 1d6"
    assert skill([4, 3], attribute_die="d4-1")["attribute_value"] == 3


def test_d12_plus_1_rolls_a_d12_and_adds_one() -> None:
    result = skill([12, 6], attribute_die="d12+1", skill_rank=2)
    assert result["dice"][0]["faces"] == 12
    assert result["dice"][0]["value"] == 12
    assert result["attribute_value"] == 13
    assert result["total"] == 21
    assert result["formula"] == "(1d12 + 1) + 1d6 + 2 (skill)"


# --- boons and banes: each case in the seed's list ---------------------------------------------------


def test_one_boon_rolls_2d6_and_takes_the_highest() -> None:
    result = skill([4, 2, 5], attribute_die="d6", boons=1)
    assert result["d6"] == [2, 5]
    assert result["d6_used"] == 5
    assert result["boon_modifier"] == 0
    assert result["total"] == 9
    assert [d["kept"] for d in result["dice"]] == [True, False, True]
    assert result["formula"] == "1d6 + 2d6kh"


def test_one_bane_rolls_2d6_and_takes_the_lowest() -> None:
    result = skill([4, 2, 5], attribute_die="d6", banes=1)
    assert result["d6_used"] == 2
    assert result["total"] == 6
    assert [d["kept"] for d in result["dice"]] == [True, True, False]
    assert result["formula"] == "1d6 + 2d6kl"


def test_one_boon_and_one_bane_cancel_to_a_single_d6() -> None:
    result = skill([4, 2], attribute_die="d6", boons=1, banes=1)
    assert result["d6"] == [2]
    assert result["d6_used"] == 2
    assert result["net_boons"] == 0
    assert result["boon_modifier"] == 0


def test_two_boons_and_one_bane_leave_one_boon() -> None:
    result = skill([4, 2, 5], attribute_die="d6", boons=2, banes=1)
    assert result["d6_used"] == 5
    assert result["boon_modifier"] == 0
    assert result["total"] == 9


def test_one_boon_and_two_banes_leave_one_bane() -> None:
    result = skill([4, 2, 5], attribute_die="d6", boons=1, banes=2)
    assert result["d6_used"] == 2
    assert result["boon_modifier"] == 0
    assert result["total"] == 6


def test_boons_beyond_the_first_add_one_each() -> None:
    result = skill([4, 2, 5], attribute_die="d6", boons=3)
    assert result["d6_used"] == 5
    assert result["boon_modifier"] == 2
    assert result["total"] == 11
    assert result["formula"] == "1d6 + 2d6kh + 2 (boons)"
    assert "3 boons" in result["text"]


def test_banes_beyond_the_first_subtract_one_each() -> None:
    result = skill([4, 2, 5], attribute_die="d6", banes=2)
    assert result["d6_used"] == 2
    assert result["boon_modifier"] == -1
    assert result["total"] == 5
    assert result["formula"] == "1d6 + 2d6kl - 1 (banes)"


def test_boon_modifier_counts_beyond_the_first() -> None:
    assert [boon_modifier(n) for n in (-4, -2, -1, 0, 1, 2, 5)] == [-3, -1, 0, 0, 0, 1, 4]


def test_a_tie_between_the_two_d6_keeps_exactly_one() -> None:
    result = skill([4, 3, 3], attribute_die="d6", boons=1)
    assert [d["kept"] for d in result["dice"]] == [True, True, False]


# --- untrained skills -----------------------------------------------------------------------------------


def test_untrained_general_skills_roll_normally() -> None:
    result = skill([4, 2], attribute_die="d6", trained=False)
    assert result["d6"] == [2]
    assert result["total"] == 6


@pytest.mark.parametrize("skill_type", ["combat", "expert"])
def test_untrained_combat_and_expert_skills_take_one_bane(skill_type: str) -> None:
    result = skill([4, 2, 5], attribute_die="d6", skill_type=skill_type, trained=False)
    assert result["net_boons"] == -1
    assert result["d6_used"] == 2
    assert result["total"] == 6
    assert "untrained" in result["text"]
    # The extra bane cancels a boon like any other.
    cancelled = skill([4, 5], attribute_die="d6", skill_type=skill_type, trained=False, boons=1)
    assert cancelled["d6"] == [5]
    assert cancelled["net_boons"] == 0


def test_trained_combat_takes_no_bane() -> None:
    assert skill([4, 2], attribute_die="d6", skill_type="combat")["d6"] == [2]


def test_an_untrained_magic_skill_is_refused() -> None:
    message = refused("not_allowed", "nexus.test", attribute_die="d8", skill_type="magic", trained=False)
    assert "untrained magic" in message
    # Trained magic rolls like any other skill.
    assert skill([3, 3], attribute_die="d8", skill_type="magic", skill_rank=1)["total"] == 7


# --- dice checks ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("die", "value", "after"),
    [
        ("d12", 1, "d10"),
        ("d12", 2, "d10"),
        ("d12", 3, "d12"),
        ("d10", 2, "d8"),
        ("d8", 1, "d6"),
        ("d6", 2, "d4"),
        ("d6", 6, "d6"),
        ("d4", 2, "1"),
        ("d4", 3, "d4"),
    ],
)
def test_supply_steps_down_on_a_1_or_2(die: str, value: int, after: str) -> None:
    result = check([value], kind="supply", die=die)
    assert result["value"] == value
    assert result["total"] == value
    assert result["outcome"] == after
    assert result["dice"] == [{"faces": int(die[1:]), "value": value, "kept": True}]


def test_supply_runs_down_the_whole_ladder() -> None:
    current = "d12"
    seen = [current]
    while current != "gone":
        current = supply_step(current, 1 if current != "1" else None)
        seen.append(current)
    assert seen == ["d12", "d10", "d8", "d6", "d4", "1", "gone"]


def test_a_supply_of_1_is_used_up_without_a_roll() -> None:
    result = check([], kind="supply", die="1")
    assert result["dice"] == []
    assert result["value"] is None
    assert result["total"] is None
    assert result["outcome"] == "gone"
    assert "used up" in result["text"]


def test_frightened_table() -> None:
    assert check([1], kind="individual", table="frightened")["outcome"] == FRIGHTENED[0]
    for value in (2, 3, 4, 5):
        result = check([value], kind="individual", table="frightened")
        assert result["outcome"] == {"from": 2, "to": 5, "outcome": "run away from the source of the fear"}
    six = check([6], kind="individual", table="frightened", die="d6")
    assert six["outcome"]["outcome"] == "act normally, with a bane on skill rolls"
    assert six["dice"] == [{"faces": 6, "value": 6, "kept": True}]
    assert six["text"] == "Frightened check (d6): 6, act normally, with a bane on skill rolls."


def test_a_custom_table_in_any_order() -> None:
    table = [
        {"from": 3, "to": 4, "outcome": "the rope holds"},
        {"from": 1, "to": 2, "outcome": "the rope snaps"},
    ]
    result = check([2], kind="individual", die="d4", table=table)
    assert result["outcome"] == {"from": 1, "to": 2, "outcome": "the rope snaps"}
    assert result["table"] == "individual"


@pytest.mark.parametrize(
    ("value", "damaged", "outcome"),
    [(1, False, "damaged"), (2, False, "ok"), (8, False, "ok"), (1, True, "destroyed"), (5, True, "ok")],
)
def test_durability_damages_on_a_1_and_destroys_a_damaged_item(
    value: int, damaged: bool, outcome: str
) -> None:
    result = check([value], kind="durability", die="d8", damaged=damaged)
    assert result["outcome"] == outcome
    assert result["value"] == value
    assert result["damaged"] is damaged


# --- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "named"),
    [
        ({}, "missing_argument", "'attribute_die'"),
        ({"attribute_die": "d20"}, "bad_value", "'attribute_die'"),
        ({"attribute_die": 8}, "bad_type", "'attribute_die'"),
        ({"attribute_die": "d8", "skill_rank": -1}, "out_of_range", "'skill_rank'"),
        ({"attribute_die": "d8", "skill_rank": 21}, "out_of_range", "'skill_rank'"),
        ({"attribute_die": "d8", "skill_rank": "2"}, "bad_type", "'skill_rank'"),
        ({"attribute_die": "d8", "tn": 0}, "out_of_range", "'tn'"),
        ({"attribute_die": "d8", "tn": 101}, "out_of_range", "'tn'"),
        ({"attribute_die": "d8", "tn": "8"}, "bad_type", "'tn'"),
        ({"attribute_die": "d8", "difficulty": "Hard"}, "bad_value", "'difficulty'"),
        ({"attribute_die": "d8", "difficulty": 10}, "bad_type", "'difficulty'"),
        ({"attribute_die": "d8", "tn": 10, "difficulty": "hard"}, "bad_value", "'tn' or 'difficulty'"),
        ({"attribute_die": "d8", "boons": -1}, "out_of_range", "'boons'"),
        ({"attribute_die": "d8", "banes": 21}, "out_of_range", "'banes'"),
        ({"attribute_die": "d8", "banes": True}, "bad_type", "'banes'"),
        ({"attribute_die": "d8", "skill_type": "social"}, "bad_value", "'skill_type'"),
        ({"attribute_die": "d8", "trained": "no"}, "bad_type", "'trained'"),
        ({"attribute_die": "d8", "bonus": 101}, "out_of_range", "'bonus'"),
        ({"attribute_die": "d8", "bonus": 0.5}, "bad_type", "'bonus'"),
        ({"attribute_die": "d8", "edge": 1}, "unknown_argument", "'edge'"),
    ],
)
def test_skill_test_refuses_bad_arguments(args: dict[str, Any], code: str, named: str) -> None:
    message = refused(code, "nexus.test", **args)
    assert named in message
    assert message.endswith(".")


_TWO = [{"from": 1, "to": 3, "outcome": "a"}, {"from": 4, "to": 6, "outcome": "b"}]


@pytest.mark.parametrize(
    ("args", "code", "named"),
    [
        ({}, "missing_argument", "'kind'"),
        ({"kind": "luck"}, "bad_value", "'kind'"),
        ({"kind": "durability"}, "missing_argument", "'die'"),
        ({"kind": "durability", "die": "d20"}, "bad_value", "'die'"),
        ({"kind": "durability", "die": "1"}, "bad_value", "'die'"),
        ({"kind": "durability", "die": "d6", "damaged": "yes"}, "bad_type", "'damaged'"),
        ({"kind": "durability", "die": "d6", "table": "frightened"}, "bad_value", "'table'"),
        ({"kind": "supply", "die": "d3"}, "bad_value", "'die'"),
        ({"kind": "supply", "die": 6}, "bad_type", "'die'"),
        ({"kind": "supply", "die": "d6", "damaged": True}, "bad_value", "'damaged'"),
        ({"kind": "individual"}, "missing_argument", "'table'"),
        ({"kind": "individual", "table": "panicked"}, "bad_value", "'table'"),
        ({"kind": "individual", "table": 6}, "bad_type", "'table'"),
        ({"kind": "individual", "table": "frightened", "die": "d8"}, "bad_value", "'die'"),
        ({"kind": "individual", "table": _TWO}, "missing_argument", "'die'"),
        ({"kind": "individual", "die": "d6", "table": []}, "bad_value", "'table'"),
        (
            {"kind": "individual", "die": "d4", "table": [{"from": 1, "to": 1, "outcome": "x"}] * 5},
            "limit",
            "'table'",
        ),
        ({"kind": "individual", "die": "d6", "table": ["a"]}, "bad_type", "'table' entry 0"),
        (
            {"kind": "individual", "die": "d6", "table": [{"from": 1, "to": 6}]},
            "missing_argument",
            "'outcome'",
        ),
        (
            {"kind": "individual", "die": "d6", "table": [{"from": 1, "to": 6, "outcome": "x", "weight": 2}]},
            "unknown_argument",
            "'weight'",
        ),
        (
            {"kind": "individual", "die": "d6", "table": [{"from": "1", "to": 6, "outcome": "x"}]},
            "bad_type",
            "'from'",
        ),
        (
            {"kind": "individual", "die": "d6", "table": [{"from": 1, "to": 7, "outcome": "x"}]},
            "out_of_range",
            "'to'",
        ),
        (
            {"kind": "individual", "die": "d6", "table": [{"from": 4, "to": 2, "outcome": "x"}]},
            "bad_value",
            "'from'",
        ),
        (
            {"kind": "individual", "die": "d6", "table": [{"from": 1, "to": 6, "outcome": " "}]},
            "bad_value",
            "'outcome'",
        ),
        (
            {"kind": "individual", "die": "d6", "table": [{"from": 1, "to": 6, "outcome": 6}]},
            "bad_type",
            "'outcome'",
        ),
        (
            {"kind": "individual", "die": "d6", "table": [{"from": 1, "to": 6, "outcome": "x" * 201}]},
            "limit",
            "'outcome'",
        ),
    ],
)
def test_check_refuses_bad_arguments(args: dict[str, Any], code: str, named: str) -> None:
    message = refused(code, "nexus.check", **args)
    assert named in message
    assert message.endswith(".")


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ([{"from": 1, "to": 2, "outcome": "a"}, {"from": 4, "to": 6, "outcome": "b"}], "leaves face 3"),
        ([{"from": 2, "to": 6, "outcome": "a"}], "leaves face 1"),
        ([{"from": 1, "to": 4, "outcome": "a"}], "leaves faces 5 to 6"),
        (
            [{"from": 1, "to": 4, "outcome": "a"}, {"from": 3, "to": 6, "outcome": "b"}],
            "gives faces 3 to 4 more",
        ),
        ([{"from": 1, "to": 6, "outcome": "a"}, {"from": 6, "to": 6, "outcome": "b"}], "gives face 6 more"),
    ],
)
def test_tables_with_gaps_or_overlaps_are_refused(table: list[dict[str, Any]], words: str) -> None:
    message = refused("bad_value", "nexus.check", kind="individual", die="d6", table=table)
    assert words in message
    assert "'table'" in message


def test_a_refused_test_rolls_no_dice() -> None:
    dice = Scripted([3, 3])
    with pytest.raises(RulesError):
        resolve(
            {"system": "nexus.test", "attribute_die": "d8", "skill_type": "magic", "trained": False}, rng=dice
        )
    assert dice.remaining == 2


# --- properties over every input ------------------------------------------------------------------------


@given(
    attribute_die=st.sampled_from(["d4-1", "d4", "d6", "d8", "d10", "d12", "d12+1"]),
    face=st.integers(1, 12),
    d6s=st.tuples(st.integers(1, 6), st.integers(1, 6)),
    skill_rank=st.integers(0, 20),
    boons=st.integers(0, 20),
    banes=st.integers(0, 20),
    skill_type=st.sampled_from(["general", "combat", "expert"]),
    trained=st.booleans(),
    bonus=st.integers(-100, 100),
    tn=st.integers(1, 100),
)
def test_skill_totals_and_levels_always_agree(
    attribute_die: str,
    face: int,
    d6s: tuple[int, int],
    skill_rank: int,
    boons: int,
    banes: int,
    skill_type: str,
    trained: bool,
    bonus: int,
    tn: int,
) -> None:
    faces = 4 if attribute_die.startswith("d4") else int(attribute_die[1:].split("+")[0])
    face = min(face, faces)
    net = boons - banes - (1 if not trained and skill_type != "general" else 0)
    d6 = list(d6s) if net else [d6s[0]]
    result = skill(
        [face, *d6],
        attribute_die=attribute_die,
        skill_rank=skill_rank,
        boons=boons,
        banes=banes,
        skill_type=skill_type,
        trained=trained,
        bonus=bonus,
        tn=tn,
    )
    adjust = {"d4-1": -1, "d12+1": 1}.get(attribute_die, 0)
    used = max(d6) if net > 0 else min(d6)
    extra = 0 if abs(net) <= 1 else (abs(net) - 1) * (1 if net > 0 else -1)
    assert result["attribute_value"] == face + adjust
    assert (result["d6"], result["d6_used"], result["boon_modifier"]) == (d6, used, extra)
    assert result["total"] == face + adjust + used + skill_rank + extra + bonus
    assert result["difference"] == result["total"] - tn
    assert result["success"] is (result["difference"] >= 0)
    assert result["success_level"] == success_level(result["difference"])
    assert sum(1 for d in result["dice"] if d["kept"]) == 2


@pytest.mark.parametrize(
    "args",
    [
        {"tn": None, "difficulty": None},
        {"boons": 0, "banes": 0, "bonus": 0},
        {"difficulty": "medium", "skill_type": "general", "trained": True},
        {"tn": 8},
    ],
)
def test_optional_arguments_given_as_defaults_roll_as_if_absent(args: dict[str, Any]) -> None:
    # When none of the optional arguments is given they are taken in one step; giving their defaults
    # (or nulls) reads them one by one and must come to the same roll.
    assert skill([5, 3], attribute_die="d8", skill_rank=2, **args) == skill(
        [5, 3], attribute_die="d8", skill_rank=2
    )


def test_unknown_arguments_list_every_argument_known() -> None:
    message = refused("unknown_argument", "nexus.test", attribute_die="d8", boon=1)
    assert message == (
        "nexus.test does not take 'boon'; its arguments are: attribute_die, banes, bonus, boons, "
        "difficulty, skill_rank, skill_type, tn, trained."
    )
