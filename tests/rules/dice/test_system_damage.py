"""Damage formulas for system resolvers (``rules.systems.damage``)."""

from __future__ import annotations

import pytest

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
