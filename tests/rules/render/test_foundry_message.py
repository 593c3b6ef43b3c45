"""rules.render.to_foundry_message: ChatMessage fields for each protocol visibility."""

from __future__ import annotations

import json

import pytest

from rules import RulesError
from rules.render import to_foundry, to_foundry_message, to_text
from tests.rules.render.samples import formula_result, num, scripted

GMS = ["GmAAAAAAAAAAAAAA", "GmBBBBBBBBBBBBBB"]
ROLLER = "PlayerCCCCCCCCCC"


@pytest.fixture
def duality() -> dict[str, object]:
    return scripted({"system": "daggerheart.duality", "modifier": 2, "difficulty": 15}, [7, 10])


@pytest.mark.parametrize(
    ("visibility", "whisper", "blind"),
    [
        ("public", [], False),
        ("gm", [*GMS, ROLLER], False),
        ("blind", GMS, True),
        ("self", [ROLLER], False),
    ],
)
def test_visibility_sets_whisper_and_blind(
    duality: dict[str, object], visibility: str, whisper: list[str], blind: bool
) -> None:
    message = to_foundry_message(duality, visibility, GMS, ROLLER)
    assert message["whisper"] == whisper
    assert message["blind"] is blind
    assert set(message) == {"flavor", "content", "rolls", "whisper", "blind"}


def test_a_gm_rolling_a_gm_roll_is_listed_once() -> None:
    result = scripted({"system": "drawsteel.power", "characteristic": 1}, [4, 5])
    assert to_foundry_message(result, "gm", GMS, GMS[1])["whisper"] == GMS
    assert to_foundry_message(result, "blind", [*GMS, GMS[0]], ROLLER)["whisper"] == GMS


def test_rolls_are_json_strings_of_the_roll_data(duality: dict[str, object]) -> None:
    message = to_foundry_message(duality, "public", GMS, ROLLER)
    assert len(message["rolls"]) == 1
    assert isinstance(message["rolls"][0], str)
    assert json.loads(message["rolls"][0]) == to_foundry(duality)
    assert message["content"] == "19"


def test_flavor_is_the_summary_as_html_with_the_label_first(duality: dict[str, object]) -> None:
    plain = to_foundry_message(duality, "public", GMS, ROLLER)
    assert plain["flavor"] == to_text(duality)
    labelled = to_foundry_message(duality, "public", GMS, ROLLER, label='Sneak <past> the "guard" & run')
    assert labelled["flavor"] == (
        "Sneak &lt;past&gt; the &quot;guard&quot; &amp; run: " + to_text(duality).replace("&", "&amp;")
    )
    assert "<" not in labelled["flavor"]


def test_content_is_the_total_as_javascript_writes_it() -> None:
    assert to_foundry_message(formula_result([num(3.0)], 3.0), "public", [], ROLLER)["content"] == "3"
    assert to_foundry_message(formula_result([num(2.5)], 2.5), "public", [], ROLLER)["content"] == "2.5"


def test_unknown_visibility_is_refused(duality: dict[str, object]) -> None:
    with pytest.raises(RulesError) as caught:
        to_foundry_message(duality, "secret", GMS, ROLLER)
    assert caught.value.code == "bad_value"
    assert "public, gm, blind, self" in caught.value.message
