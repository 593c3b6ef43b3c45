"""Results as Foundry VTT data: ``Roll#toJSON`` shapes (v12/v13) and ChatMessage creation fields.

A Foundry module turns ``to_foundry(result)`` back into a live roll with ``Roll.fromData(data)``: the
results are taken as rolled, nothing is rolled again, ``roll.total`` is the result's total and Dice So
Nice animates exactly the faces the server rolled. ``Roll.fromData`` also parses ``formula``, so the
formula is always written in Foundry's own notation, whatever notation the roll was asked in.

Term classes and the attributes each one serialises (Foundry's ``SERIALIZE_ATTRIBUTES``):
``Die``/``FateDie``/``Coin``: number, faces, modifiers, results; ``NumericTerm``: number;
``OperatorTerm``: operator; ``ParentheticalTerm``: term, roll; ``FunctionTerm``: fn, terms, rolls, result;
``PoolTerm``: terms, modifiers, rolls, results. Every term also has class, options and evaluated.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rules.dice.terms import DieResult, DieTerm, Number, PoolTerm, Term
from rules.errors import RulesError
from rules.render.modifiers import Dialect, foundry_texts, parse
from rules.render.plan import is_unary, plan, terms_total
from rules.render.text import to_text

JSON = dict[str, Any]

#: The protocol's visibilities and the Foundry roll modes they match.
ROLL_MODES: dict[str, str] = {
    "public": "publicroll",
    "gm": "gmroll",
    "blind": "blindroll",
    "self": "selfroll",
}

_DIE_CLASSES = {"standard": "Die", "fate": "FateDie", "coin": "Coin"}


def to_foundry(result: Mapping[str, Any]) -> JSON:
    """``result`` as Foundry ``Roll`` data (what ``Roll#toJSON`` returns), ready for ``Roll.fromData``."""
    shown = plan(result)
    return _roll(shown.terms, shown.total, shown.dialect)


def to_foundry_message(
    result: Mapping[str, Any],
    visibility: str,
    gm_ids: Sequence[str],
    roller_id: str,
    *,
    label: str | None = None,
) -> JSON:
    """ChatMessage creation data showing ``result`` to the audience of ``visibility``.

    ``gm_ids`` and ``roller_id`` are Foundry user ids. ``rolls`` holds the roll as a JSON string, the
    form a ChatMessage stores (its ``rolls`` field is an array of JSON fields). ``content`` is the total
    as text, as ``Roll#toMessage`` writes it: Foundry shows the rendered roll in its place.
    """
    if visibility not in ROLL_MODES:
        raise RulesError(
            "bad_value",
            f"visibility must be one of {', '.join(ROLL_MODES)}; got {str(visibility)[:40]!r}.",
        )
    roll = to_foundry(result)
    gms = list(dict.fromkeys(gm_ids))
    whisper = {
        "public": [],
        "gm": list(dict.fromkeys([*gms, roller_id])),
        "blind": gms,
        "self": [roller_id],
    }[visibility]
    summary = to_text(result)
    flavor = f"{label}: {summary}" if label else summary
    return {
        "flavor": html.escape(flavor),
        "content": js_number(roll["total"]),
        "rolls": [json.dumps(roll, separators=(",", ":"), ensure_ascii=False)],
        "whisper": whisper,
        "blind": visibility == "blind",
    }


def js_number(value: Number) -> str:
    """A number as JavaScript's ``String(n)`` writes it (``3``, not ``3.0``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


def _roll(terms: Sequence[Term], total: Number, dialect: Dialect) -> JSON:
    rendered = [_term(t, dialect) for t in terms]
    # A sign is written against its operand ("1d6 * -2"), as Foundry's parser reads it.
    formulas = [
        f.strip() if t["type"] == "operator" and is_unary(terms, i) else f
        for i, (t, (_, f)) in enumerate(zip(terms, rendered, strict=True))
    ]
    return {
        "class": "Roll",
        "options": {},
        "dice": [],
        "formula": "".join(formulas),
        "terms": [data for data, _ in rendered],
        "total": total,
        "evaluated": True,
    }


def _options(term: Mapping[str, Any]) -> tuple[JSON, str]:
    """The term's options and the ``[flavor]`` suffix its formula carries."""
    flavor = term.get("flavor")
    if not isinstance(flavor, str):
        return {}, ""
    clean = " ".join(flavor.replace("[", "(").replace("]", ")").split())
    if not clean:
        return {}, ""
    return {"flavor": clean}, f"[{clean}]"


def _term(term: Term, dialect: Dialect) -> tuple[JSON, str]:
    options, suffix = _options(term)
    base: JSON = {"options": options, "evaluated": True}
    if term["type"] == "die":
        return _die(term, dialect, base, suffix)
    if term["type"] == "number":
        return {"class": "NumericTerm", **base, "number": term["value"]}, js_number(term["value"]) + suffix
    if term["type"] == "operator":
        return {"class": "OperatorTerm", **base, "operator": term["op"]}, f" {term['op']} "
    if term["type"] == "paren":
        inner = _roll(term["terms"], term["total"], dialect)
        data = {"class": "ParentheticalTerm", **base, "term": inner["formula"], "roll": inner}
        return data, f"({inner['formula']}){suffix}"
    if term["type"] == "function":
        rolls = [_roll(arg, terms_total(arg), dialect) for arg in term["args"]]
        args = [r["formula"] for r in rolls]
        data = {
            "class": "FunctionTerm",
            **base,
            "fn": term["name"],
            "terms": args,
            "rolls": rolls,
            "result": term["total"],
        }
        return data, f"{term['name']}({','.join(args)}){suffix}"
    return _pool(term, dialect, base, suffix)


def _modifiers(modifiers: list[str], dialect: Dialect, faces: int | None = None) -> list[str]:
    return foundry_texts(parse(modifiers, dialect), dialect, faces)


_MARGIN = re.compile(r"ms(<=|>=|<|>|=)?(\d+)")


def _margin_options(modifiers: list[str]) -> JSON:
    """Foundry's ``ms`` modifier keeps its target in the term's options, where ``Die#total`` reads it
    (each ``ms`` sets its key, so the last of each kind stays)."""
    options: JSON = {}
    for modifier in modifiers:
        match = _MARGIN.fullmatch(modifier)
        if match:
            options["marginFailure" if match[1] in ("<", "<=") else "marginSuccess"] = int(match[2])
    return options


def _die(term: DieTerm, dialect: Dialect, base: JSON, suffix: str) -> tuple[JSON, str]:
    kind = term.get("kind", "standard")
    modifiers = _modifiers(term["modifiers"], dialect, term["faces"])
    margin = _margin_options(modifiers)
    if margin:
        base = {**base, "options": {**base["options"], **margin}}
    number = js_number(term["number"])
    denomination = {"fate": "f", "coin": "c"}.get(kind, str(term["faces"]))
    data = {
        "class": _DIE_CLASSES.get(kind, "Die"),
        **base,
        "number": term["number"],
        "faces": term["faces"],
        "modifiers": modifiers,
        "results": [r for result in term["results"] for r in _results(result)],
    }
    # Computed dice, "(1d4)d6": DiceTerm#toJSON writes number and faces through their getters (the inner
    # rolls' totals) and adds each inner Roll's JSON as _number / _faces, which DiceTerm._fromData reads.
    if "number_roll" in term:
        inner = term["number_roll"]
        data["_number"] = _roll(inner["terms"], inner["total"], dialect)
        number = data["_number"]["formula"]
    if "faces_roll" in term:
        inner = term["faces_roll"]
        data["_faces"] = _roll(inner["terms"], inner["total"], dialect)
        denomination = data["_faces"]["formula"]
    return data, f"{number}d{denomination}{''.join(modifiers)}{suffix}"


def _pool(term: PoolTerm, dialect: Dialect, base: JSON, suffix: str) -> tuple[JSON, str]:
    rolls = [_roll(sub["terms"], sub["total"], dialect) for sub in term["rolls"]]
    formulas = [r["formula"] for r in rolls]
    modifiers = _modifiers(term["modifiers"], dialect)
    data = {
        "class": "PoolTerm",
        **base,
        "terms": formulas,
        "modifiers": modifiers,
        "rolls": rolls,
        "results": [r for result in term["results"] for r in _results(result)],
    }
    return data, "{" + ",".join(formulas) + "}" + "".join(modifiers) + suffix


_FLAGS = ("discarded", "exploded", "rerolled", "success", "failure")


def _results(result: DieResult) -> list[JSON]:
    """One of our results as Foundry results: a compounded Roll20 die shows each face it added."""
    face = result["result"]
    compounded = result.get("compounded")
    if not compounded:
        out: JSON = {"result": face, "active": result["active"]}
        for flag in _FLAGS:
            if flag in result:
                out[flag] = result[flag]  # type: ignore[literal-required]
        if "count" in result:
            out["count"] = result["count"]
        elif result.get("penetrated"):
            # Foundry adds a result's count instead of its face when it has one.
            out["count"] = face - 1
        return [out]

    faces = [int(f) for f in compounded]
    if sum(faces) != face:
        faces = [int(face - sum(faces)), *faces]
    expanded: list[JSON] = []
    for i, value in enumerate(faces):
        last = i == len(faces) - 1
        entry: JSON = {"result": value, "active": result["active"]}
        if not last:
            entry["exploded"] = True
        for flag in ("discarded", "rerolled"):
            if flag in result:
                entry[flag] = result[flag]  # type: ignore[literal-required]
        if last:
            for flag in ("success", "failure"):
                if flag in result:
                    entry[flag] = result[flag]  # type: ignore[literal-required]
        if "count" in result:
            entry["count"] = result["count"] if last else 0
        expanded.append(entry)
    return expanded
