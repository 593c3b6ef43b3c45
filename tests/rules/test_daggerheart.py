"""Daggerheart with scripted dice: Duality rolls (SRD) and adversary attacks (seed 001), plus bad input."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules import RulesError, resolve, systems
from rules.rng import Scripted
from tests.rules.scripted import refused, roll


def duality(script: list[int], **args: Any) -> dict[str, Any]:
    return roll("daggerheart.duality", script, **args)


def attack(script: list[int], **args: Any) -> dict[str, Any]:
    return roll("daggerheart.attack", script, **args)


def test_both_systems_are_registered_with_a_description() -> None:
    listed = systems()
    assert "Hope" in listed["daggerheart.duality"]
    assert "Evasion" in listed["daggerheart.attack"]


# --- Duality rolls ----------------------------------------------------------------------------------


def test_hope_higher_succeeds_and_gives_the_roller_hope() -> None:
    result = duality([9, 4], modifier=2, difficulty=15)
    assert result["total"] == 15
    assert (result["hope_die"], result["fear_die"], result["advantage_die"]) == (9, 4, None)
    assert result["with"] == "hope"
    assert result["success"] is True
    assert result["effects"] == [{"resource": "hope", "delta": 1}]
    assert "requires" not in result
    assert result["dice"] == [
        {"faces": 12, "value": 9, "kept": True, "role": "hope"},
        {"faces": 12, "value": 4, "kept": True, "role": "fear"},
    ]
    assert result["formula"] == "1d12 (hope) + 1d12 (fear) + 2"
    assert result["text"] == "Duality roll 15 with Hope (Hope 9, Fear 4) vs difficulty 15: success."


def test_fear_higher_fails_and_gives_the_gm_fear() -> None:
    result = duality([3, 10], modifier=-1, difficulty=13)
    assert result["total"] == 12
    assert result["with"] == "fear"
    assert result["success"] is False
    assert result["effects"] == [{"resource": "fear", "delta": 1}]
    assert result["formula"] == "1d12 (hope) + 1d12 (fear) - 1"
    assert "with Fear" in result["text"]
    assert "failure" in result["text"]


def test_a_success_with_fear_still_gives_fear() -> None:
    result = duality([7, 8], modifier=0, difficulty=10)
    assert (result["with"], result["success"]) == ("fear", True)
    assert result["effects"] == [{"resource": "fear", "delta": 1}]


def test_matching_dice_are_a_critical_success_even_below_the_difficulty() -> None:
    result = duality([2, 2], difficulty=30)
    assert result["total"] == 4
    assert result["with"] == "critical"
    assert result["success"] is True
    assert result["effects"] == [{"resource": "hope", "delta": 1}]
    assert "critical success" in result["text"]


def test_without_a_difficulty_success_is_null_except_on_a_critical() -> None:
    plain = duality([8, 3])
    assert plain["difficulty"] is None
    assert plain["success"] is None
    assert "difficulty" not in plain["text"]
    critical = duality([12, 12])
    assert critical["success"] is True
    assert critical["total"] == 24


def test_a_reaction_roll_generates_neither_hope_nor_fear() -> None:
    for script, outcome in (([9, 4], "hope"), ([4, 9], "fear"), ([6, 6], "critical")):
        result = duality(script, reaction=True, difficulty=12)
        assert result["with"] == outcome
        assert result["reaction"] is True
        assert "effects" not in result
        assert result["text"].startswith("Reaction roll")


def test_advantage_adds_one_d6() -> None:
    result = duality([5, 7, 4], modifier=1, advantage=1, difficulty=17)
    assert result["total"] == 5 + 7 + 4 + 1
    assert result["advantage_die"] == 4
    assert result["dice"][2] == {"faces": 6, "value": 4, "kept": True, "role": "advantage"}
    assert result["with"] == "fear"
    assert result["success"] is True
    assert result["formula"] == "1d12 (hope) + 1d12 (fear) + 1d6 (advantage) + 1"


def test_disadvantage_subtracts_one_d6_and_the_value_is_signed() -> None:
    result = duality([11, 3, 5], disadvantage=1, difficulty=10)
    assert result["total"] == 11 + 3 - 5
    assert result["advantage_die"] == -5
    assert result["dice"][2] == {"faces": 6, "value": 5, "kept": True, "role": "disadvantage"}
    assert result["success"] is False
    assert result["formula"] == "1d12 (hope) + 1d12 (fear) - 1d6 (disadvantage)"


def test_advantage_and_disadvantage_cancel_one_for_one_and_never_add_dice() -> None:
    # Equal counts: no d6 at all (the script has two values and must be used up exactly).
    assert duality([6, 5], advantage=2, disadvantage=2)["advantage_die"] is None
    # Three advantages still roll a single d6 ...
    three = duality([6, 5, 2], advantage=3)
    assert three["advantage_die"] == 2
    assert len(three["dice"]) == 3
    # ... and the remainder after cancelling only decides its sign.
    assert duality([6, 5, 2], advantage=1, disadvantage=3)["advantage_die"] == -2


def test_spending_hope_adds_the_experience_and_keeps_spend_and_gain_apart() -> None:
    result = duality([8, 5], modifier=1, experience=2, spend_hope=True, difficulty=16)
    assert result["total"] == 8 + 5 + 1 + 2
    assert result["experience"] == 2
    assert result["success"] is True
    assert result["requires"] == {"hope": 1}
    assert result["effects"] == [{"resource": "hope", "delta": -1}, {"resource": "hope", "delta": 1}]
    assert result["formula"] == "1d12 (hope) + 1d12 (fear) + 1 + 2 (experience)"
    assert "spent 1 Hope" in result["text"]


def test_spending_hope_on_a_fear_result_pays_hope_and_gives_fear() -> None:
    result = duality([3, 9, 6], experience=3, spend_hope=True, advantage=1)
    assert result["total"] == 3 + 9 + 6 + 3
    assert result["requires"] == {"hope": 1}
    assert result["effects"] == [{"resource": "hope", "delta": -1}, {"resource": "fear", "delta": 1}]


def test_spending_hope_on_a_reaction_roll_only_pays() -> None:
    result = duality([3, 9], experience=1, spend_hope=True, reaction=True)
    assert result["effects"] == [{"resource": "hope", "delta": -1}]
    assert result["requires"] == {"hope": 1}


def test_an_experience_without_spending_hope_is_refused() -> None:
    message = refused("bad_value", "daggerheart.duality", experience=2)
    assert "'experience'" in message
    assert "spend_hope" in message


def test_spending_hope_without_an_experience_is_refused() -> None:
    message = refused("bad_value", "daggerheart.duality", spend_hope=True)
    assert "'spend_hope'" in message
    assert "experience" in message


# --- adversary attacks (seed 001) -------------------------------------------------------------------


def test_one_d20_plus_the_modifier_against_one_evasion() -> None:
    result = attack([11], modifier=3, targets=[{"name": "Marlowe", "evasion": 14}])
    assert result["total"] == 14
    assert result["natural"] == 11
    assert result["critical"] is False
    assert result["targets"] == [{"name": "Marlowe", "evasion": 14, "hit": True, "critical": False}]
    assert result["dice"] == [{"faces": 20, "value": 11, "kept": True}]
    assert result["formula"] == "1d20 + 3"
    assert result["text"] == "Adversary attack 14 (natural 11): hits Marlowe (Evasion 14)."
    assert "effects" not in result
    assert "requires" not in result


def test_a_total_below_evasion_misses() -> None:
    result = attack([10], modifier=3, targets=[{"name": "Marlowe", "evasion": 14}])
    assert result["targets"][0]["hit"] is False
    assert "misses Marlowe" in result["text"]


def test_advantage_keeps_the_higher_d20_and_marks_the_other_dropped() -> None:
    result = attack([6, 15], modifier=1, advantage=True, targets=[{"name": "A", "evasion": 16}])
    assert result["natural"] == 15
    assert result["total"] == 16
    assert [(d["value"], d["kept"]) for d in result["dice"]] == [(6, False), (15, True)]
    assert result["formula"] == "2d20kh + 1"
    assert result["mode"] == "advantage"
    assert result["targets"][0]["hit"] is True


def test_disadvantage_keeps_the_lower_d20() -> None:
    result = attack([6, 15], modifier=1, disadvantage=True, targets=[{"name": "A", "evasion": 16}])
    assert result["natural"] == 6
    assert result["total"] == 7
    assert [(d["value"], d["kept"]) for d in result["dice"]] == [(6, True), (15, False)]
    assert result["formula"] == "2d20kl + 1"
    assert result["targets"][0]["hit"] is False


def test_a_tie_keeps_exactly_one_d20() -> None:
    result = attack([9, 9], modifier=0, advantage=True)
    assert [d["kept"] for d in result["dice"]] == [True, False]


def test_advantage_and_disadvantage_together_cancel_to_one_d20() -> None:
    result = attack([12], modifier=2, advantage=True, disadvantage=True)
    assert len(result["dice"]) == 1
    assert result["total"] == 14
    assert result["mode"] == "normal"
    assert result["formula"] == "1d20 + 2"


def test_a_natural_20_hits_even_an_evasion_above_the_total() -> None:
    result = attack([20], modifier=-5, targets=[{"name": "Warden", "evasion": 40}])
    assert result["total"] == 15
    assert result["critical"] is True
    assert result["targets"] == [{"name": "Warden", "evasion": 40, "hit": True, "critical": True}]
    assert "critical" in result["text"]


def test_a_dropped_natural_20_under_disadvantage_is_no_critical() -> None:
    result = attack([20, 4], modifier=0, disadvantage=True, targets=[{"evasion": 10}])
    assert result["natural"] == 4
    assert result["critical"] is False
    assert result["targets"][0]["hit"] is False


def test_a_lower_crit_threshold_makes_19_critical() -> None:
    result = attack([19], modifier=0, crit_threshold=19, targets=[{"evasion": 25}])
    assert result["critical"] is True
    assert result["targets"][0]["hit"] is True
    assert attack([18], modifier=0, crit_threshold=19)["critical"] is False


def test_one_roll_serves_several_targets() -> None:
    targets = [{"name": "Aria", "evasion": 10}, {"name": "Bram", "evasion": 13}, {"evasion": 14}]
    result = attack([9], modifier=4, targets=targets)
    assert result["total"] == 13
    assert [(t["name"], t["hit"]) for t in result["targets"]] == [
        ("Aria", True),
        ("Bram", True),
        (None, False),
    ]
    assert result["text"] == (
        "Adversary attack 13 (natural 9): hits Aria (Evasion 10), Bram (Evasion 13); "
        "misses target 3 (Evasion 14)."
    )


def test_no_targets_just_reports_the_total() -> None:
    result = attack([7], modifier=2)
    assert result["targets"] == []
    assert result["text"] == "Adversary attack 9 (natural 7)."


def test_spending_fear_adds_the_experience_and_is_required() -> None:
    result = attack([10], modifier=2, experience=3, spend_fear=True, targets=[{"name": "A", "evasion": 15}])
    assert result["total"] == 15
    assert result["targets"][0]["hit"] is True
    assert result["requires"] == {"fear": 1}
    assert result["effects"] == [{"resource": "fear", "delta": -1}]
    assert result["formula"] == "1d20 + 2 + 3 (experience)"
    assert "spent 1 Fear" in result["text"]


def test_an_experience_without_spending_fear_is_refused() -> None:
    message = refused("bad_value", "daggerheart.attack", modifier=1, experience=2)
    assert "'experience'" in message
    assert "spend_fear" in message


# --- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "named"),
    [
        ({"modifier": "2"}, "bad_type", "'modifier'"),
        ({"modifier": 1.5}, "bad_type", "'modifier'"),
        ({"modifier": True}, "bad_type", "'modifier'"),
        ({"modifier": 101}, "out_of_range", "'modifier'"),
        ({"modifier": -101}, "out_of_range", "'modifier'"),
        ({"difficulty": "hard"}, "bad_type", "'difficulty'"),
        ({"difficulty": -1}, "out_of_range", "'difficulty'"),
        ({"difficulty": 101}, "out_of_range", "'difficulty'"),
        ({"advantage": True}, "bad_type", "'advantage'"),
        ({"advantage": -1}, "out_of_range", "'advantage'"),
        ({"disadvantage": 21}, "out_of_range", "'disadvantage'"),
        ({"experience": 21, "spend_hope": True}, "out_of_range", "'experience'"),
        ({"experience": -1, "spend_hope": True}, "out_of_range", "'experience'"),
        ({"experience": 2, "spend_hope": "yes"}, "bad_type", "'spend_hope'"),
        ({"reaction": 1}, "bad_type", "'reaction'"),
        ({"spend_fear": True}, "unknown_argument", "'spend_fear'"),
        ({"trait": 2}, "unknown_argument", "'trait'"),
    ],
)
def test_duality_refuses_bad_arguments(args: dict[str, Any], code: str, named: str) -> None:
    message = refused(code, "daggerheart.duality", **args)
    assert named in message
    assert message.endswith(".")


@pytest.mark.parametrize(
    ("args", "code", "named"),
    [
        ({}, "missing_argument", "'modifier'"),
        ({"modifier": "+3"}, "bad_type", "'modifier'"),
        ({"modifier": 200}, "out_of_range", "'modifier'"),
        ({"modifier": 1, "advantage": 1}, "bad_type", "'advantage'"),
        ({"modifier": 1, "disadvantage": "true"}, "bad_type", "'disadvantage'"),
        ({"modifier": 1, "experience": 99, "spend_fear": True}, "out_of_range", "'experience'"),
        ({"modifier": 1, "spend_fear": True}, "bad_value", "'spend_fear'"),
        ({"modifier": 1, "spend_hope": True}, "unknown_argument", "'spend_hope'"),
        ({"modifier": 1, "crit_threshold": 0}, "out_of_range", "'crit_threshold'"),
        ({"modifier": 1, "crit_threshold": 21}, "out_of_range", "'crit_threshold'"),
        ({"modifier": 1, "crit_threshold": "19"}, "bad_type", "'crit_threshold'"),
        ({"modifier": 1, "targets": {"name": "A", "evasion": 10}}, "bad_type", "'targets'"),
        ({"modifier": 1, "targets": [{"evasion": 10}] * 51}, "limit", "'targets'"),
        ({"modifier": 1, "targets": ["Aria"]}, "bad_type", "'targets[0]'"),
        ({"modifier": 1, "targets": [{"name": "Aria"}]}, "missing_argument", "'targets[0]'"),
        ({"modifier": 1, "targets": [{"evasion": "12"}]}, "bad_type", "'targets[0].evasion'"),
        (
            {"modifier": 1, "targets": [{"evasion": 10}, {"evasion": 101}]},
            "out_of_range",
            "'targets[1].evasion'",
        ),
        ({"modifier": 1, "targets": [{"evasion": 10, "name": 7}]}, "bad_type", "'targets[0].name'"),
        ({"modifier": 1, "targets": [{"evasion": 10, "name": "x" * 101}]}, "limit", "'targets[0].name'"),
        ({"modifier": 1, "targets": [{"evasion": 10, "armor": 3}]}, "unknown_argument", "'armor'"),
        ({"modifier": 1, "damage": "2d8+"}, "bad_formula", "'damage'"),
        ({"modifier": 1, "damage": "2000d8"}, "limit", "'damage'"),
        ({"modifier": 1, "damage": 8}, "bad_type", "'damage'"),
        ({"modifier": 1, "damage": "1d8" * 400}, "limit", "'damage'"),
    ],
)
def test_attack_refuses_bad_arguments(args: dict[str, Any], code: str, named: str) -> None:
    message = refused(code, "daggerheart.attack", **args)
    assert named in message
    assert message.endswith(".")


def test_a_refused_intent_rolls_no_dice() -> None:
    dice = Scripted([5, 5, 5])
    with pytest.raises(RulesError):
        resolve({"system": "daggerheart.attack", "modifier": 1, "targets": [{"evasion": -1}]}, rng=dice)
    assert dice.remaining == 3


# --- properties over every input ------------------------------------------------------------------------


@given(
    hope=st.integers(1, 12),
    fear=st.integers(1, 12),
    d6=st.integers(1, 6),
    modifier=st.integers(-100, 100),
    advantage=st.integers(0, 20),
    disadvantage=st.integers(0, 20),
    experience=st.integers(0, 20),
    reaction=st.booleans(),
    difficulty=st.none() | st.integers(0, 100),
)
def test_duality_totals_outcomes_and_effects_always_agree(
    hope: int,
    fear: int,
    d6: int,
    modifier: int,
    advantage: int,
    disadvantage: int,
    experience: int,
    reaction: bool,
    difficulty: int | None,
) -> None:
    net = advantage - disadvantage
    script = [hope, fear] + ([d6] if net else [])
    spend = experience > 0
    result = duality(
        script,
        modifier=modifier,
        advantage=advantage,
        disadvantage=disadvantage,
        experience=experience,
        spend_hope=spend,
        reaction=reaction,
        difficulty=difficulty,
    )
    signed_d6 = 0 if net == 0 else (d6 if net > 0 else -d6)
    assert result["total"] == hope + fear + signed_d6 + modifier + experience
    assert result["advantage_die"] == (signed_d6 or None)
    outcome = "critical" if hope == fear else ("hope" if hope > fear else "fear")
    assert result["with"] == outcome
    if outcome == "critical":
        assert result["success"] is True
    elif difficulty is None:
        assert result["success"] is None
    else:
        assert result["success"] is (result["total"] >= difficulty)
    effects = [{"resource": "hope", "delta": -1}] if spend else []
    if not reaction:
        effects.append({"resource": "fear" if outcome == "fear" else "hope", "delta": 1})
    assert result.get("effects", []) == effects
    assert result.get("requires", {}) == ({"hope": 1} if spend else {})


@given(
    first=st.integers(1, 20),
    second=st.integers(1, 20),
    modifier=st.integers(-100, 100),
    advantage=st.booleans(),
    disadvantage=st.booleans(),
    crit_threshold=st.integers(1, 20),
    evasions=st.lists(st.integers(0, 100), max_size=5),
)
def test_attack_hits_follow_the_kept_d20(
    first: int,
    second: int,
    modifier: int,
    advantage: bool,
    disadvantage: bool,
    crit_threshold: int,
    evasions: list[int],
) -> None:
    two = advantage != disadvantage
    result = attack(
        [first, second] if two else [first],
        modifier=modifier,
        advantage=advantage,
        disadvantage=disadvantage,
        crit_threshold=crit_threshold,
        targets=[{"evasion": e} for e in evasions],
    )
    natural = (max if advantage else min)(first, second) if two else first
    assert result["natural"] == natural
    assert result["total"] == natural + modifier
    assert [d["value"] for d in result["dice"] if d["kept"]] == [natural]
    critical = natural >= crit_threshold
    assert result["critical"] is critical
    assert [t["hit"] for t in result["targets"]] == [critical or natural + modifier >= e for e in evasions]
    assert all(t["critical"] is critical for t in result["targets"])


@pytest.mark.parametrize(
    "args",
    [
        {"difficulty": None, "reaction": None},
        {"advantage": 0, "disadvantage": 0},
        {"experience": 0, "spend_hope": False, "reaction": False},
    ],
)
def test_duality_optional_arguments_given_as_defaults_roll_as_if_absent(args: dict[str, Any]) -> None:
    # When none of the optional arguments is given they are taken in one step; giving their defaults
    # (or nulls) reads them one by one and must come to the same roll.
    assert duality([7, 4], modifier=2, **args) == duality([7, 4], modifier=2)


def test_duality_unknown_arguments_list_every_argument_known() -> None:
    message = refused("unknown_argument", "daggerheart.duality", modifier=2, hope=1)
    assert message == (
        "daggerheart.duality does not take 'hope'; its arguments are: advantage, difficulty, "
        "disadvantage, experience, modifier, reaction, spend_hope."
    )
