"""The one-line text of an evaluated formula, made from its terms.

Each die term shows its results in parentheses after its expression: ``4d6kh3 (6, 5, ~~2~~, 3)``; a
computed number or faces shows its own roll the same way: ``(1d4 (3))d6 (1, 2, 3)``. A die
that no longer counts (dropped or rerolled) is struck through with ``~~``; a die that exploded has ``!``
after it; a coin shows ``H`` or ``T``. The text ends with `` = total``.
"""

from __future__ import annotations

from typing import Any

from rules.dice.arith import fmt
from rules.dice.terms import Term


def _result(r: dict[str, Any], coin: bool) -> str:
    value = r["result"]
    shown = ("H" if value == 1 else "T") if coin else fmt(value)
    if r.get("penetrated"):
        shown += "-1"
    if r.get("exploded"):
        shown += "!"
    if not r["active"]:
        shown = f"~~{shown}~~"
    return shown


def _results(results: list[dict[str, Any]], coin: bool = False) -> str:
    if not coin and all(len(r) == 2 and r["active"] for r in results):
        return ", ".join([fmt(r["result"]) for r in results])
    return ", ".join([_result(r, coin) for r in results])


def _flavor(term: Any) -> str:
    flavor = term.get("flavor")
    return f"[{flavor}]" if flavor is not None else ""


def _expression(term: Any) -> str:
    """A die term's expression; a computed number or faces shows its own roll: ``(1d4 (3))d6``."""
    if "number_roll" not in term and "faces_roll" not in term:
        expression: str = term["expression"]
        return expression
    number = describe(term["number_roll"]["terms"]) if "number_roll" in term else fmt(term["number"])
    if "faces_roll" in term:
        faces = describe(term["faces_roll"]["terms"])
    else:
        faces = {"fate": "F", "coin": "c"}.get(term["kind"], fmt(term["faces"]))
    return f"{number}d{faces}{''.join(term['modifiers'])}"


def describe(terms: list[Term]) -> str:
    """The terms as one line: expressions with their results, operators and numbers."""
    parts = []
    for term in terms:
        kind = term["type"]
        if kind == "die":
            t: Any = term
            parts.append(f"{_expression(t)}{_flavor(t)} ({_results(t['results'], t['kind'] == 'coin')})")
        elif kind == "number":
            parts.append(fmt(term["value"]) + _flavor(term))  # type: ignore[typeddict-item]
        elif kind == "operator":
            parts.append(term["op"])  # type: ignore[typeddict-item]
        elif kind == "paren":
            inner = describe(term["terms"])  # type: ignore[typeddict-item]
            if term.get("inline"):
                parts.append(f"[[{inner} = {fmt(term['total'])}]]")  # type: ignore[typeddict-item]
            else:
                parts.append(f"({inner}){_flavor(term)}")
        elif kind == "function":
            t = term
            args = ", ".join(describe(a) for a in t["args"])
            parts.append(f"{t['name']}({args}){_flavor(t)}")
        else:
            t = term
            subs = ", ".join(describe(r["terms"]) for r in t["rolls"])
            mods = "".join(t["modifiers"])
            parts.append(f"{{{subs}}}{mods}{_flavor(t)} ({_results(t['results'])})")
    return " ".join(parts)
