"""An independent reading of Foundry Roll JSON, the way Foundry itself reads it.

``roll_total`` recomputes a roll's total from its terms as Foundry's ``Roll#_evaluateTotal`` does (each
term's ``total`` joined with spaces and evaluated as arithmetic); ``term_total`` is each class's ``total``
getter (a die adds ``count`` instead of ``result`` where a result has one, and only active results).
``formula_of`` is ``Roll.getFormula``. None of this calls the renderer's own helpers.

Computed dice (``(1d4)d6``) carry their inner rolls as ``_number``/``_faces`` (``DiceTerm#toJSON``); the
term's ``number``/``faces`` are those rolls' totals (the getters), and its expression writes the rolls'
formulas in their place (``DiceTerm#expression``).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

_BIN: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_MATH: dict[str, Callable[[float], float]] = {
    "floor": math.floor,
    "ceil": math.ceil,
    "round": lambda x: math.floor(x + 0.5),
    "abs": abs,
}
_MIN_MAX_POW: dict[str, Callable[..., float]] = {"min": min, "max": max, "pow": math.pow}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        return _BIN[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left, right = _eval(node.left), _eval(node.right)
        return math.fmod(left, right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        args = [_eval(a) for a in node.args]
        fn = {**_MIN_MAX_POW, **_MATH}[node.func.id]
        return fn(*args)
    raise AssertionError(f"not arithmetic: {ast.dump(node)}")


def safe_eval(expression: str) -> float:
    return _eval(ast.parse(expression, mode="eval"))


def _results_total(results: list[dict[str, Any]]) -> float:
    total: float = sum(r.get("count", r["result"]) for r in results if r.get("active"))
    return total


def term_total(term: dict[str, Any]) -> Any:
    cls = term["class"]
    if cls in ("Die", "FateDie", "Coin"):
        for key, attribute in (("_number", "number"), ("_faces", "faces")):
            if key in term:
                assert roll_total(term[key]) == term[key]["total"] == term[attribute]
        total = _results_total(term["results"])
        total = -total if term["number"] < 0 else total
        # Die#total tests the margins for truth, as JavaScript does: a margin of 0 is none.
        if term["options"].get("marginSuccess"):
            return total - term["options"]["marginSuccess"]
        if term["options"].get("marginFailure"):
            return term["options"]["marginFailure"] - total
        return total
    if cls == "NumericTerm":
        return term["number"]
    if cls == "OperatorTerm":
        return term["operator"]
    if cls == "ParentheticalTerm":
        assert roll_total(term["roll"]) == term["roll"]["total"]
        return term["roll"]["total"]
    if cls == "FunctionTerm":
        args = [roll_total(r) for r in term["rolls"]]
        for roll, value in zip(term["rolls"], args, strict=True):
            assert roll["total"] == value
        fn = term["fn"]
        expected = _MIN_MAX_POW.get(fn)
        value = expected(*args) if expected else _MATH[fn](*args)
        assert value == term["result"], (fn, args, term["result"])
        return term["result"]
    if cls == "PoolTerm":
        for roll in term["rolls"]:
            assert roll_total(roll) == roll["total"]
        return _results_total(term["results"])
    raise AssertionError(f"unknown term class {cls}")


def roll_total(roll: dict[str, Any]) -> float:
    expression = " ".join(str(term_total(t)) for t in roll["terms"])
    return safe_eval(expression)


def _flavor(term: dict[str, Any]) -> str:
    flavor = term["options"].get("flavor")
    return f"[{flavor}]" if flavor else ""


def term_formula(term: dict[str, Any]) -> str:
    cls = term["class"]
    if cls in ("Die", "FateDie", "Coin"):
        number = term["_number"]["formula"] if "_number" in term else str(term["number"])
        denomination = {"FateDie": "f", "Coin": "c"}.get(cls, str(term["faces"]))
        if "_faces" in term:
            denomination = term["_faces"]["formula"]
        return f"{number}d{denomination}{''.join(term['modifiers'])}{_flavor(term)}"
    if cls == "NumericTerm":
        value = term["number"]
        return (str(int(value)) if float(value).is_integer() else str(value)) + _flavor(term)
    if cls == "OperatorTerm":
        return f" {term['operator']} "
    if cls == "ParentheticalTerm":
        return f"({term['term']}){_flavor(term)}"
    if cls == "FunctionTerm":
        return f"{term['fn']}({','.join(term['terms'])}){_flavor(term)}"
    if cls == "PoolTerm":
        return "{" + ",".join(term["terms"]) + "}" + "".join(term["modifiers"]) + _flavor(term)
    raise AssertionError(cls)


def formula_of(roll: dict[str, Any]) -> str:
    """``Roll.getFormula(terms)``."""
    return "".join(term_formula(t) for t in roll["terms"])


def walk_rolls(roll: dict[str, Any]) -> list[dict[str, Any]]:
    """The roll and every roll nested in its terms."""
    out = [roll]
    for term in roll["terms"]:
        if term["class"] == "ParentheticalTerm":
            out += walk_rolls(term["roll"])
        elif term["class"] in ("FunctionTerm", "PoolTerm"):
            for inner in term["rolls"]:
                out += walk_rolls(inner)
        else:
            for key in ("_faces", "_number"):
                if key in term:
                    out += walk_rolls(term[key])
    return out


def dice_faces(roll: dict[str, Any]) -> list[float]:
    """Every face Dice So Nice would animate: the results of every die term, nested ones included."""
    faces: list[float] = []
    for inner in walk_rolls(roll):
        for term in inner["terms"]:
            if term["class"] in ("Die", "FateDie", "Coin"):
                faces += [r["result"] for r in term["results"]]
    return faces
