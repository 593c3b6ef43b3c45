"""Damage formulas for system resolvers (``rules.systems.damage``)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules import resolve
from rules.errors import RulesError
from rules.rng import Scripted
from rules.systems.damage import check_damage, roll_damage


def test_damage_rolls_once() -> None:
    rng = Scripted([3, 5])
    damage = roll_damage("2d8 + 3", rng)
    assert rng.remaining == 0
    assert damage.amount == 11
    assert damage.critical_bonus == 0
    assert damage.formula == "2d8 + 3"
    assert [d["role"] for d in damage.dice] == ["damage", "damage"]
    assert damage.as_result()["terms"][0]["results"] == [
        {"result": 3, "active": True},
        {"result": 5, "active": True},
    ]


def test_a_critical_adds_the_dice_maximum() -> None:
    # Daggerheart SRD (critical damage): roll the damage and add the highest the dice could show.
    damage = roll_damage("2d8 + 1d6 + 3", Scripted([3, 5, 2]), critical=True)
    assert damage.critical_bonus == 16 + 6
    assert damage.amount == 13 + 22
    assert damage.text.endswith("= 35")


def test_damage_is_whole_and_never_negative() -> None:
    assert roll_damage("1d6 / 2", Scripted([5])).amount == 2
    assert roll_damage("1d4 - 10", Scripted([2])).amount == 0


def test_bad_formulas_are_refused_before_rolling() -> None:
    rng = Scripted([])
    with pytest.raises(RulesError) as caught:
        check_damage("daggerheart.attack argument 'damage'", "2d8 +")
    assert caught.value.code == "bad_formula"
    assert caught.value.message.startswith("daggerheart.attack argument 'damage': ")
    with pytest.raises(RulesError) as caught:
        check_damage("damage", "2000d6")
    assert caught.value.code == "limit"
    assert rng.remaining == 0


# --- daggerheart.attack's damage ---------------------------------------------------------------------


def attack(faces: list[int], **args: Any) -> dict[str, Any]:
    rng = Scripted(faces)
    result = resolve({"system": "daggerheart.attack", "modifier": 3, **args}, rng=rng)
    assert rng.remaining == 0, "every scripted face is rolled, and no more"
    return result


def test_a_hit_rolls_the_damage_once_for_every_target_hit() -> None:
    targets = [{"name": "Aria", "evasion": 12}, {"name": "Bram", "evasion": 15}, {"evasion": 20}]
    result = attack([14, 5, 6], damage="2d8+3", targets=targets)
    assert [t["hit"] for t in result["targets"]] == [True, True, False]
    assert result["damage"] == 14
    assert result["damage_roll"]["formula"] == "2d8 + 3"
    assert result["damage_roll"]["text"] == "2d8 (5, 6) + 3 = 14"
    assert result["damage_roll"]["critical_bonus"] == 0
    assert result["damage_roll"]["terms"][0]["results"] == [
        {"result": 5, "active": True},
        {"result": 6, "active": True},
    ]
    # The attack's d20 first, then the damage dice, marked as damage.
    assert result["dice"] == [
        {"faces": 20, "value": 14, "kept": True},
        {"faces": 8, "value": 5, "kept": True, "role": "damage"},
        {"faces": 8, "value": 6, "kept": True, "role": "damage"},
    ]
    assert result["total"] == 17  # the attack total is unchanged by damage
    assert result["formula"] == "1d20 + 3"
    assert result["text"] == (
        "Adversary attack 17 (natural 14): hits Aria (Evasion 12), Bram (Evasion 15); "
        "misses target 3 (Evasion 20); damage 2d8 (5, 6) + 3 = 14."
    )


def test_a_critical_adds_the_damage_dice_maximum() -> None:
    # A natural 20 hits even Evasion 30; 2d8 + 1d6 can show at most 22, which the critical adds.
    result = attack([20, 3, 5, 2], damage="2d8 + 1d6 + 3", targets=[{"evasion": 30}])
    assert result["critical"] is True
    assert result["targets"][0]["hit"] is True
    assert result["damage_roll"]["critical_bonus"] == 22
    assert result["damage"] == 3 + 5 + 2 + 3 + 22
    assert result["text"].endswith(
        "damage 2d8 (3, 5) + 1d6 (2) + 3 = 13, + 22 (critical: the dice's maximum) = 35."
    )


def test_a_lowered_crit_threshold_also_makes_critical_damage() -> None:
    result = attack([19, 4], damage="1d10", crit_threshold=19, targets=[{"evasion": 25}])
    assert (result["critical"], result["damage"]) == (True, 4 + 10)


def test_advantage_keeps_the_d20s_before_the_damage_dice() -> None:
    result = attack([6, 15, 4], damage="1d6", advantage=True, targets=[{"evasion": 10}])
    assert [d["faces"] for d in result["dice"]] == [20, 20, 6]
    assert [d["kept"] for d in result["dice"]] == [False, True, True]
    assert result["damage"] == 4


def test_missing_every_target_rolls_no_damage() -> None:
    result = attack([4], damage="2d8+3", targets=[{"name": "Aria", "evasion": 12}])
    assert (result["damage"], result["damage_roll"]) == (None, None)
    assert len(result["dice"]) == 1
    assert result["text"] == "Adversary attack 7 (natural 4): misses Aria (Evasion 12); no damage."


def test_without_targets_the_damage_is_rolled_for_the_gm_to_apply() -> None:
    result = attack([9, 7], damage="1d8")
    assert result["damage"] == 7
    assert result["text"] == "Adversary attack 12 (natural 9); damage 1d8 (7) = 7."


def test_no_damage_formula_leaves_the_result_as_it_was() -> None:
    result = attack([9], targets=[{"evasion": 5}])
    assert "damage" not in result
    assert "damage_roll" not in result


def test_damage_and_a_fear_spend_together() -> None:
    result = attack([10, 6], damage="1d6+1", experience=2, spend_fear=True, targets=[{"evasion": 15}])
    assert result["total"] == 15
    assert result["damage"] == 7
    assert result["requires"] == {"fear": 1}
    assert result["text"].endswith("; damage 1d6 (6) + 1 = 7; spent 1 Fear for +2 experience.")


def test_a_bad_damage_formula_rolls_nothing() -> None:
    rng = Scripted([20, 8])
    with pytest.raises(RulesError) as caught:
        resolve({"system": "daggerheart.attack", "modifier": 1, "damage": "2d8 +"}, rng=rng)
    assert caught.value.code == "bad_formula"
    assert caught.value.message.startswith("daggerheart.attack argument 'damage': ")
    assert rng.remaining == 2


@given(
    natural=st.integers(1, 20),
    faces=st.lists(st.integers(1, 8), min_size=2, max_size=2),
    evasion=st.integers(0, 30),
)
def test_damage_is_dealt_exactly_when_the_attack_hits(natural: int, faces: list[int], evasion: int) -> None:
    hit = natural == 20 or natural + 3 >= evasion
    rng = Scripted([natural, *faces] if hit else [natural])
    result = resolve(
        {"system": "daggerheart.attack", "modifier": 3, "damage": "2d8", "targets": [{"evasion": evasion}]},
        rng=rng,
    )
    assert rng.remaining == 0
    assert result["targets"][0]["hit"] is hit
    if hit:
        assert result["damage"] == sum(faces) + (16 if natural == 20 else 0)
    else:
        assert result["damage"] is None


# --- drawsteel.ability's dice in tier entries ---------------------------------------------------------

HEROES = {"M": 2, "A": 3, "R": 0, "I": -1, "P": 1}
FIREBOLT = ["1d6 + A fire damage", "2d6 + 1 + A fire damage; slowed (save ends)", "3d6 + A fire damage"]


def ability(faces: list[int], **args: Any) -> dict[str, Any]:
    rng = Scripted(faces)
    intent = {"system": "drawsteel.ability", "characteristics": HEROES, "roll_with": "A", "tiers": FIREBOLT}
    result = resolve({**intent, **args}, rng=rng)
    assert rng.remaining == 0, "every scripted face is rolled, and no more"
    return result


def test_a_tier_with_dice_rolls_them_after_the_power_roll() -> None:
    # 6 + 6 + A 3 = 15: tier 2, "2d6 + 1 + A": 4 + 5 + 1 + 3 = 13.
    result = ability([6, 6, 4, 5])
    target = result["targets"][0]
    assert (target["tier"], target["damage"], target["damage_type"]) == (2, 13, "fire")
    assert target["damage_formula"] == "2d6 + 1 + 3 (A)"
    assert target["effect"] == "slowed (save ends)"
    assert result["dice"] == [
        {"faces": 10, "value": 6, "kept": True},
        {"faces": 10, "value": 6, "kept": True},
        {"faces": 6, "value": 4, "kept": True, "role": "damage", "tier": 2},
        {"faces": 6, "value": 5, "kept": True, "role": "damage", "tier": 2},
    ]
    assert result["total"] == 15  # the power roll's total; damage is the target's
    assert result["text"] == (
        "Ability roll: 2d10 (6, 6) + 3 (A) = 15, tier 2: 13 fire damage (2d6 (4, 5) + 1 + 3 (A)); "
        "slowed (save ends)"
    )


def test_targets_on_the_same_tier_share_one_damage_roll() -> None:
    # 7 + 7 + A 3 = 17 is tier 3 for the first two targets; a bane drops the third to 15, tier 2.
    targets = [{"name": "goblin"}, {"name": "kobold"}, {"name": "ogre", "banes": 1}]
    result = ability([7, 7, 2, 3, 4, 6, 6], targets=targets)
    goblin, kobold, ogre = result["targets"]
    assert goblin["tier"] == kobold["tier"] == 3
    assert goblin["damage"] == kobold["damage"] == 2 + 3 + 4 + 3
    assert ogre["tier"] == 2
    assert ogre["damage"] == 6 + 6 + 1 + 3
    # The tier 3 dice once (for goblin and kobold), then the tier 2 dice (for the ogre): 2d10 + 3d6 + 2d6.
    assert [(d["faces"], d.get("tier")) for d in result["dice"]] == [(10, None)] * 2 + [(6, 3)] * 3 + [
        (6, 2)
    ] * 2
    assert "goblin = 17, tier 3: 12 fire damage (3d6 (2, 3, 4) + 3 (A))" in result["text"]
    assert "kobold = 17, tier 3: 12 fire damage (3d6 (2, 3, 4) + 3 (A))" in result["text"]
    assert "ogre - 2 (bane) = 15, tier 2: 16 fire damage (2d6 (6, 6) + 1 + 3 (A))" in result["text"]


def test_tiers_without_dice_roll_nothing_more() -> None:
    result = ability([2, 3], tiers=["4 damage", "2d6 damage", "3d6 damage"])
    assert result["targets"][0]["damage"] == 4
    assert len(result["dice"]) == 2


def test_dice_damage_is_never_negative() -> None:
    # Intuition -3 on a tier 1 "1d4 + I": a 1 on the die makes -2, dealt as 0.
    weak = {"A": 3, "I": -3}
    tiers = ["1d4 + I damage", "5 damage", "9 damage"]
    result = ability([1, 2, 1], characteristics=weak, roll_with="I", tiers=tiers)
    target = result["targets"][0]
    assert target["damage"] == 0
    assert target["damage_formula"] == "1d4 - 3 (I) (at least 0)"
    assert result["text"].endswith("tier 1: 0 damage (1d4 (1) - 3 (I) (at least 0))")
    # A 4 makes 1.
    assert ability([1, 2, 4], characteristics=weak, roll_with="I", tiers=tiers)["targets"][0]["damage"] == 1


def test_dice_with_a_letter_choice_use_the_letter_chosen() -> None:
    tiers = ["1d6 + M or A damage", "2d6 + M or A damage", "3d6 + M or A damage"]
    result = ability([1, 1, 6], tiers=tiers, choose="M")
    assert result["targets"][0]["damage"] == 6 + 2
    assert result["targets"][0]["damage_formula"] == "1d6 + 2 (M)"


def test_a_critical_ability_roll_does_not_add_dice_maximum() -> None:
    # Draw Steel's critical hit (natural 19 or 20) grants an action, not extra damage.
    result = ability([10, 10, 1, 1, 1])
    target = result["targets"][0]
    assert (target["critical"], target["tier"], target["damage"]) == (True, 3, 3 + 3)


def test_an_entry_may_start_with_dice_without_a_count() -> None:
    result = ability([1, 2, 5], tiers=["d8 + A cold damage; slowed", "5 damage", "9 damage"])
    target = result["targets"][0]
    assert (target["damage"], target["damage_type"], target["effect"]) == (5 + 3, "cold", "slowed")
    assert target["damage_formula"] == "1d8 + 3 (A)"  # written the way the dice engine writes it
