"""drawsteel.ability: tier entries, characteristic choice, one roll for many targets, and bad input."""

from __future__ import annotations

from typing import Any

import pytest

from rules import RulesError, resolve
from rules.rng import Scripted
from rules.systems.drawsteel.tier_entry import DAMAGE_TYPES, DamageExpr, parse_entry

BRUTAL_SLAM = ["3 + M damage; push 1", "6 + M damage; push 2", "9 + M damage; push 4"]
FREE_STRIKE = ["2 + M or A damage", "5 + M or A damage", "7 + M or A damage"]
HEROES = {"M": 2, "A": 1, "R": 0, "I": -1, "P": 1}


def ability(faces: list[int], **args: Any) -> dict[str, Any]:
    """Resolve an ability roll with the given two d10 faces, checking exactly those were rolled."""
    rng = Scripted(faces)
    intent = {"system": "drawsteel.ability", "characteristics": HEROES, "roll_with": "M", **args}
    result = resolve(intent, rng=rng)
    assert rng.remaining == 0
    return result


def refused(code: str, fragment: str, **args: Any) -> RulesError:
    """Refused with ``code`` before any die is rolled (the script is empty)."""
    intent = {"system": "drawsteel.ability", "characteristics": HEROES, "roll_with": "M", **args}
    intent.setdefault("tiers", BRUTAL_SLAM)
    with pytest.raises(RulesError) as info:
        resolve({k: v for k, v in intent.items() if v is not None}, rng=Scripted([]))
    assert info.value.code == code, info.value.message
    assert fragment in info.value.message, info.value.message
    return info.value


# --- Brutal Slam, the seed's worked example -----------------------------------------------------------


@pytest.mark.parametrize(
    ("faces", "total", "tier", "damage", "effect"),
    [
        ([3, 4], 9, 1, 5, "push 1"),
        ([6, 6], 14, 2, 8, "push 2"),
        ([8, 7], 17, 3, 11, "push 4"),
    ],
)
def test_brutal_slam_with_might_2(faces: list[int], total: int, tier: int, damage: int, effect: str) -> None:
    result = ability(faces, tiers=BRUTAL_SLAM)
    assert result["system"] == "drawsteel.ability"
    assert [d["value"] for d in result["dice"]] == faces
    assert result["natural"] == sum(faces)
    assert result["roll_with"] == "M"
    assert result["characteristic"] == 2
    assert result["total"] == total
    assert result["formula"] == "2d10 + 2 (M)"
    [target] = result["targets"]
    assert target["name"] is None
    assert target["tier"] == tier
    assert target["damage"] == damage
    assert target["damage_type"] is None
    assert target["damage_formula"] == f"{3 * tier} + 2 (M)"
    assert target["effect"] == effect
    assert target["entry"] == BRUTAL_SLAM[tier - 1]
    rolled = f"2d10 ({faces[0]}, {faces[1]}) + 2 (M) = {total}"
    assert result["text"] == f"Ability roll: {rolled}, tier {tier}: {damage} damage; {effect}"


def test_critical_ability_roll() -> None:
    result = ability([10, 9], tiers=BRUTAL_SLAM, banes=2)
    assert result["critical"] is True
    [target] = result["targets"]
    assert (target["tier"], target["critical"], target["damage"]) == (3, True, 11)
    assert "critical hit" in result["text"]


# --- "M or A" -----------------------------------------------------------------------------------------


def test_or_defaults_to_the_highest() -> None:
    result = ability([6, 6], tiers=FREE_STRIKE, characteristics={"M": 1, "A": 3})
    [target] = result["targets"]
    assert target["tier"] == 2
    assert target["damage"] == 8  # 5 + A 3
    assert target["damage_formula"] == "5 + 3 (A)"


def test_or_tie_takes_the_letter_written_first() -> None:
    result = ability([5, 5], tiers=FREE_STRIKE, characteristics={"M": 2, "A": 2})
    assert result["targets"][0]["damage_formula"] == "5 + 2 (M)"


def test_choose_is_honoured_even_when_lower() -> None:
    result = ability([6, 6], tiers=FREE_STRIKE, characteristics={"M": 1, "A": 3}, choose="M")
    assert result["targets"][0]["tier"] == 2
    assert result["targets"][0]["damage"] == 6


def test_three_way_choice() -> None:
    tiers = ["1 + M, A, or R damage", "2 + M, A, or R damage", "3 + M, A, or R damage"]
    result = ability([1, 1], tiers=tiers, characteristics={"M": 0, "A": 1, "R": 4})
    assert result["targets"][0]["damage"] == 5


def test_roll_with_uses_the_highest_letter() -> None:
    result = ability([5, 5], tiers=BRUTAL_SLAM, roll_with=["R", "M", "P"])
    assert result["roll_with"] == "M"
    assert result["total"] == 12
    tie = ability([5, 5], tiers=BRUTAL_SLAM, roll_with=["P", "A"])
    assert tie["roll_with"] == "P"


def test_damage_uses_the_entry_letter_not_the_rolled_one() -> None:
    result = ability([5, 5], tiers=["2 + P damage", "4 + P damage", "6 + P damage"], roll_with="M")
    assert result["targets"][0]["damage"] == 5  # tier 2 (10 + M 2 = 12): 4 + P 1


# --- entries of every shape ---------------------------------------------------------------------------


def test_typed_damage_with_an_effect() -> None:
    tiers = ["3 + M fire damage", "7 + M or A fire damage; slowed (save ends)", "push 2"]
    result = ability([6, 6], tiers=tiers)
    [target] = result["targets"]
    assert (target["damage"], target["damage_type"], target["effect"]) == (9, "fire", "slowed (save ends)")
    assert result["text"].endswith("tier 2: 9 fire damage; slowed (save ends)")


def test_an_effect_alone_deals_no_damage() -> None:
    tiers = ["3 + M fire damage", "7 + M or A fire damage; slowed (save ends)", "push 2"]
    [target] = ability([9, 9], tiers=tiers)["targets"]
    assert (target["damage"], target["damage_type"], target["effect"]) == (None, None, "push 2")
    assert target["damage_formula"] is None


def test_damage_without_a_characteristic() -> None:
    [target] = ability([1, 2], tiers=["4 damage", "6 damage", "8 psychic damage; prone"])["targets"]
    assert (target["damage"], target["damage_formula"], target["effect"]) == (4, "4", None)


def test_damage_is_never_negative() -> None:
    tiers = ["1 + I damage", "2 + I damage", "3 + I damage"]
    [target] = ability([1, 2], tiers=tiers, characteristics={"M": 2, "I": -3})["targets"]
    assert target["damage"] == 0
    assert target["damage_formula"] == "1 - 3 (I) (at least 0)"
    [even] = ability([1, 2], tiers=tiers, characteristics={"M": 2, "I": -1})["targets"]
    assert (even["damage"], even["damage_formula"]) == (0, "1 - 1 (I)")


@pytest.mark.parametrize(
    ("text", "damage", "effect"),
    [
        ("3 + M damage; push 1", DamageExpr(3, ("M",), None), "push 1"),
        (
            "7 + M or A fire damage; slowed (save ends)",
            DamageExpr(7, ("M", "A"), "fire"),
            "slowed (save ends)",
        ),
        ("  4 damage  ", DamageExpr(4, (), None), None),
        ("M damage", DamageExpr(0, ("M",), None), None),
        ("2 + 3 + A Holy damage;  ", DamageExpr(5, ("A",), "holy"), None),
        ("6 + M, A, or R sonic damage; A < 1 dazed", DamageExpr(6, ("M", "A", "R"), "sonic"), "A < 1 dazed"),
        ("push 2", None, "push 2"),
        ("slowed (save ends); push 1", None, "slowed (save ends); push 1"),
        ("; push 1", None, "push 1"),
        ("the target takes no damage", None, "the target takes no damage"),
        ("lots of damage", None, "lots of damage"),
        ("A, M, or R psychic damage", DamageExpr(0, ("A", "M", "R"), "psychic"), None),
    ],
)
def test_parser(text: str, damage: DamageExpr | None, effect: str | None) -> None:
    entry = parse_entry("entry", 2, text)
    assert entry.tier == 2
    assert entry.text == text.strip()
    assert entry.damage == damage
    assert entry.effect == effect


@pytest.mark.parametrize("damage_type", DAMAGE_TYPES)
def test_every_damage_type(damage_type: str) -> None:
    entry = parse_entry("entry", 1, f"5 + P {damage_type} damage")
    assert entry.damage == DamageExpr(5, ("P",), damage_type)


# --- many targets, one roll ---------------------------------------------------------------------------


def test_one_roll_serves_every_target_with_its_own_edges() -> None:
    targets = [
        {"name": "goblin", "edges": 1},
        {"name": "ogre", "banes": 2},
        {"name": "wyvern", "auto_tiers": [3]},
        {},
    ]
    result = ability([6, 6], tiers=BRUTAL_SLAM, targets=targets)
    assert len(result["dice"]) == 2
    goblin, ogre, wyvern, unnamed = result["targets"]
    assert (goblin["name"], goblin["edge_state"], goblin["total"], goblin["tier"]) == (
        "goblin",
        "edge",
        16,
        2,
    )
    assert (ogre["edge_state"], ogre["total"], ogre["tier"], ogre["damage"]) == ("double_bane", 14, 1, 5)
    assert (wyvern["automatic"], wyvern["tier"], wyvern["damage"], wyvern["effect"]) == (3, 3, 11, "push 4")
    assert (unnamed["name"], unnamed["tier"], unnamed["damage"]) == (None, 2, 8)
    # the top-level total and formula are the first target's
    assert result["total"] == 16
    assert result["formula"] == "2d10 + 2 (M) + 2 (edge)"
    assert result["text"] == (
        "Ability roll: 2d10 (6, 6) + 2 (M)"
        " | goblin + 2 (edge) = 16, tier 2: 8 damage; push 2"
        " | ogre = 14, tier 2, double bane → tier 1: 5 damage; push 1"
        " | wyvern = 14, tier 2, automatic tier 3: 11 damage; push 4"
        " | target 4 = 14, tier 2: 8 damage; push 2"
    )


def test_shared_modifiers_apply_to_every_target() -> None:
    targets = [{"name": "a"}, {"name": "b", "banes": 1}, {"name": "c", "edges": 1, "bonus": 1}]
    result = ability([5, 5], tiers=BRUTAL_SLAM, edges=1, bonus=1, targets=targets)
    a, b, c = result["targets"]
    assert (a["edge_state"], a["total"]) == ("edge", 15)  # 10 + 2 + 1 + 2
    assert (b["edge_state"], b["total"]) == ("none", 13)  # the shared edge and b's bane cancel
    assert (c["edge_state"], c["total"], c["tier"]) == ("double_edge", 14, 3)  # 10 + 2 + 2, tier 2 → 3


def test_shared_and_own_automatic_outcomes_gather() -> None:
    targets = [{"name": "same", "auto_tiers": [3]}, {"name": "different", "auto_tiers": [1]}]
    result = ability([5, 5], tiers=BRUTAL_SLAM, auto_tiers=[3], targets=targets)
    same, different = result["targets"]
    assert (same["automatic"], same["tier"]) == (3, 3)
    assert (different["automatic"], different["automatic_cancelled"], different["tier"]) == (None, True, 2)


def test_every_target_shares_the_critical() -> None:
    targets = [{"name": "a", "banes": 2}, {"name": "b", "downgrade_to": 1}]
    result = ability([10, 10], tiers=BRUTAL_SLAM, targets=targets)
    a, b = result["targets"]
    assert (a["tier"], a["critical"]) == (3, True)
    assert (b["tier"], b["critical"], b["downgraded"], b["damage"]) == (1, True, True, 5)


def test_downgrade_for_the_whole_roll_and_per_target() -> None:
    targets = [{"name": "a"}, {"name": "b", "downgrade_to": 1}, {"name": "c", "downgrade_to": 3}]
    result = ability([9, 8], tiers=BRUTAL_SLAM, downgrade_to=2, targets=targets)
    assert [t["tier"] for t in result["targets"]] == [2, 1, 2]
    assert [t["tier_rolled"] for t in result["targets"]] == [3, 3, 3]


# --- bad input ----------------------------------------------------------------------------------------


def test_unknown_argument() -> None:
    refused("unknown_argument", "'edge'", edge=1)


def test_missing_arguments() -> None:
    refused("missing_argument", "'characteristics'", characteristics=None)
    refused("missing_argument", "'roll_with'", roll_with=None)
    with pytest.raises(RulesError) as info:
        resolve(
            {"system": "drawsteel.ability", "characteristics": HEROES, "roll_with": "M"}, rng=Scripted([])
        )
    assert info.value.code == "missing_argument"
    assert "'tiers'" in info.value.message


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        ({"characteristics": [2]}, "bad_type", "'characteristics' must be a map"),
        ({"characteristics": {"M": 2, "X": 1}}, "bad_value", "'X'"),
        ({"characteristics": {"M": "2"}}, "bad_type", "'characteristics' 'M' must be an integer"),
        ({"characteristics": {"M": 11}}, "out_of_range", "from -10 to 10"),
        ({"characteristics": {"A": 1}}, "bad_value", "has no 'M', which 'roll_with' uses"),
        ({"characteristics": {"M": 1}, "tiers": FREE_STRIKE}, "bad_value", "has no 'A', which tier 1 uses"),
        ({"roll_with": "Q"}, "bad_value", "'roll_with' must use the letters M, A, R, I, P; got 'Q'"),
        ({"roll_with": "m"}, "bad_value", "'roll_with'"),
        ({"roll_with": []}, "bad_type", "'roll_with'"),
        ({"roll_with": 3}, "bad_type", "'roll_with'"),
        ({"roll_with": ["M", 1]}, "bad_value", "'roll_with'"),
        ({"choose": "Z"}, "bad_value", "'choose' must be one of"),
        ({"choose": "A"}, "bad_value", "no tier offers one"),
        ({"choose": "R", "tiers": FREE_STRIKE}, "bad_value", "tier 1 offers M or A"),
        ({"tiers": BRUTAL_SLAM[:2]}, "bad_value", "exactly 3 entries"),
        ({"tiers": "3 + M damage"}, "bad_type", "'tiers' must be a list"),
        ({"tiers": [*BRUTAL_SLAM[:2], 7]}, "bad_type", "'tiers' item 3 must be a string"),
        ({"tiers": [*BRUTAL_SLAM[:2], "x" * 301]}, "limit", "'tiers' item 3"),
        ({"edges": -1}, "out_of_range", "'edges'"),
        ({"bonus": 500}, "out_of_range", "'bonus'"),
        ({"auto_tiers": [0]}, "out_of_range", "'auto_tiers' item 1"),
        ({"downgrade_to": 5}, "out_of_range", "'downgrade_to'"),
        ({"targets": []}, "bad_value", "at least one target"),
        ({"targets": {"name": "x"}}, "bad_type", "'targets' must be a list"),
        ({"targets": ["goblin"]}, "bad_type", "'targets' item 1 must be a map"),
        ({"targets": [{}, {"evasion": 12}]}, "unknown_argument", "target 2 does not take 'evasion'"),
        ({"targets": [{"system": "x"}]}, "unknown_argument", "'targets' item 1 has the key 'system'"),
        ({"targets": [{1: 2}]}, "unknown_argument", "'targets' item 1 has the key 1"),
        ({"targets": [{"edges": 21}]}, "out_of_range", "target 1 argument 'edges' must be from 0 to 20"),
        ({"targets": [{"name": 5}]}, "bad_type", "target 1 argument 'name'"),
        ({"targets": [{"name": "n" * 101}]}, "limit", "target 1 argument 'name'"),
        ({"targets": [{}] * 51}, "limit", "'targets'"),
    ],
)
def test_bad_arguments(args: dict[str, Any], code: str, fragment: str) -> None:
    refused(code, fragment, **args)


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("", "is empty"),
        ("  ;  ", "is empty"),
        ("3 + Q damage", "cannot read 'Q'"),
        ("3 + m damage", "characteristic letters are capitals"),
        ("3 fier damage", "'fier' is not a damage type"),
        ("3 + M + A damage", "at most one characteristic"),
        ("3 + M or M damage", "names a characteristic twice"),
        ("3 + M or damage", "cannot read 'M or'"),
        ("3 + + M damage", "cannot read ''"),
        ("3 - 1 damage", "cannot read '3 - 1'"),
        ("damage", "no amount before 'damage'"),
        ("fire damage", "no amount before 'damage'"),
        ("M fier damage", "'fier' is not a damage type"),
        ("3 + M damage and prone", "must end with the word 'damage'"),
        ("1001 damage", "at most 1000"),
        ("3 + M damage, push 1", "must end with the word 'damage'"),
    ],
)
def test_malformed_tier_entries(entry: str, why: str) -> None:
    error = refused("bad_value", why, tiers=[BRUTAL_SLAM[0], entry, BRUTAL_SLAM[2]])
    assert "drawsteel.ability argument 'tiers' item 2" in error.message
    if entry.strip(" ;"):
        assert repr(entry.strip()) in error.message


@pytest.mark.parametrize(
    ("entry", "code", "why"),
    [
        ("2d0 + M damage", "bad_formula", "a die with at least 1 face"),
        ("2000d6 + M damage", "limit", "at most 1000 dice"),
        ("2d6 + 600d6 + 500d6 damage", "limit", "at most 1000 dice"),
    ],
)
def test_dice_in_tier_entries_that_cannot_be_rolled(entry: str, code: str, why: str) -> None:
    error = refused(code, why, tiers=[BRUTAL_SLAM[0], entry, BRUTAL_SLAM[2]])
    assert error.message.startswith(f"drawsteel.ability argument 'tiers' item 2 ({entry!r}): ")
