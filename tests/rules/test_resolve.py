"""``rules.resolve`` and ``rules.systems``: the entry points every caller goes through."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

import rules
from rules import CODES, RulesError, resolve, systems
from rules.rng import Scripted

#: The systems spec/rules.md promises.
SPEC_SYSTEMS = {
    "drawsteel.power",
    "drawsteel.ability",
    "daggerheart.duality",
    "daggerheart.attack",
    "honors_edge.roll",
    "honors_edge.skill",
    "honors_edge.damage",
    "nexus.test",
    "nexus.check",
    "dice",
}
#: Systems tablerelay adds to the spec's (docs/rules.md says why).
EXTENSIONS = {"faces"}

#: One small valid intent per system (from the spec).
MINIMAL: dict[str, dict[str, Any]] = {
    "drawsteel.power": {"characteristic": 2},
    "drawsteel.ability": {
        "characteristics": {"M": 2},
        "roll_with": "M",
        "tiers": ["2 damage", "5 damage", "7 damage"],
    },
    "daggerheart.duality": {"modifier": 1},
    "daggerheart.attack": {"modifier": 3},
    "honors_edge.roll": {"rolled": 3, "kept": 2},
    "honors_edge.skill": {"attribute": 2, "skill": 1},
    "honors_edge.damage": {"strength": 2, "weapon": "+3k0"},
    "nexus.test": {"attribute_die": "d6", "skill_rank": 1},
    "nexus.check": {"kind": "durability", "die": "d8"},
    "dice": {"formula": "2d6 + 1"},
    "faces": {"dice": [{"number": 2, "faces": 6}]},
}

#: A boolean where each system expects an integer (for ``dice``, where it expects a string), and the
#: name the error sentence must mention.
BOOLEAN_FOR_INTEGER: dict[str, tuple[dict[str, Any], str]] = {
    "drawsteel.power": ({"characteristic": True}, "characteristic"),
    "drawsteel.ability": ({**MINIMAL["drawsteel.ability"], "edges": False}, "edges"),
    "daggerheart.duality": ({"modifier": True}, "modifier"),
    "daggerheart.attack": ({"modifier": 3, "targets": [{"evasion": True}]}, "evasion"),
    "honors_edge.roll": ({"rolled": True, "kept": 1}, "rolled"),
    "honors_edge.skill": ({"attribute": 2, "skill": False}, "skill"),
    "honors_edge.damage": ({"strength": True}, "strength"),
    "nexus.test": ({"attribute_die": "d6", "skill_rank": True}, "skill_rank"),
    "nexus.check": (
        {"kind": "individual", "die": "d4", "table": [{"from": True, "to": 4, "outcome": "fine"}]},
        "from",
    ),
    "dice": ({"formula": True}, "formula"),
    "faces": ({"dice": [{"number": True, "faces": 6}]}, "number"),
}


def refusal(intent: Any) -> RulesError:
    with pytest.raises(RulesError) as caught:
        resolve(intent, rng=Scripted([]))
    assert caught.value.code in CODES
    return caught.value


def test_rules_error_is_a_value_error_with_a_code_and_a_sentence() -> None:
    error = RulesError("bad_type", "Something must be an integer; got a string.")
    assert isinstance(error, ValueError)
    assert error.code == "bad_type"
    assert error.message == str(error)
    assert repr(error) == "RulesError('bad_type', 'Something must be an integer; got a string.')"
    assert all(isinstance(code, str) and meaning for code, meaning in CODES.items())


@pytest.mark.parametrize("intent", [None, [], ["system", "drawsteel.power"], "drawsteel.power", 3, b"x"])
def test_an_intent_that_is_not_a_map_is_refused(intent: Any) -> None:
    error = refusal(intent)
    assert error.code == "bad_intent"
    assert "map" in error.message


@pytest.mark.parametrize(
    "intent", [{}, {"characteristic": 2}, {"system": None}, {"system": 3}, {"system": ["dice"]}]
)
def test_an_intent_without_a_system_name_is_refused(intent: Any) -> None:
    error = refusal(intent)
    assert error.code == "bad_intent"
    assert "'system'" in error.message


@pytest.mark.parametrize("name", ["drawsteel", "honors_edge.rol", "DICE", "", "x" * 10_000])
def test_an_unknown_system_is_refused_with_the_list_of_systems(name: str) -> None:
    error = refusal({"system": name})
    assert error.code == "unknown_system"
    assert "honors_edge.roll" in error.message
    assert len(error.message) < 1000, "the sentence must not echo a huge name"


@pytest.mark.parametrize("system", sorted(MINIMAL))
def test_minimal_intents_resolve(system: str) -> None:
    args = MINIMAL[system]
    result = resolve({"system": system, **args})
    assert result["system"] == system


@pytest.mark.parametrize("system", sorted(MINIMAL))
def test_an_unknown_argument_is_refused_and_named(system: str) -> None:
    args = MINIMAL[system]
    error = refusal({"system": system, **args, "frobnicate": 1})
    assert error.code == "unknown_argument"
    assert "frobnicate" in error.message


@pytest.mark.parametrize("system", sorted(BOOLEAN_FOR_INTEGER))
def test_a_boolean_where_an_integer_belongs_is_a_bad_type(system: str) -> None:
    args, name = BOOLEAN_FOR_INTEGER[system]
    error = refusal({"system": system, **args})
    assert error.code == "bad_type"
    assert name in error.message


@pytest.mark.parametrize(
    ("intent", "code"),
    [
        ({"system": "drawsteel.power", "characteristic": 2.0}, "bad_type"),
        ({"system": "drawsteel.power", "characteristic": "2"}, "bad_type"),
        ({"system": "drawsteel.power", "edges": -1}, "out_of_range"),
        ({"system": "daggerheart.attack"}, "missing_argument"),
        ({"system": "nexus.test", "attribute_die": "d7"}, "bad_value"),
        (
            {"system": "nexus.test", "attribute_die": "d6", "skill_type": "magic", "trained": False},
            "not_allowed",
        ),
        ({"system": "honors_edge.roll", "pool": "99k1"}, "out_of_range"),
        ({"system": "honors_edge.roll", "pool": "40k40", "modifiers": ["+1k0"]}, "limit"),
    ],
)
def test_each_kind_of_mistake_has_its_code(intent: dict[str, Any], code: str) -> None:
    assert refusal(intent).code == code


def test_a_null_argument_means_the_default() -> None:
    result = resolve(
        {"system": "honors_edge.roll", "pool": "1k1", "tn": None, "bonus": None}, rng=Scripted([4])
    )
    assert result["tn"] is None
    assert result["total"] == 4


def test_any_mapping_is_an_intent() -> None:
    intent = MappingProxyType({"system": "honors_edge.roll", "pool": "2k1"})
    assert resolve(intent, rng=Scripted([3, 9]))["total"] == 9


def test_resolve_does_not_change_the_intent() -> None:
    intent = {"system": "honors_edge.roll", "pool": "2k1", "modifiers": ["+1k0"], "assist_ranks": [1]}
    before = {**intent, "modifiers": [*intent["modifiers"]], "assist_ranks": [1]}
    resolve(intent, rng=Scripted([3, 9, 1]))
    assert intent == before


def test_without_an_rng_the_secure_dice_roll() -> None:
    totals = {
        resolve({"system": "honors_edge.roll", "pool": "1k1", "explode": False})["total"] for _ in range(400)
    }
    # 400 real d10s show every face (each is missed with probability 0.9**400 < 1e-18).
    assert totals == set(range(1, 11))


def test_a_script_that_runs_out_is_a_rules_error() -> None:
    error = refusal({"system": "honors_edge.roll", "pool": "3k2"})
    assert error.code == "script_exhausted"


def test_systems_lists_every_system_of_the_spec_with_a_description() -> None:
    listed = systems()
    assert set(listed) == SPEC_SYSTEMS | EXTENSIONS == set(MINIMAL) == set(BOOLEAN_FOR_INTEGER)
    assert list(listed) == sorted(listed)
    for name, description in listed.items():
        assert isinstance(description, str)
        assert 10 < len(description) < 200, name
        assert "\n" not in description


def test_package_exports() -> None:
    assert set(rules.__all__) >= {"resolve", "systems", "RulesError", "CODES"}


# --- the examples in docs/rules.md are real -----------------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"

#: The dice each example in docs/rules.md's "Examples" section says it rolled.
DOC_DICE: dict[str, list[int]] = {
    "drawsteel.power": [7, 8],
    "drawsteel.ability": [9, 8],
    "daggerheart.duality": [9, 5],
    "daggerheart.attack": [10],
    "honors_edge.roll": [3, 10, 4, 7, 2, 9, 5],
    "honors_edge.skill": [7, 2, 6],
    "honors_edge.damage": [3, 9, 10, 2, 4, 1],
    "nexus.test": [6, 3, 5],
    "nexus.check": [2],
    "dice": [3, 5, 1, 6],
}


def doc_examples() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    section = DOC.read_text(encoding="utf-8").split("### Examples", 1)[1].split("\n## ", 1)[0]
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", section, flags=re.DOTALL)]
    return list(zip(blocks[0::2], blocks[1::2], strict=True))


def contains(whole: Any, part: Any) -> bool:
    """``part`` is ``whole`` abridged: maps may leave keys out, lists may end with "…"."""
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(k in whole and contains(whole[k], v) for k, v in part.items())
    if isinstance(part, list):
        if part and part[-1] == "…":
            part = part[:-1]
            whole = whole[: len(part)] if isinstance(whole, list) else whole
        return isinstance(whole, list) and len(whole) == len(part) and all(map(contains, whole, part))
    return bool(whole == part)


def test_the_docs_show_one_example_per_system() -> None:
    assert [intent["system"] for intent, _ in doc_examples()] == list(DOC_DICE)


@pytest.mark.parametrize(("intent", "shown"), doc_examples(), ids=lambda v: v.get("system", "result"))
def test_the_examples_in_the_docs_are_what_resolve_returns(
    intent: dict[str, Any], shown: dict[str, Any]
) -> None:
    dice = Scripted(DOC_DICE[intent["system"]])
    result = resolve(intent, rng=dice)
    assert dice.remaining == 0
    assert contains(result, shown), result
