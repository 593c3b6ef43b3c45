"""drawsteel.power: every worked rule of the power-roll seed, with scripted dice, and bad input."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules import RulesError, resolve
from rules.rng import Scripted
from rules.systems.drawsteel.outcome import edge_state


def power(faces: list[int], **args: Any) -> dict[str, Any]:
    """Resolve a power roll with the given two d10 faces, checking both (and only both) were rolled."""
    rng = Scripted(faces)
    result = resolve({"system": "drawsteel.power", **args}, rng=rng)
    assert rng.remaining == 0
    return result


def refused(code: str, fragment: str, **args: Any) -> RulesError:
    """The intent is refused with ``code`` before any die is rolled (the script is empty)."""
    with pytest.raises(RulesError) as info:
        resolve({"system": "drawsteel.power", **args}, rng=Scripted([]))
    assert info.value.code == code, info.value.message
    assert fragment in info.value.message
    return info.value


# --- the result's shape -------------------------------------------------------------------------------


def test_result_has_the_promised_fields() -> None:
    result = power([7, 8], characteristic=2, edges=1)
    assert result["system"] == "drawsteel.power"
    assert result["dice"] == [
        {"faces": 10, "value": 7, "kept": True},
        {"faces": 10, "value": 8, "kept": True},
    ]
    assert result["total"] == 19
    assert result["formula"] == "2d10 + 2 + 2 (edge)"
    assert result["natural"] == 15
    assert result["edge_state"] == "edge"
    assert result["tier_rolled"] == 3
    assert result["tier"] == 3
    assert result["critical"] is False
    assert result["automatic"] is None
    assert result["automatic_cancelled"] is False
    assert result["downgraded"] is False
    assert result["kind"] == "ability"
    assert result["text"] == "Ability roll: 2d10 (7, 8) + 2 + 2 (edge) = 19, tier 3"
    assert "effects" not in result
    assert "requires" not in result


def test_defaults_are_a_plain_roll() -> None:
    result = power([4, 5])
    assert result["total"] == 9
    assert result["formula"] == "2d10"
    assert result["edge_state"] == "none"
    assert result["tier"] == 1


@pytest.mark.parametrize(
    ("args", "formula"),
    [
        ({"characteristic": -1}, "2d10 - 1"),
        ({"characteristic": 3, "bonus": 1}, "2d10 + 3 + 1 (bonus)"),
        ({"characteristic": 3, "bonus": -2, "banes": 1}, "2d10 + 3 - 2 (penalty) - 2 (bane)"),
        ({"characteristic": 1, "edges": 2}, "2d10 + 1"),
    ],
)
def test_formula_names_every_term(args: dict[str, Any], formula: str) -> None:
    assert power([5, 5], **args)["formula"] == formula


# --- tiers --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("faces", "characteristic", "total", "tier"),
    [
        ([1, 1], 0, 2, 1),
        ([5, 6], 0, 11, 1),
        ([6, 6], 0, 12, 2),
        ([8, 8], 0, 16, 2),
        ([8, 9], 0, 17, 3),
        ([5, 4], 2, 11, 1),
        ([5, 5], 2, 12, 2),
        ([7, 7], 2, 16, 2),
        ([7, 8], 2, 17, 3),
        ([9, 9], -2, 16, 2),
    ],
)
def test_tier_thresholds(faces: list[int], characteristic: int, total: int, tier: int) -> None:
    result = power(faces, characteristic=characteristic)
    assert (result["total"], result["tier_rolled"], result["tier"]) == (total, tier, tier)


# --- edges and banes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edges", "banes", "state"),
    [
        (0, 0, "none"),
        (1, 0, "edge"),
        (2, 0, "double_edge"),
        (5, 0, "double_edge"),
        (0, 1, "bane"),
        (0, 2, "double_bane"),
        (0, 9, "double_bane"),
        # an edge and a bane cancel
        (1, 1, "none"),
        # a double edge and a double bane cancel, however many make each double
        (2, 2, "none"),
        (4, 3, "none"),
        # a double edge and one bane leave one edge, however many edges made the double
        (2, 1, "edge"),
        (6, 1, "edge"),
        # a double bane and one edge leave one bane
        (1, 2, "bane"),
        (1, 7, "bane"),
    ],
)
def test_edges_and_banes_cap_then_cancel(edges: int, banes: int, state: str) -> None:
    assert edge_state(edges, banes) == state
    assert power([5, 5], edges=edges, banes=banes)["edge_state"] == state


def test_single_edge_adds_two_and_single_bane_takes_two() -> None:
    assert power([5, 5], characteristic=1, edges=1)["total"] == 13
    assert power([5, 5], characteristic=1, banes=1)["total"] == 9
    # the leftover edge of a double edge against one bane is worth +2 as well
    assert power([5, 5], characteristic=1, edges=2, banes=1)["total"] == 13


def test_single_edge_can_cross_a_threshold() -> None:
    assert power([5, 5], edges=1)["tier"] == 2  # 10 + 2 = 12
    assert power([6, 6], banes=1)["tier"] == 1  # 12 - 2 = 10


@pytest.mark.parametrize(
    ("faces", "tier_from_total", "tier"),
    [([2, 3], 1, 2), ([6, 6], 2, 3), ([9, 8], 3, 3)],
)
def test_double_edge_adds_nothing_but_raises_the_tier(
    faces: list[int], tier_from_total: int, tier: int
) -> None:
    result = power(faces, edges=2)
    assert result["total"] == sum(faces)
    assert result["tier_rolled"] == tier
    assert result["tier"] == tier
    assert f"tier {tier_from_total}, double edge → tier {tier}" in result["text"]


@pytest.mark.parametrize(
    ("faces", "tier"),
    [([2, 3], 1), ([6, 6], 1), ([9, 8], 2)],
)
def test_double_bane_adds_nothing_but_lowers_the_tier(faces: list[int], tier: int) -> None:
    result = power(faces, banes=3)
    assert result["total"] == sum(faces)
    assert result["tier"] == tier


@pytest.mark.parametrize("faces", [[9, 10], [10, 9], [10, 10]])
def test_natural_19_or_20_is_tier_3_even_under_a_double_bane(faces: list[int]) -> None:
    result = power(faces, characteristic=-10, bonus=-100, banes=2)
    assert result["total"] < 0
    assert result["edge_state"] == "double_bane"
    assert result["tier_rolled"] == 3
    assert result["tier"] == 3
    assert f"natural {sum(faces)} → tier 3" in result["text"]


def test_natural_18_gets_no_such_help() -> None:
    result = power([9, 9], characteristic=-2, banes=2)
    assert result["total"] == 16
    assert result["tier"] == 1
    assert result["critical"] is False


# --- bonuses and penalties ----------------------------------------------------------------------------


def test_bonus_adds_independently_of_edges() -> None:
    assert power([5, 5], characteristic=2, bonus=3, edges=1)["total"] == 17
    assert power([5, 5], characteristic=2, bonus=-3, banes=1)["total"] == 7
    double = power([5, 5], characteristic=2, bonus=3, edges=2)
    assert double["total"] == 15  # the double edge adds nothing to the total …
    assert double["tier"] == 3  # … and still raises tier 2 to tier 3


# --- criticals ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("faces", [[9, 10], [10, 10]])
def test_natural_19_or_20_is_a_critical_on_an_ability_roll_only(faces: list[int]) -> None:
    ability = power(faces, kind="ability")
    test = power(faces, kind="test")
    assert ability["critical"] is True
    assert "critical hit" in ability["text"]
    assert test["critical"] is False
    assert "critical" not in test["text"]
    assert ability["tier"] == test["tier"] == 3
    assert test["text"].startswith("Test: ")


# --- automatic tier outcomes --------------------------------------------------------------------------


def test_equal_automatic_outcomes_apply() -> None:
    result = power([1, 2], auto_tiers=[2, 2])
    assert result["tier_rolled"] == 1
    assert result["automatic"] == 2
    assert result["tier"] == 2
    assert "automatic tier 2" in result["text"]


def test_an_automatic_outcome_overrides_edges_banes_and_bonuses() -> None:
    result = power([9, 8], characteristic=5, bonus=10, edges=2, auto_tiers=[1])
    assert result["tier_rolled"] == 3
    assert result["tier"] == 1


def test_different_automatic_outcomes_cancel() -> None:
    result = power([6, 6], auto_tiers=[1, 3, 3])
    assert result["automatic"] is None
    assert result["automatic_cancelled"] is True
    assert result["tier"] == 2
    assert "automatic tiers 1 and 3 cancel out" in result["text"]


def test_automatic_outcome_keeps_the_natural_critical() -> None:
    result = power([10, 10], auto_tiers=[1])
    assert result["tier_rolled"] == 3
    assert result["tier"] == 1
    assert result["critical"] is True


def test_automatic_outcome_gives_no_critical_without_the_natural() -> None:
    result = power([2, 2], auto_tiers=[3])
    assert result["tier"] == 3
    assert result["critical"] is False


# --- downgrades ---------------------------------------------------------------------------------------


def test_downgrade_keeps_the_critical() -> None:
    result = power([10, 9], characteristic=2, downgrade_to=2)
    assert result["tier_rolled"] == 3
    assert result["tier"] == 2
    assert result["downgraded"] is True
    assert result["critical"] is True
    assert "downgraded to tier 2" in result["text"]


@pytest.mark.parametrize("downgrade_to", [2, 3])
def test_downgrade_never_raises_a_tier(downgrade_to: int) -> None:
    result = power([6, 6], downgrade_to=downgrade_to)
    assert result["tier"] == 2
    assert result["downgraded"] is False
    assert "downgraded" not in result["text"]


def test_downgrade_applies_after_an_automatic_outcome() -> None:
    result = power([1, 1], auto_tiers=[3], downgrade_to=2)
    assert result["automatic"] == 3
    assert result["tier"] == 2
    assert result["downgraded"] is True


# --- the rules as properties over every input ---------------------------------------------------------

face = st.integers(1, 10)


@given(
    faces=st.tuples(face, face),
    characteristic=st.integers(-10, 10),
    edges=st.integers(0, 20),
    banes=st.integers(0, 20),
    bonus=st.integers(-100, 100),
    auto_tiers=st.lists(st.integers(1, 3), max_size=4),
    downgrade_to=st.none() | st.integers(1, 3),
    kind=st.sampled_from(["ability", "test"]),
)
def test_properties(
    faces: tuple[int, int],
    characteristic: int,
    edges: int,
    banes: int,
    bonus: int,
    auto_tiers: list[int],
    downgrade_to: int | None,
    kind: str,
) -> None:
    result = power(
        list(faces),
        characteristic=characteristic,
        edges=edges,
        banes=banes,
        bonus=bonus,
        auto_tiers=auto_tiers,
        downgrade_to=downgrade_to,
        kind=kind,
    )
    natural = sum(faces)
    single = {"edge": 2, "bane": -2}.get(result["edge_state"], 0)
    assert result["natural"] == natural
    assert result["total"] == natural + characteristic + bonus + single
    assert 1 <= result["tier"] <= result["tier_rolled"] or result["automatic"] is not None
    if natural >= 19:
        assert result["tier_rolled"] == 3
    assert result["critical"] == (kind == "ability" and natural >= 19)
    if len(set(auto_tiers)) == 1:
        assert result["automatic"] == auto_tiers[0]
    else:
        assert result["automatic"] is None
    applied = result["automatic"] or result["tier_rolled"]
    assert result["tier"] == (applied if downgrade_to is None else min(applied, downgrade_to))
    assert result["downgraded"] == (result["tier"] < applied)
    assert result["text"].endswith(("critical hit", f"tier {result['tier']}", "cancel out"))


# --- bad input ----------------------------------------------------------------------------------------


def test_unknown_argument() -> None:
    error = refused("unknown_argument", "'edge'", edge=1)
    assert "drawsteel.power" in error.message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("characteristic", "2"),
        ("characteristic", 2.5),
        ("characteristic", True),
        ("edges", "1"),
        ("banes", [1]),
        ("bonus", 1.0),
        ("downgrade_to", "2"),
        ("auto_tiers", 3),
        ("kind", 1),
    ],
)
def test_wrong_type(name: str, value: object) -> None:
    refused("bad_type", f"'{name}'", **{name: value})


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("characteristic", 11, "from -10 to 10"),
        ("characteristic", -11, "from -10 to 10"),
        ("edges", -1, "from 0 to 20"),
        ("edges", 21, "from 0 to 20"),
        ("banes", -1, "from 0 to 20"),
        ("bonus", 101, "from -100 to 100"),
        ("bonus", -101, "from -100 to 100"),
        ("downgrade_to", 0, "from 1 to 3"),
        ("downgrade_to", 4, "from 1 to 3"),
    ],
)
def test_out_of_range(name: str, value: int, allowed: str) -> None:
    error = refused("out_of_range", f"'{name}'", **{name: value})
    assert allowed in error.message


@pytest.mark.parametrize(
    ("items", "code"), [([4], "out_of_range"), ([0], "out_of_range"), ([2, "3"], "bad_type")]
)
def test_bad_automatic_tiers(items: list[object], code: str) -> None:
    refused(code, "'auto_tiers' item", auto_tiers=items)


def test_too_many_automatic_tiers() -> None:
    refused("limit", "'auto_tiers'", auto_tiers=[1] * 11)


def test_bad_kind() -> None:
    error = refused("bad_value", "'kind'", kind="save")
    assert "'ability', 'test'" in error.message


def test_unknown_arguments_list_every_argument_known() -> None:
    # The optional arguments are taken in one step when none is given (Args.absent); the refusal of an
    # unknown one still names them all.
    error = refused("unknown_argument", "'edge'", characteristic=2, edge=1)
    assert error.message == (
        "drawsteel.power does not take 'edge'; its arguments are: auto_tiers, banes, bonus, "
        "characteristic, downgrade_to, edges, kind."
    )


@pytest.mark.parametrize(
    "args",
    [
        {"edges": None},
        {"kind": None},
        {"auto_tiers": None, "downgrade_to": None},
        {"edges": 0, "banes": 0, "bonus": 0, "auto_tiers": [], "kind": "ability"},
    ],
)
def test_optional_arguments_given_as_defaults_roll_as_if_absent(args: dict[str, Any]) -> None:
    assert power([3, 9], characteristic=1, **args) == power([3, 9], characteristic=1)
