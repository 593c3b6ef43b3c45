"""Results for Roll20: its roll-result JSON and a chat line that shows the result without rolling again.

The roll-result has the shape Roll20's API hands to scripts (``msg.content`` of a ``rollresult`` message,
``msg.inlinerolls[i].results``): ``{"type": "V", "rolls": [...], "resultType": "sum"|"success",
"total": n}``, whose ``rolls`` are ``R`` (dice: ``dice``, ``sides``, ``mods``, ``results`` of ``{"v"}``
with ``"d": true`` on a die that does not count), ``M`` (math: ``expr``), ``G`` (a group: ``rolls`` is a
list of roll lists, with its own ``results``) and ``L`` (a label: ``text``).

The chat line uses the ``default`` roll template. Its only inline rolls are constants (``[[19]]``), so
Roll20 shows the result in its usual roll box without rolling a die; every other character that Roll20
would act on (``{``, ``}``, ``[``, ``]``, ``|``, ``@``, ``%``, ``?``, ``#``, ``&`` …) is written as an HTML
character reference, which Roll20 displays as the character and never parses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rules.dice.terms import DieResult, DieTerm, Number, Term
from rules.render.foundry import js_number
from rules.render.modifiers import Dialect, Mod, counts_successes, parse, roll20_mods, roll20_text
from rules.render.plan import is_unary, plan
from rules.render.text import to_text

JSON = dict[str, Any]

TITLES: dict[str, str] = {
    "dice": "Dice roll",
    "drawsteel.power": "Draw Steel power roll",
    "drawsteel.ability": "Draw Steel ability roll",
    "daggerheart.duality": "Daggerheart duality roll",
    "daggerheart.attack": "Daggerheart adversary attack",
    "honors_edge.roll": "Honor's Edge roll",
    "honors_edge.skill": "Honor's Edge skill roll",
    "honors_edge.damage": "Honor's Edge damage roll",
    "nexus.test": "Nexus skill test",
    "nexus.check": "Nexus check",
}


def to_roll20(result: Mapping[str, Any], *, label: str | None = None) -> JSON:
    """``{"rollresult": <Roll20 roll-result JSON>, "chat": <a default-template chat line>}``."""
    shown = plan(result)
    rolls = _parts(shown.terms, shown.dialect)
    rollresult = {
        "type": "V",
        "rolls": rolls,
        "resultType": "success" if _success(shown.terms, shown.dialect) else "sum",
        "total": shown.total,
    }
    return {"rollresult": rollresult, "chat": chat_line(result, label=label)}


# ---------------------------------------------------------------------------------------------------
# The roll-result JSON.


def _mods(term: Mapping[str, Any], dialect: Dialect) -> list[Mod]:
    modifiers = term.get("modifiers") or []
    return parse(list(modifiers), dialect)


def _success(terms: Sequence[Term], dialect: Dialect) -> bool:
    """Whether any dice of the roll (outside groups, which say so themselves) count successes."""
    for term in terms:
        if term["type"] in ("die", "pool") and counts_successes(_mods(term, dialect)):
            return True
        if term["type"] == "paren" and _success(term["terms"], dialect):
            return True
        if term["type"] == "function" and any(_success(arg, dialect) for arg in term["args"]):
            return True
    return False


def _value(result: DieResult, success: bool = False) -> Number:
    """What Roll20 shows for a die: its face, or what it counts as where Foundry counts it otherwise
    (``min``/``max``); a penetrating die already reduced by one."""
    if result.get("penetrated"):
        return result["result"] - 1
    if not success and "count" in result:
        return result["count"]
    return result["result"]


def _results(results: Sequence[DieResult], success: bool = False) -> list[JSON]:
    out: list[JSON] = []
    for r in results:
        entry: JSON = {"v": _value(r, success)}
        if not r["active"]:
            entry["d"] = True
        out.append(entry)
    return out


def _reading(results: Sequence[DieResult], success: bool) -> Number:
    """The total a reader of the Roll20 entry adds up from its results."""
    total: Number = 0
    for r in results:
        if r["active"]:
            total += r.get("count", 0) if success else _value(r)
    return total


def _label(term: Mapping[str, Any]) -> list[JSON]:
    flavor = term.get("flavor")
    return [{"type": "L", "text": flavor}] if isinstance(flavor, str) and flavor else []


def _math(expr: str) -> JSON:
    return {"type": "M", "expr": expr}


def _die(term: DieTerm, dialect: Dialect) -> list[JSON]:
    kind = term.get("kind", "standard")
    mods = _mods(term, dialect)
    success = counts_successes(mods)
    entry: JSON = {
        "type": "R",
        "dice": term["number"],
        "sides": "F" if kind == "fate" else term["faces"],
        "mods": roll20_mods(mods, term["faces"]),
        "results": _results(term["results"], success),
    }
    # Foundry's margin of success (ms) and negative dice counts have no Roll20 form; the difference is
    # written as math next to the dice, so the entry still adds up to the term's total.
    difference = term["total"] - _reading(term["results"], success)
    if not difference:
        return [entry]
    sign = "+" if difference > 0 else "-"
    return [_math("("), entry, _math(f"{sign}{js_number(abs(difference))})")]


def _parts(terms: Sequence[Term], dialect: Dialect) -> list[JSON]:
    parts: list[JSON] = []
    for term in terms:
        if term["type"] == "die":
            parts += [*_die(term, dialect), *_label(term)]
        elif term["type"] == "number":
            parts += [_math(js_number(term["value"])), *_label(term)]
        elif term["type"] == "operator":
            parts.append(_math(term["op"]))
        elif term["type"] == "paren":
            parts += [_math("("), *_parts(term["terms"], dialect), _math(")"), *_label(term)]
        elif term["type"] == "function":
            parts.append(_math(term["name"] + "("))
            for i, arg in enumerate(term["args"]):
                if i:
                    parts.append(_math(","))
                parts += _parts(arg, dialect)
            parts.append(_math(")"))
        else:
            mods = _mods(term, dialect)
            group: JSON = {
                "type": "G",
                "rolls": [_parts(sub["terms"], dialect) for sub in term["rolls"]],
                "mods": roll20_mods(mods, 0),
                "resultType": "success" if counts_successes(mods) else "sum",
                "results": _results(term["results"], counts_successes(mods)),
            }
            parts += [group, *_label(term)]
    return _merge_math(parts)


def _merge_math(parts: list[JSON]) -> list[JSON]:
    """Roll20 writes a run of operators and constants as one ``M`` (``"+4"``, ``")*2"``)."""
    merged: list[JSON] = []
    for part in parts:
        if part["type"] == "M" and merged and merged[-1]["type"] == "M":
            merged[-1] = _math(merged[-1]["expr"] + part["expr"])
        else:
            merged.append(part)
    return merged


# ---------------------------------------------------------------------------------------------------
# The chat line.

#: Characters shown as themselves; everything else of ASCII punctuation becomes a character reference.
_PLAIN = re.compile(r"[A-Za-z0-9 ,.;:()+\-'_]")


def escape(text: str) -> str:
    """Text Roll20 shows verbatim inside a roll template: nothing in it starts a roll, query, macro,
    attribute, ability or template, nor closes a template field."""
    out: list[str] = []
    for ch in text:
        if ch in "\r\n\t" or (ord(ch) < 32) or ord(ch) == 127:
            out.append(" ")
        elif _PLAIN.fullmatch(ch) or ord(ch) > 127:
            out.append(ch)
        else:
            out.append(f"&#{ord(ch)};")
    return "".join(out)


def _constant(value: Number) -> str:
    """A constant inline roll: Roll20 draws its roll box but rolls no die."""
    return f"[[{js_number(value)}]]"


def _expression(terms: Sequence[Term], dialect: Dialect) -> str:
    """The roll in Roll20 notation, for people to read (it is escaped, never rolled)."""
    out: list[str] = []
    for i, term in enumerate(terms):
        flavor = term.get("flavor")
        suffix = f"[{flavor}]" if isinstance(flavor, str) and flavor else ""
        if term["type"] == "die":
            sides = "F" if term.get("kind") == "fate" else str(term["faces"])
            number = str(term["number"])
            # Foundry's computed dice keep their parentheticals: "(1d4)d6", as Roll20 writes them too.
            if "number_roll" in term:
                number = _expression(term["number_roll"]["terms"], dialect)
            if "faces_roll" in term:
                sides = _expression(term["faces_roll"]["terms"], dialect)
            mods = "".join(t for m in _mods(term, dialect) if (t := roll20_text(m, term["faces"])))
            out.append(f"{number}d{sides}{mods}{suffix}")
        elif term["type"] == "number":
            out.append(js_number(term["value"]) + suffix)
        elif term["type"] == "operator":
            out.append(term["op"] if is_unary(terms, i) else f" {term['op']} ")
        elif term["type"] == "paren":
            out.append(f"({_expression(term['terms'], dialect)}){suffix}")
        elif term["type"] == "function":
            out.append(f"{term['name']}({', '.join(_expression(a, dialect) for a in term['args'])})")
        else:
            mods = "".join(t for m in _mods(term, dialect) if (t := roll20_text(m, 0)))
            subs = ", ".join(_expression(s["terms"], dialect) for s in term["rolls"])
            out.append("{" + subs + "}" + mods + suffix)
    return "".join(out)


def _faces(terms: Sequence[Term], dialect: Dialect) -> list[str]:
    """Each die term's faces: ``2d20kh: 17, 4 (dropped)``."""
    out: list[str] = []
    for term in terms:
        if term["type"] == "die":
            for inner in ("faces_roll", "number_roll"):  # rolled before the term's own dice
                if inner in term:
                    out += _faces(term[inner]["terms"], dialect)
            faces: list[str] = []
            for r in term["results"]:
                face = js_number(_value(r)) + ("!" if r.get("exploded") else "")
                if r.get("rerolled"):
                    face += " (rerolled)"
                elif not r["active"]:
                    face += " (dropped)"
                faces.append(face)
            out.append(f"{_expression([term], dialect)}: {', '.join(faces) or 'none'}")
        elif term["type"] == "paren":
            out += _faces(term["terms"], dialect)
        elif term["type"] == "function":
            for arg in term["args"]:
                out += _faces(arg, dialect)
        elif term["type"] == "pool":
            for sub in term["rolls"]:
                out += _faces(sub["terms"], dialect)
    return out


def chat_line(result: Mapping[str, Any], *, label: str | None = None) -> str:
    """A ``&{template:default}`` line: name, total (a constant inline roll), roll, dice and summary."""
    shown = plan(result)
    system = str(result.get("system", ""))
    title = label or TITLES.get(system, system or "Roll")
    fields: list[tuple[str, str]] = []
    total = result.get("total")
    if isinstance(total, int | float) and not isinstance(total, bool):
        fields.append(("Total", _constant(total)))
    fields.append(("Roll", escape(_expression(shown.terms, shown.dialect))))
    dice = _faces(shown.terms, shown.dialect)
    if dice:
        fields.append(("Dice", escape("; ".join(dice))))
    fields.append(("Result", escape(to_text(result))))
    body = " ".join(f"{{{{{escape(key)}={value}}}}}" for key, value in fields)
    return f"&{{template:default}} {{{{name={escape(title)}}}}} {body}"
