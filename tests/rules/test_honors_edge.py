"""Honor's Edge with scripted dice: every worked example of seed 002 and its errata, plus the limits."""

from __future__ import annotations

from typing import Any

import pytest

from rules import RulesError, resolve
from rules.rng import Scripted
from rules.systems.honors_edge import MAX_CHAIN, MAX_DICE, margins


def roll(system: str = "honors_edge.roll", script: list[int] | None = None, **args: Any) -> dict[str, Any]:
    dice = Scripted(script or [])
    result = resolve({"system": system, **args}, rng=dice)
    assert dice.remaining == 0, "the roll used fewer dice than scripted"
    return result


def kept_values(result: dict[str, Any]) -> list[int]:
    return [d["value"] for d in result["dice"] if d["kept"]]


def refused(code: str, **intent: Any) -> RulesError:
    intent.setdefault("system", "honors_edge.roll")
    with pytest.raises(RulesError) as caught:
        resolve(intent, rng=Scripted([5] * 100))
    assert caught.value.code == code, caught.value.message
    return caught.value


# --- the seed's worked examples -------------------------------------------------------------------


def test_reiko_5k3_keeps_the_three_highest_and_discards_3_and_1() -> None:
    result = roll(pool="5k3", tn=15, script=[8, 6, 5, 3, 1])
    assert result["total"] == 19
    assert [d["value"] for d in result["dice"]] == [8, 6, 5, 3, 1]
    assert [d["kept"] for d in result["dice"]] == [True, True, True, False, False]
    assert result["success"] is True
    assert (result["rolled"], result["kept"], result["pool"], result["tn"]) == (5, 3, "5k3", 15)
    assert result["formula"] == "5k3: 8 + 6 + 5"
    assert "19" in result["text"]
    assert "success" in result["text"]


def test_3k1_with_one_explosion_keeps_the_15() -> None:
    result = roll(pool="3k1", script=[4, 5, 10, 5])
    assert result["total"] == 15
    assert len(result["dice"]) == 3, "an exploded die stays one die"
    assert result["dice"][2] == {"faces": 10, "chain": [10, 5], "value": 15, "kept": True, "exploded": True}
    assert result["dice"][0] == {"faces": 10, "chain": [4], "value": 4, "kept": False, "exploded": False}


def test_3k1_with_a_double_explosion_keeps_the_22() -> None:
    result = roll(pool="3k1", script=[6, 7, 10, 10, 2])
    assert result["total"] == 22
    assert [d["value"] for d in result["dice"]] == [6, 7, 22]
    assert result["dice"][2]["chain"] == [10, 10, 2]
    assert kept_values(result) == [22]


def test_a_kept_exploded_die_counts_once_for_keeping() -> None:
    # 4k2 where two dice explode: both chains are kept whole and the other two dropped.
    result = roll(pool="4k2", script=[10, 3, 9, 10, 10, 1, 8])
    assert [d["chain"] for d in result["dice"]] == [[10, 3], [9], [10, 10, 1], [8]]
    assert kept_values(result) == [13, 21]
    assert result["total"] == 34


@pytest.mark.parametrize(
    ("total", "tn", "success", "success_margins", "failure_margins"),
    [
        (22, 15, True, 1, 0),  # the seed: exceeded by a full 5
        (19, 15, True, 0, 0),
        (15, 15, True, 0, 0),  # equal is a success
        (20, 15, True, 1, 0),
        (25, 15, True, 2, 0),
        (14, 15, False, 0, 0),
        (12, 15, False, 0, 0),  # the seed: a failure without a margin
        (11, 15, False, 0, 0),
        (10, 15, False, 0, 1),  # five full points below
        (8, 15, False, 0, 1),  # the seed: one failure margin
        (5, 15, False, 0, 2),
        (0, 0, True, 0, 0),
    ],
)
def test_margins_count_full_fives_from_the_tn(
    total: int, tn: int, success: bool, success_margins: int, failure_margins: int
) -> None:
    assert margins(total, tn) == (success_margins, failure_margins)
    # Reach the wanted total with a 0k0 pool and a bonus, so only the margin rule is tested.
    result = roll(pool="0k0", bonus=total, tn=tn)
    assert result["total"] == total
    assert result["success"] is success
    assert (result["success_margins"], result["failure_margins"]) == (success_margins, failure_margins)


def test_margins_from_real_dice() -> None:
    # 3k2 rolling 10+4, 8, 1 = 22 vs 15: one success margin.
    result = roll(pool="3k2", tn=15, script=[10, 4, 8, 1])
    assert (result["total"], result["success"], result["success_margins"]) == (22, True, 1)
    # 3k2 rolling 5, 3, 2 = 8 vs 15: one failure margin.
    result = roll(pool="3k2", tn=15, script=[5, 3, 2])
    assert (result["total"], result["success"], result["failure_margins"]) == (8, False, 1)
    assert "failure with 1 failure margin" in result["text"]


def test_rolled_fewer_than_kept_keeps_everything_rolled() -> None:
    result = roll(pool="2k4", script=[3, 9])
    assert [d["kept"] for d in result["dice"]] == [True, True]
    assert result["total"] == 12
    assert (result["rolled"], result["kept"]) == (2, 4)


def test_plus_2k0_on_4k3_rolls_6k3() -> None:
    result = roll(pool="4k3", modifiers=["+2k0"], script=[1, 2, 3, 4, 5, 6])
    assert (result["rolled"], result["kept"], result["pool"]) == (6, 3, "6k3")
    assert kept_values(result) == [4, 5, 6]
    assert result["formula"] == "4k3 +2k0 = 6k3: 4 + 5 + 6"


def test_minus_2k0_on_6k3_rolls_4k3() -> None:
    result = roll(pool="6k3", modifiers=["-2k0"], script=[1, 2, 3, 4])
    assert (result["rolled"], result["kept"]) == (4, 3)
    assert result["total"] == 9


def test_modifiers_add_up_and_take_kept_dice_too() -> None:
    result = roll(rolled=3, kept=2, modifiers=["+1k1", "-1k0", " + 2 K 0 "], script=[1, 2, 3, 4, 5])
    assert (result["rolled"], result["kept"]) == (5, 3)
    assert result["total"] == 12


def test_a_penalty_larger_than_the_pool_leaves_nothing_to_roll() -> None:
    result = roll(pool="1k1", modifiers=["-3k2"], bonus=4, tn=5)
    assert (result["rolled"], result["kept"], result["dice"]) == (0, 0, [])
    assert result["total"] == 4
    assert result["success"] is False
    assert result["formula"] == "1k1 -3k2 = 0k0: 0 + 4"


def test_skill_roll_is_attribute_plus_skill_keep_attribute() -> None:
    # Athletics 1 (Strength 2): 3k2.
    result = roll("honors_edge.skill", attribute=2, skill=1, tn=10, script=[7, 2, 6])
    assert (result["rolled"], result["kept"]) == (3, 2)
    assert kept_values(result) == [7, 6]
    assert (result["total"], result["success"], result["success_margins"]) == (13, True, 0)
    assert (result["attribute"], result["skill"]) == (2, 1)
    assert result["system"] == "honors_edge.skill"


def test_skill_roll_takes_the_same_options() -> None:
    result = roll(
        "honors_edge.skill",
        attribute=2,
        skill=1,
        modifiers=["+1k0"],
        bonus=1,
        assist_ranks=[2],
        tn=20,
        explode=False,
        script=[10, 10, 1, 1],
    )
    assert [d["chain"] for d in result["dice"]] == [[10], [10], [1], [1]]
    assert result["total"] == 23
    assert result["success_margins"] == 0


def test_katana_damage_is_5k2() -> None:
    # Strength 2 with a +3k0 katana.
    result = roll("honors_edge.damage", strength=2, weapon="+3k0", script=[3, 9, 10, 2, 4, 1])
    assert (result["rolled"], result["kept"]) == (5, 2)
    assert kept_values(result) == [9, 12]
    assert result["total"] == 21
    assert result["formula"] == "2k2 +3k0 = 5k2: 9 + 12"
    assert result["weapon"] == "+3k0"
    assert result["tn"] is None
    assert result["success"] is None


def test_damage_accepts_a_bare_weapon_pool_and_no_weapon() -> None:
    assert roll("honors_edge.damage", strength=1, weapon="1k1", script=[3, 4])["total"] == 7
    assert roll("honors_edge.damage", strength=2, script=[3, 4])["total"] == 7


def test_damage_takes_no_tn_or_assists() -> None:
    refused("unknown_argument", system="honors_edge.damage", strength=2, tn=15)
    refused("unknown_argument", system="honors_edge.damage", strength=2, assist_ranks=[1])
    refused("bad_value", system="honors_edge.damage", strength=2, weapon="-1k0")


def test_cooperative_roll_adds_each_assistants_rank() -> None:
    result = roll(pool="2k1", assist_ranks=[2], tn=10, script=[8, 3])
    assert result["total"] == 10
    assert result["success"] is True
    assert result["formula"] == "2k1: 8 + 2 (assist)"
    several = roll(pool="2k1", assist_ranks=[2, 3, 0], bonus=-1, script=[8, 3])
    assert several["total"] == 12
    assert several["formula"] == "2k1: 8 - 1 + 5 (assist)"


def test_explode_false_keeps_a_ten_as_ten() -> None:
    result = roll(pool="2k2", explode=False, script=[10, 10])
    assert result["total"] == 20
    assert all(d["exploded"] is False for d in result["dice"])


def test_explosion_chain_is_capped() -> None:
    result = roll(pool="1k1", script=[10] * MAX_CHAIN)
    (only,) = result["dice"]
    assert only["chain"] == [10] * MAX_CHAIN
    assert only["value"] == 10 * MAX_CHAIN
    assert only["capped"] is True
    # One short of the cap explodes normally and is not marked.
    result = roll(pool="1k1", script=[*[10] * (MAX_CHAIN - 2), 3])
    assert "capped" not in result["dice"][0]
    assert result["total"] == 10 * (MAX_CHAIN - 2) + 3


def test_ties_keep_the_earlier_die() -> None:
    result = roll(pool="3k1", script=[6, 6, 2])
    assert [d["kept"] for d in result["dice"]] == [True, False, False]


# --- refusals ---------------------------------------------------------------------------------------


def test_pool_or_rolled_and_kept_is_required() -> None:
    refused("missing_argument")
    refused("missing_argument", rolled=3)
    refused("bad_value", pool="3k2", rolled=3, kept=2)
    refused("bad_value", pool="3d10")
    refused("bad_value", pool="3k")
    refused("bad_type", pool=32)
    refused("bad_type", rolled=True, kept=1)
    refused("bad_type", rolled=3, kept=2.0)


def test_pool_limits() -> None:
    refused("out_of_range", pool=f"{MAX_DICE + 1}k1")
    refused("out_of_range", rolled=MAX_DICE + 1, kept=1)
    refused("out_of_range", rolled=-1, kept=1)
    refused("limit", pool=f"{MAX_DICE}k3", modifiers=["+1k0"])
    refused("out_of_range", pool="1k1", modifiers=["+999k0"])
    refused("bad_value", pool="1k1", modifiers=["2k0"])
    refused("bad_type", pool="1k1", modifiers=[2])
    refused("bad_type", pool="1k1", modifiers="+1k0")
    refused("limit", pool="1k1", modifiers=["+0k0"] * 21)


def test_option_refusals() -> None:
    refused("bad_type", pool="1k1", tn="15")
    refused("out_of_range", pool="1k1", tn=-1)
    refused("bad_type", pool="1k1", explode="yes")
    refused("bad_type", pool="1k1", bonus=True)
    refused("bad_type", pool="1k1", assist_ranks=[1.5])
    refused("out_of_range", pool="1k1", assist_ranks=[-1])
    refused("unknown_argument", pool="1k1", tn=15, difficulty="hard")
    refused("missing_argument", system="honors_edge.skill", skill=2)
    refused("unknown_argument", system="honors_edge.skill", attribute=2, pool="3k2")
    refused("missing_argument", system="honors_edge.damage", weapon="+3k0")


def test_error_sentences_name_the_argument() -> None:
    error = refused("out_of_range", rolled=99, kept=1)
    assert "'rolled'" in error.message
    assert "40" in error.message
    error = refused("bad_value", pool="1k1", modifiers=["+1k0", "oops"])
    assert "item 2" in error.message
    assert "+XkY" in error.message


def test_largest_pool_with_every_die_exploding_to_the_cap_is_rolled_whole() -> None:
    # Speed is bench/'s to measure; a timed assertion here fails on a loaded machine.
    script = [10] * (MAX_DICE * MAX_CHAIN)
    result = roll(pool=f"{MAX_DICE}k{MAX_DICE}", script=script)
    assert result["total"] == MAX_DICE * MAX_CHAIN * 10
    assert all(d["capped"] for d in result["dice"])
