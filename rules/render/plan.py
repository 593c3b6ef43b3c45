"""What a rendering shows: any result as a list of evaluated terms (``rules.dice.terms``) and a total.

Formula results (``system: "dice"``) already carry their terms. A game system's result carries its dice
and its total instead; ``plan`` turns those into the same kind of terms, so the Foundry and Roll20
renderers only ever read terms:

- consecutive dice with the same faces and role become one die term (``2d20kh``, ``1d12[Hope]``); an
  Honor's Edge chain ``[10, 4]`` is one die whose faces are two results, the 10 marked exploded;
- the system's named numbers follow (a modifier, ``2[experience]``, ``3[assist]``), and whatever part of
  the total they still leave unexplained becomes one more number, so the terms always add up to the
  result's total;
- a result whose total is null (a system with nothing to add up) shows the sum of its kept dice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from rules.dice.terms import DieResult, DieTerm, Number, NumberTerm, OperatorTerm, Term
from rules.render.modifiers import Dialect

Result = Mapping[str, Any]


@dataclass(frozen=True)
class Plan:
    terms: list[Term]
    #: the notation the terms' modifiers are written in
    dialect: Dialect
    total: Number


def plan(result: Result) -> Plan:
    """The terms and total every renderer draws from ``result``."""
    terms = result.get("terms")
    if isinstance(terms, list):
        dialect: Dialect = "roll20" if result.get("dialect") == "roll20" else "foundry"
        total = result.get("total")
        return Plan(terms, dialect, total if _is_number(total) else terms_total(terms))
    return _system_plan(result)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------------
# Arithmetic over evaluated terms (function arguments carry no totals of their own).


def term_value(term: Term) -> Number:
    if term["type"] == "number":
        return term["value"]
    if term["type"] == "operator":
        raise ValueError("an operator has no value")
    return term["total"]


def apply(op: str, left: Number, right: Number) -> Number:
    """One operator as Foundry (JavaScript) and Roll20 compute it."""
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if right == 0:
        return math.nan
    if op == "/":
        quotient = left / right
        return int(quotient) if quotient.is_integer() else quotient
    # JavaScript's % keeps the dividend's sign.
    if isinstance(left, int) and isinstance(right, int):
        return _int_mod(left, right)
    return math.fmod(left, right)


def _int_mod(left: int, right: int) -> int:
    remainder = abs(left) % abs(right)
    return -remainder if left < 0 else remainder


def terms_total(terms: Sequence[Term]) -> Number:
    """The value of a flat term list: * / % before + -, and a sign with no left operand is unary."""
    total: Number = 0
    sign = 1
    unary = 1
    product: Number | None = None
    mul_op = "*"
    expect_operand = True
    for term in terms:
        if term["type"] == "operator":
            op = term["op"]
            if expect_operand:
                unary *= -1 if op == "-" else 1
            elif op in "+-":
                total += sign * (product or 0)
                product, sign = None, -1 if op == "-" else 1
            else:
                mul_op = op
            expect_operand = True
            continue
        value = unary * term_value(term)
        unary, expect_operand = 1, False
        product = value if product is None else apply(mul_op, product, value)
    if product is not None:
        total += sign * product
    return total


def is_unary(terms: Sequence[Term], index: int) -> bool:
    """Whether the operator at ``index`` is a sign (nothing to its left, or another operator)."""
    return index == 0 or terms[index - 1]["type"] == "operator"


# ---------------------------------------------------------------------------------------------------
# Game-system results.

#: Dice rolled for something other than the roll's total (a Draw Steel ability's or a Daggerheart
#: attack's damage dice) carry this role and stay out of the rendered roll, in every system.
_DAMAGE_ROLE = "damage"

#: Roles whose die is subtracted from the total.
_SUBTRACTED_ROLES: dict[str, frozenset[str]] = {"daggerheart.duality": frozenset({"disadvantage"})}


def _number_parts(result: Result) -> list[tuple[Number, str | None]]:
    """The named numbers a system adds after its dice: (value, flavor)."""
    system = str(result.get("system", ""))
    parts: list[tuple[Number, str | None]] = []

    def take(key: str, flavor: str | None = None) -> None:
        value = result.get(key)
        if _is_number(value) and value:
            parts.append((value, flavor))

    if system.startswith("daggerheart."):
        take("modifier")
        take("experience", "experience")
    elif system.startswith("honors_edge."):
        take("bonus")
        take("assist", "assist")
    elif system == "nexus.test":
        attribute = next((d for d in result.get("dice", []) if d.get("role") == "attribute"), None)
        value = result.get("attribute_value")
        if attribute is not None and _is_number(value) and value != attribute["value"]:
            parts.append((value - attribute["value"], None))
        take("skill_rank", "skill")
        boons = result.get("boon_modifier")
        if _is_number(boons) and boons:
            parts.append((boons, "boons" if boons > 0 else "banes"))
        take("bonus", "bonus")
    return parts


def _flavor(role: object) -> str | None:
    if not isinstance(role, str) or not role or (role[0] == "d" and role[1:].isdigit()):
        return None
    return role.replace("_", " ")


def _faces_of(die: Mapping[str, Any]) -> list[int]:
    chain = die.get("chain")
    if isinstance(chain, list) and chain:
        return [int(face) for face in chain]
    return [int(die["value"])]


def _keep_modifier(values: list[int], kept: list[bool]) -> str:
    """``kh2``/``kl1`` when the kept dice are the highest/lowest ones; nothing when all are kept."""
    n_kept = sum(kept)
    if n_kept == len(values):
        return ""
    kept_values = [v for v, k in zip(values, kept, strict=True) if k]
    dropped = [v for v, k in zip(values, kept, strict=True) if not k]
    if not kept_values:
        return ""
    if min(kept_values) >= max(dropped):
        return f"kh{n_kept}" if n_kept > 1 else "kh"
    if max(kept_values) <= min(dropped):
        return f"kl{n_kept}" if n_kept > 1 else "kl"
    return ""


def _die_term(group: list[Mapping[str, Any]], flavor: str | None) -> DieTerm:
    faces = int(group[0]["faces"])
    results: list[DieResult] = []
    values: list[int] = []
    kept: list[bool] = []
    exploded = False
    for die in group:
        chain = _faces_of(die)
        is_kept = bool(die.get("kept", True))
        values.append(sum(chain))
        kept.append(is_kept)
        for i, face in enumerate(chain):
            entry: DieResult = {"result": face, "active": is_kept}
            if i < len(chain) - 1:
                entry["exploded"] = True
                exploded = True
            if not is_kept:
                entry["discarded"] = True
            results.append(entry)
    modifiers = (["x"] if exploded else []) + [m for m in [_keep_modifier(values, kept)] if m]
    term: DieTerm = {
        "type": "die",
        "number": len(group),
        "faces": faces,
        "kind": "standard",
        "modifiers": modifiers,
        "results": results,
        "total": sum(v for v, k in zip(values, kept, strict=True) if k),
        "expression": f"{len(group)}d{faces}{''.join(modifiers)}",
    }
    if flavor:
        term["flavor"] = flavor
    return term


def _signed(terms: list[Term], sign: int, term: Term) -> None:
    """Append ``term`` with its sign as an operator (a leading positive term needs none)."""
    if terms or sign < 0:
        op: OperatorTerm = {"type": "operator", "op": "-" if sign < 0 else "+"}
        terms.append(op)
    terms.append(term)


def _number(value: Number, flavor: str | None) -> NumberTerm:
    term: NumberTerm = {"type": "number", "value": value}
    if flavor:
        term["flavor"] = flavor
    return term


def _append_number(terms: list[Term], value: Number, flavor: str | None) -> None:
    if not terms:
        terms.append(_number(value, flavor))
    else:
        _signed(terms, -1 if value < 0 else 1, _number(abs(value), flavor))


def _system_plan(result: Result) -> Plan:
    system = str(result.get("system", ""))
    subtracted = _SUBTRACTED_ROLES.get(system, frozenset())
    dice: list[Mapping[str, Any]] = [d for d in result.get("dice") or [] if d.get("role") != _DAMAGE_ROLE]

    groups: list[tuple[list[Mapping[str, Any]], int]] = []
    for die in dice:
        sign = -1 if die.get("role") in subtracted else 1
        key = (die.get("faces"), die.get("role"), sign)
        if groups and (groups[-1][0][0].get("faces"), groups[-1][0][0].get("role"), groups[-1][1]) == key:
            groups[-1][0].append(die)
        else:
            groups.append(([die], sign))

    terms: list[Term] = []
    shown: Number = 0
    for group, sign in groups:
        term = _die_term(group, _flavor(group[0].get("role")))
        _signed(terms, sign, term)
        shown += sign * term["total"]

    total = result.get("total")
    if not _is_number(total):
        if not terms:
            terms.append(_number(0, None))
        return Plan(terms, "foundry", shown)

    for value, flavor in _number_parts(result):
        _append_number(terms, value, flavor)
        shown += value
    if shown != total or not terms:
        _append_number(terms, total - shown, None)
    return Plan(terms, "foundry", total)
