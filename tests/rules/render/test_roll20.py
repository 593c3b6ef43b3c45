"""rules.render.to_roll20: Roll20 roll-result JSON with our total, and a chat line that never rolls."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.render import to_roll20, to_text
from rules.render.roll20 import escape
from tests.rules.render.foundry_model import safe_eval
from tests.rules.render.samples import (
    die,
    formula_result,
    formula_results,
    num,
    off,
    on,
    op,
    random_results,
    scripted,
    scripted_results,
)

ALL = list(scripted_results()) + list(formula_results())

# ---------------------------------------------------------------------------------------------------
# An independent reading of a Roll20 roll-result: what Roll20 would total.

_COMPARE = {">=": lambda v, p: v >= p, "<=": lambda v, p: v <= p, "==": lambda v, p: v == p}


def _meets(value: float, cond: dict[str, Any] | None) -> bool:
    return cond is not None and _COMPARE[cond["comp"]](value, cond["point"])


def _value(results: list[dict[str, Any]], mods: dict[str, Any], success: bool) -> float:
    kept: list[float] = [r["v"] for r in results if not r.get("d")]
    if not success:
        return sum(kept)
    return sum(_meets(v, mods.get("success")) - _meets(v, mods.get("failure")) for v in kept)


def _counts(mods: dict[str, Any]) -> bool:
    return "success" in mods or "failure" in mods


def _expression(parts: list[dict[str, Any]]) -> str:
    out: list[str] = []
    for part in parts:
        if part["type"] == "R":
            out.append(f"({_value(part['results'], part['mods'], _counts(part['mods']))})")
        elif part["type"] == "G":
            for rolls in part["rolls"]:
                _expression(rolls)
            assert (part["resultType"] == "success") == _counts(part["mods"])
            out.append(f"({_value(part['results'], part['mods'], _counts(part['mods']))})")
        elif part["type"] == "M":
            out.append(part["expr"])
        else:
            assert part["type"] == "L"
            assert isinstance(part["text"], str)
    return " ".join(out)


def _any_counts(parts: list[dict[str, Any]]) -> bool:
    return any(p["type"] in ("R", "G") and _counts(p["mods"]) for p in parts)


def roll20_total(rollresult: dict[str, Any]) -> float:
    """What a reader adds up: an entry with a success or failure condition counts, others sum."""
    assert rollresult["type"] == "V"
    assert (rollresult["resultType"] == "success") == _any_counts(rollresult["rolls"])
    return safe_eval(_expression(rollresult["rolls"]))


# ---------------------------------------------------------------------------------------------------
# The chat line's safety, read the way Roll20 reads a message.

_PREFIX = "&{template:default} "
_FIELD = re.compile(r"\{\{([^{}]*)\}\}")
_CONSTANT = re.compile(r"\[\[(-?\d+(?:\.\d+)?)\]\]")


def fields_of(chat: str) -> dict[str, str]:
    """The template's fields, after checking that nothing in the line would make Roll20 roll or expand."""
    assert chat.startswith(_PREFIX)
    body = chat[len(_PREFIX) :]
    assert _FIELD.sub("", body).strip() == "", f"text outside {{{{fields}}}}: {body!r}"
    fields: dict[str, str] = {}
    for raw in _FIELD.findall(body):
        key, sep, value = raw.partition("=")
        assert sep, raw
        # Inline rolls are constants only; besides them, only text and character references remain.
        rest = _CONSTANT.sub("", value)
        assert re.fullmatch(r"([^&]|&#\d+;)*", rest + key), raw
        plain = re.sub(r"&#\d+;", "", rest + key)
        for ch in '[]{}|@%?#$&<>"`~*\\^!=\n\r':
            assert ch not in plain, (ch, raw)
        fields[html.unescape(key)] = value
    return fields


def test_duality_roll_as_roll20_json_and_chat() -> None:
    result = scripted({"system": "daggerheart.duality", "modifier": 2, "difficulty": 15}, [7, 10])
    rendered = to_roll20(result)
    assert rendered["rollresult"] == {
        "type": "V",
        "rolls": [
            {"type": "R", "dice": 1, "sides": 12, "mods": {}, "results": [{"v": 7}]},
            {"type": "L", "text": "hope"},
            {"type": "M", "expr": "+"},
            {"type": "R", "dice": 1, "sides": 12, "mods": {}, "results": [{"v": 10}]},
            {"type": "L", "text": "fear"},
            {"type": "M", "expr": "+2"},
        ],
        "resultType": "sum",
        "total": 19,
    }
    assert rendered["chat"] == (
        "&{template:default} {{name=Daggerheart duality roll}} {{Total=[[19]]}} "
        "{{Roll=1d12&#91;hope&#93; + 1d12&#91;fear&#93; + 2}} "
        "{{Dice=1d12&#91;hope&#93;: 7; 1d12&#91;fear&#93;: 10}} "
        "{{Result=Duality roll 19 with Fear (Hope 7, Fear 10) vs difficulty 15: success.}}"
    )


def test_dropped_dice_are_marked_d_and_keep_is_a_mod() -> None:
    result = scripted({"system": "daggerheart.attack", "modifier": 2, "advantage": True}, [6, 17])
    r = to_roll20(result)["rollresult"]["rolls"][0]
    assert r == {
        "type": "R",
        "dice": 2,
        "sides": 20,
        "mods": {"keep": {"end": "h", "count": 1}},
        "results": [{"v": 6, "d": True}, {"v": 17}],
    }


def test_honors_edge_chains_show_every_face_with_exploding_mods() -> None:
    result = scripted({"system": "honors_edge.roll", "pool": "3k1", "bonus": 2}, [6, 7, 10, 10, 2])
    rendered = to_roll20(result)
    assert rendered["rollresult"]["rolls"] == [
        {
            "type": "R",
            "dice": 3,
            "sides": 10,
            "mods": {"exploding": {"comp": "==", "point": 10}, "keep": {"end": "h", "count": 1}},
            "results": [{"v": 6, "d": True}, {"v": 7, "d": True}, {"v": 10}, {"v": 10}, {"v": 2}],
        },
        {"type": "M", "expr": "+2"},
    ]
    assert "{{Roll=3d10&#33;kh1 + 2}}" in rendered["chat"]
    assert "{{Dice=3d10&#33;kh1: 6 (dropped), 7 (dropped), 10&#33;, 10&#33;, 2}}" in rendered["chat"]


def test_success_counting_formula_is_a_success_result() -> None:
    result = scripted({"system": "dice", "formula": "3d6>4f1", "dialect": "roll20"}, [6, 1, 3])
    rr = to_roll20(result)["rollresult"]
    assert rr["resultType"] == "success"
    assert rr["rolls"][0]["mods"] == {
        "success": {"comp": ">=", "point": 4},
        "failure": {"comp": "==", "point": 1},
    }
    assert rr["total"] == 0 == roll20_total(rr)


def test_pool_is_a_group_with_its_rolls_and_results() -> None:
    pool = {
        "type": "pool",
        "rolls": [
            {"terms": [die(1, 8, [on(4)])], "total": 4, "formula": "1d8"},
            {"terms": [die(1, 10, [on(7)]), op("+"), num(1)], "total": 8, "formula": "1d10 + 1"},
        ],
        "modifiers": ["kh"],
        "results": [off(4, discarded=True), on(8)],
        "total": 8,
        "flavor": "best",
    }
    rr = to_roll20(formula_result([pool, op("*"), num(2)], 16))["rollresult"]
    assert rr["rolls"] == [
        {
            "type": "G",
            "rolls": [
                [{"type": "R", "dice": 1, "sides": 8, "mods": {}, "results": [{"v": 4}]}],
                [
                    {"type": "R", "dice": 1, "sides": 10, "mods": {}, "results": [{"v": 7}]},
                    {"type": "M", "expr": "+1"},
                ],
            ],
            "mods": {"keep": {"end": "h", "count": 1}},
            "resultType": "sum",
            "results": [{"v": 4, "d": True}, {"v": 8}],
        },
        {"type": "L", "text": "best"},
        {"type": "M", "expr": "*2"},
    ]
    assert roll20_total(rr) == 16


def test_parentheses_and_functions_are_math_around_their_rolls() -> None:
    paren = {"type": "paren", "terms": [die(1, 6, [on(5)]), op("+"), num(1)], "total": 6}
    fn = {"type": "function", "name": "floor", "args": [[paren, op("/"), num(4)]], "total": 1}
    rr = to_roll20(formula_result([fn, op("+"), num(2)], 3, "roll20"))["rollresult"]
    assert rr["rolls"] == [
        {"type": "M", "expr": "floor(("},
        {"type": "R", "dice": 1, "sides": 6, "mods": {}, "results": [{"v": 5}]},
        {"type": "M", "expr": "+1)/4)+2"},
    ]
    assert roll20_total(rr) == 3


def test_fate_dice_have_sides_f_and_penetrating_dice_show_one_less() -> None:
    fate = {**die(2, 3, [on(1), on(-1)]), "kind": "fate", "expression": "2dF"}
    pen = die(1, 6, [on(6, exploded=True), on(4, penetrated=True)], ["!p"])
    rr = to_roll20(formula_result([fate, op("+"), pen], 9, "roll20"))["rollresult"]
    assert rr["rolls"][0]["sides"] == "F"
    assert rr["rolls"][2]["results"] == [{"v": 6}, {"v": 3}]
    assert rr["rolls"][2]["mods"] == {"penetrating": {"comp": "==", "point": 6}}
    assert roll20_total(rr) == 9


@pytest.mark.parametrize(
    ("modifiers", "dialect", "mods"),
    [
        (["kh3"], "foundry", {"keep": {"end": "h", "count": 3}}),
        (["dl1"], "foundry", {"drop": {"end": "l", "count": 1}}),
        (["x>=5"], "foundry", {"exploding": {"comp": ">=", "point": 5}}),
        (["cs>4"], "foundry", {"success": {"comp": ">=", "point": 5}}),
        (["rr1"], "foundry", {"reroll": [{"comp": "==", "point": 1}]}),
        (["r<3"], "foundry", {"reroll": [{"comp": "<=", "point": 2, "maxrerolls": 1}]}),
        (["!!"], "roll20", {"compounding": {"comp": "==", "point": 6}}),
        (
            ["cs>5", "cf<2"],
            "roll20",
            {"customCrit": [{"comp": ">=", "point": 5}], "customFumble": [{"comp": "<=", "point": 2}]},
        ),
        (["ro<2"], "roll20", {"reroll": [{"comp": "<=", "point": 2, "maxrerolls": 1}]}),
        (["sd"], "roll20", {"sorting": "d"}),
        (["min2"], "foundry", {}),
    ],
)
def test_modifiers_become_roll20_mods(modifiers: list[str], dialect: str, mods: dict[str, Any]) -> None:
    result = formula_result([die(2, 6, [on(3), on(4)], modifiers)], 7, dialect)
    entry = next(p for p in to_roll20(result)["rollresult"]["rolls"] if p["type"] == "R")
    assert entry["mods"] == mods


@pytest.mark.parametrize(("name", "result"), ALL, ids=[name for name, _ in ALL])
def test_sample_totals_and_chat_lines(name: str, result: dict[str, Any]) -> None:
    rendered = to_roll20(result)
    if result["total"] is not None:
        assert rendered["rollresult"]["total"] == result["total"]
    assert roll20_total(rendered["rollresult"]) == pytest.approx(rendered["rollresult"]["total"])
    fields = fields_of(rendered["chat"])
    assert html.unescape(fields["Result"]) == to_text(result)
    if result["total"] is None:
        assert "Total" not in fields
    else:
        assert fields["Total"] == f"[[{result['total']}]]"


def test_random_rolls_keep_their_totals_and_safe_chat_lines() -> None:
    for result in random_results(25):
        rendered = to_roll20(result)
        assert rendered["rollresult"]["total"] == result["total"] or result["total"] is None
        assert roll20_total(rendered["rollresult"]) == pytest.approx(rendered["rollresult"]["total"])
        fields_of(rendered["chat"])


NASTY = "[[1d20]] {{x=y}} }} {{ | @{hp} %{a|b} ?{q|1} #macro $[[0]] &{template:x} <b>&amp; ! /roll \n"


def test_labels_and_summaries_cannot_inject_rolls_or_fields() -> None:
    result = scripted({"system": "drawsteel.power", "characteristic": 1}, [4, 5])
    result["text"] = NASTY
    rendered = to_roll20(result, label=NASTY)
    fields = fields_of(rendered["chat"])
    assert set(fields) == {"name", "Total", "Roll", "Dice", "Result"}
    assert html.unescape(fields["Result"]) == NASTY.replace("\n", " ")
    assert html.unescape(fields["name"]) == NASTY.replace("\n", " ")
    assert fields["Total"] == f"[[{result['total']}]]" == "[[10]]"


@given(st.text(max_size=80), st.text(max_size=80))
def test_any_text_is_shown_verbatim_and_never_parsed(label: str, text: str) -> None:
    result = formula_result([die(1, 6, [on(3)], flavor=text[:10] or None)], 3)
    result["text"] = text or "x"
    fields = fields_of(to_roll20(result, label=label or None)["chat"])
    shown = html.unescape(fields["Result"])
    assert shown == "".join(" " if (ord(c) < 32 or ord(c) == 127) else c for c in result["text"])


def test_escape_leaves_words_and_numbers_alone() -> None:
    plain = "Hope 7, Fear 10 (with Fear): -2 + 3; done."
    assert escape(plain) == plain
    assert escape("a|b") == "a&#124;b"
    assert escape("Honor’s édge") == "Honor’s édge"


def test_foundry_computed_dice_in_roll20_show_their_inner_roll() -> None:
    # Roll20 writes computed dice the same way, "(1d4)d6"; the roll-result has no place for the inner
    # roll, so its d4 appears in the chat line's dice (first, as it was rolled) and the entries still add up.
    result = scripted({"system": "dice", "formula": "(1d4)d6 + 1"}, [3, 2, 5, 1])
    out = to_roll20(result)
    assert out["rollresult"]["rolls"][0] == {
        "type": "R",
        "dice": 3,
        "sides": 6,
        "mods": {},
        "results": [{"v": 2}, {"v": 5}, {"v": 1}],
    }
    assert out["rollresult"]["total"] == 9
    assert "{{Roll=(1d4)d6 + 1}}" in out["chat"]
    assert "{{Dice=1d4: 3; (1d4)d6: 2, 5, 1}}" in out["chat"]
