"""Modifier translation between the notations, flavor clean-up, and the one-line summary."""

from __future__ import annotations

import pytest

from rules.render import to_foundry, to_roll20, to_text
from rules.render.modifiers import Mod, parse, roll20_text
from tests.rules.render.samples import die, formula_result, on, scripted


@pytest.mark.parametrize(
    ("written", "dialect", "expected"),
    [
        ("kh3", "foundry", Mod("keep", "kh3", count=3, end="h")),
        ("k", "foundry", Mod("keep", "k", count=1, end="h")),
        ("d2", "foundry", Mod("drop", "d2", count=2, end="l")),
        ("x", "foundry", Mod("explode", "x", "x")),
        ("x6", "foundry", Mod("explode", "x6", "x", "=", 6)),
        ("xo2>=5", "foundry", Mod("explode", "xo2>=5", "xo", ">=", 5, 2)),
        ("rr<2", "foundry", Mod("reroll", "rr<2", "recursive", "<", 2)),
        ("cs>=4", "foundry", Mod("success", "cs>=4", "", ">=", 4)),
        ("df=1", "foundry", Mod("failure", "df=1", "deduct", "=", 1)),
        ("cf", "foundry", Mod("failure", "cf", "count")),
        ("min2", "foundry", Mod("other", "min2")),
        ("!", "roll20", Mod("explode", "!", "x")),
        ("!>4", "roll20", Mod("explode", "!>4", "x", ">=", 4)),
        ("!!5", "roll20", Mod("explode", "!!5", "compound", "=", 5)),
        ("!p", "roll20", Mod("explode", "!p", "penetrate")),
        (">4", "roll20", Mod("success", ">4", "", ">=", 4)),
        ("<3", "roll20", Mod("success", "<3", "", "<=", 3)),
        ("f1", "roll20", Mod("failure", "f1", "deduct", "=", 1)),
        ("ro<2", "roll20", Mod("reroll", "ro<2", "once", "<=", 2)),
        ("cs>19", "roll20", Mod("crit", "cs>19", "", ">=", 19)),
        ("sd", "roll20", Mod("sort", "sd", end="d")),
        ("mt", "roll20", Mod("match", "mt", "total")),
    ],
)
def test_each_notation_reads_its_own_modifiers(written: str, dialect: str, expected: Mod) -> None:
    assert parse([written], dialect) == [expected]  # type: ignore[arg-type]


def test_modifiers_written_together_are_read_apart() -> None:
    assert [m.kind for m in parse(["x>=9cs>=8"], "foundry")] == ["explode", "success"]
    assert [m.kind for m in parse(["!>9k3>4f1"], "roll20")] == ["explode", "keep", "success", "failure"]


@pytest.mark.parametrize(
    ("foundry", "roll20"),
    [
        ("x", "!"),
        ("x>=5", "!>5"),
        ("x>4", "!>5"),
        ("kh3", "kh3"),
        ("dl1", "dl1"),
        ("r", "ro1"),
        ("rr<3", "r<2"),
        ("cs>=5", ">5"),
        ("cs=6", "=6"),
        ("cf<2", "<1"),
        ("df=1", "f1"),
        ("min2", None),
    ],
)
def test_foundry_modifiers_in_roll20_notation(foundry: str, roll20: str | None) -> None:
    (mod,) = parse([foundry], "foundry")
    assert roll20_text(mod, 6) == roll20


def test_roll20_chat_shows_the_formula_in_roll20_notation() -> None:
    result = scripted(
        {"system": "dice", "formula": "5d10x>=9cs>=8 + 1", "dialect": "foundry"}, [9, 3, 8, 4, 1, 2]
    )
    assert "{{Roll=5d10&#33;&#62;9&#62;8 + 1}}" in to_roll20(result)["chat"]


def test_flavor_brackets_cannot_end_a_foundry_flavor() -> None:
    term = die(1, 6, [on(4)], flavor="fire] + [ice")
    roll = to_foundry(formula_result([term], 4))
    assert roll["terms"][0]["options"] == {"flavor": "fire) + (ice"}
    assert roll["formula"] == "1d6[fire) + (ice]"


def test_to_text_is_the_result_summary_or_formula_and_total() -> None:
    result = scripted({"system": "drawsteel.power", "characteristic": 2}, [7, 8])
    assert to_text(result) == result["text"]
    assert to_text({"system": "x", "formula": "1d6 + 1", "total": 5}) == "1d6 + 1 = 5"
    assert to_text({"system": "x", "formula": "1d6", "total": None, "text": ""}) == "1d6"
