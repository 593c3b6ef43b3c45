"""The ``faces`` system: bare faces for a VTT's own formula, in the order they were asked for."""

from __future__ import annotations

from typing import Any

import pytest

import rules
from rules.errors import RulesError
from rules.render import to_foundry
from rules.rng import Scripted


def faces(dice: object, rng: Scripted, **extra: object) -> dict[str, Any]:
    return rules.resolve({"system": "faces", "dice": dice, **extra}, rng=rng)


def test_groups_roll_in_the_order_asked() -> None:
    result = faces([{"number": 2, "faces": 20}, {"number": 3, "faces": 6}], Scripted([14, 3, 2, 5, 1]))
    assert [(d["faces"], d["value"]) for d in result["dice"]] == [(20, 14), (20, 3), (6, 2), (6, 5), (6, 1)]
    assert result["total"] is None
    assert result["formula"] == "2d20 + 3d6"
    assert result["text"] == "d20 14 3 · d6 2 5 1"
    assert "for" not in result


def test_the_vtt_formula_is_context_only() -> None:
    result = faces([{"number": 1, "faces": 20}], Scripted([17]), formula="1d20 + 5")
    assert result["for"] == "1d20 + 5"
    assert result["text"] == "1d20 + 5: d20 17"
    assert [d["value"] for d in result["dice"]] == [17]


def test_foundry_rendering_shows_the_faces() -> None:
    roll = to_foundry(faces([{"number": 2, "faces": 6}], Scripted([4, 6])))
    die = roll["terms"][0]
    assert (die["class"], die["number"], die["faces"]) == ("Die", 2, 6)
    assert [r["result"] for r in die["results"]] == [4, 6]


@pytest.mark.parametrize(
    ("dice", "code", "words"),
    [
        ([], "missing_argument", "at least one group"),
        ("2d6", "bad_type", "must be a list"),
        ([{"number": 2}], "bad_type", "'dice[0].faces' must be an integer"),
        ([{"number": 0, "faces": 6}], "out_of_range", "dice[0].number"),
        ([{"number": 2, "faces": 0}], "out_of_range", "dice[0].faces"),
        ([{"number": 2, "faces": 6, "x": 1}], "bad_type", "'number' and 'faces'"),
        ([{"number": True, "faces": 6}], "bad_type", "dice[0].number"),
        ([{"number": 600, "faces": 6}, {"number": 600, "faces": 8}], "limit", "at most 1000 dice"),
        ([{"number": 1, "faces": 6}] * 101, "limit", "at most 100 items"),
    ],
)
def test_bad_requests_are_refused_with_a_sentence(dice: object, code: str, words: str) -> None:
    with pytest.raises(RulesError) as caught:
        faces(dice, Scripted([]))
    assert caught.value.code == code
    assert words in caught.value.message


def test_unknown_arguments_are_named() -> None:
    with pytest.raises(RulesError) as caught:
        faces([{"number": 1, "faces": 6}], Scripted([1]), visibility="gm")
    assert caught.value.code == "unknown_argument"
    assert "'visibility'" in caught.value.message
