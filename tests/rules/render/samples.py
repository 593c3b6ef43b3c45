"""Results to render: real resolver results with scripted dice, random ones, and hand-built formula terms.

The hand-built terms follow ``rules.dice.terms`` exactly, so each term type is tested even where the
dice engine does not produce it (or produces it only by chance).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rules import resolve
from rules.rng import Scripted, SecureDice

Result = dict[str, Any]

#: (name, intent, scripted faces): at least one per system, and the special cases of each.
SCRIPTED: list[tuple[str, dict[str, Any], list[int]]] = [
    ("drawsteel power", {"system": "drawsteel.power", "characteristic": 2}, [7, 8]),
    ("drawsteel power edge", {"system": "drawsteel.power", "characteristic": 1, "edges": 1}, [3, 9]),
    (
        "drawsteel power bane",
        {"system": "drawsteel.power", "characteristic": 3, "banes": 1, "bonus": -1},
        [2, 2],
    ),
    (
        "drawsteel ability",
        {
            "system": "drawsteel.ability",
            "characteristics": {"M": 2, "A": 1, "R": 0, "I": 0, "P": -1},
            "roll_with": ["M", "A"],
            "tiers": ["2 + M damage", "5 + M damage; push 1", "7 + M damage; slowed (save ends)"],
        },
        [10, 9],
    ),
    ("duality hope", {"system": "daggerheart.duality", "modifier": 2, "difficulty": 15}, [9, 4]),
    ("duality fear", {"system": "daggerheart.duality", "modifier": 3, "difficulty": 15}, [6, 10]),
    ("duality critical", {"system": "daggerheart.duality", "modifier": 1}, [7, 7]),
    ("duality advantage", {"system": "daggerheart.duality", "modifier": 1, "advantage": 2}, [5, 3, 4]),
    ("duality disadvantage", {"system": "daggerheart.duality", "disadvantage": 1}, [8, 2, 5]),
    (
        "duality experience",
        {"system": "daggerheart.duality", "modifier": 1, "experience": 2, "spend_hope": True},
        [3, 11],
    ),
    (
        "attack",
        {"system": "daggerheart.attack", "modifier": 4, "targets": [{"name": "Rook", "evasion": 12}]},
        [11],
    ),
    ("attack advantage", {"system": "daggerheart.attack", "modifier": 2, "advantage": True}, [6, 17]),
    ("attack disadvantage", {"system": "daggerheart.attack", "modifier": -1, "disadvantage": True}, [6, 17]),
    (
        "attack experience",
        {"system": "daggerheart.attack", "modifier": 3, "experience": 2, "spend_fear": True},
        [20],
    ),
    ("honors edge", {"system": "honors_edge.roll", "pool": "5k3", "tn": 15}, [8, 6, 5, 3, 1]),
    ("honors edge chain", {"system": "honors_edge.roll", "pool": "3k1", "bonus": 2}, [6, 7, 10, 10, 2]),
    ("honors edge no explode", {"system": "honors_edge.roll", "pool": "2k1", "explode": False}, [10, 4]),
    (
        "honors edge few dice",
        {"system": "honors_edge.roll", "rolled": 2, "kept": 4, "assist_ranks": [2, 1]},
        [3, 10, 4],
    ),
    ("honors edge skill", {"system": "honors_edge.skill", "attribute": 2, "skill": 1, "tn": 15}, [4, 9, 2]),
    (
        "honors edge damage",
        {"system": "honors_edge.damage", "strength": 2, "weapon": "+3k0"},
        [4, 5, 10, 1, 2, 9],
    ),
    ("nexus test", {"system": "nexus.test", "attribute_die": "d8", "skill_rank": 2}, [5, 4]),
    (
        "nexus boons",
        {"system": "nexus.test", "attribute_die": "d12+1", "skill_rank": 1, "boons": 3},
        [7, 2, 5],
    ),
    ("nexus banes", {"system": "nexus.test", "attribute_die": "d4-1", "banes": 1, "bonus": 2}, [1, 6, 3]),
    ("nexus durability", {"system": "nexus.check", "kind": "durability", "die": "d6", "damaged": True}, [1]),
    ("nexus supply", {"system": "nexus.check", "kind": "supply", "die": "d8"}, [2]),
    ("nexus supply last", {"system": "nexus.check", "kind": "supply", "die": "1"}, []),
    (
        "nexus frightened",
        {"system": "nexus.check", "kind": "individual", "table": "frightened", "die": "d6"},
        [4],
    ),
]

#: (formula, dialect, scripted faces) through the real dice engine.
FORMULAS: list[tuple[str, str, list[int]]] = [
    ("4d6kh3 + 2", "foundry", [6, 2, 5, 3]),
    ("2d20kl - 1", "foundry", [15, 4]),
    ("1d8[fire] + 1d6[cold] * 2", "foundry", [5, 3]),
    ("5d10x>=9cs>=8", "foundry", [9, 3, 8, 10, 1, 2, 7]),
    ("3d6r<2", "foundry", [1, 4, 5, 6]),
    ("4dF + 1", "foundry", [1, 2, 3, 3]),
    ("3dc", "foundry", [1, 2, 2]),
    ("{1d8, 1d10}kh", "foundry", [4, 7]),
    ("floor((1d6 + 1) / 2)", "foundry", [5]),
    ("max(1d4, 1d6) - 1", "foundry", [3, 6]),
    ("1d6 * -2", "foundry", [3]),
    ("-1d4 + 2", "foundry", [4]),
    ("7 / 2", "foundry", []),
    ("2d6min3", "foundry", [1, 5]),
    ("3d6ms>10 + 1", "foundry", [1, 5, 6]),
    ("2d6ms<=9", "foundry", [3, 4]),
    ("(1d4)d6 + 1", "foundry", [3, 2, 5, 1]),
    ("(2 + 1)d(1d4 + 4)kh2", "foundry", [2, 1, 6, 3]),
    ("1d(2 * 3)[fire]", "foundry", [5]),
    ("(3)dF", "foundry", [1, 2, 3]),
    ("4d6xkh", "foundry", [6, 5, 1, 2, 3]),
    ("3d6!! + 2", "roll20", [6, 6, 3, 2, 5]),
    ("4d6!p", "roll20", [4, 6, 5, 5, 5]),
    ("{4d6 + 3d8}k4", "roll20", [1, 5, 6, 4, 5, 7, 3]),
    ("{2d6, 1d12}kh1", "roll20", [3, 4, 1]),
    ("3d6>4f1", "roll20", [6, 1, 3]),
    ("2d6ro<2cs>5", "roll20", [1, 3, 6]),
    ("[[1d4 + 1]] + 2", "roll20", [3]),
    ("1d6 ** 2 + 1", "roll20", [4]),
    ("2d20k1 + 3[str]", "roll20", [8, 19]),
    ("8d6d3sd", "roll20", [1, 2, 3, 4, 5, 6, 1, 2]),
]


def scripted(intent: dict[str, Any], faces: list[int]) -> Result:
    return resolve(intent, rng=Scripted(faces))


def scripted_results() -> Iterator[tuple[str, Result]]:
    for name, intent, faces in SCRIPTED:
        yield name, scripted(intent, faces)


def formula_results() -> Iterator[tuple[str, Result]]:
    for formula, dialect, faces in FORMULAS:
        yield (
            f"{dialect}: {formula}",
            scripted({"system": "dice", "formula": formula, "dialect": dialect}, faces),
        )


def random_results(rounds: int) -> Iterator[Result]:
    """``rounds`` SecureDice rolls of every scripted intent and every formula."""
    rng = SecureDice()
    for _ in range(rounds):
        for _, intent, _ in SCRIPTED:
            yield resolve(intent, rng=rng)
        for formula, dialect, _ in FORMULAS:
            yield resolve({"system": "dice", "formula": formula, "dialect": dialect}, rng=rng)


# ---------------------------------------------------------------------------------------------------
# Hand-built formula results, one per term type (the rules.dice.terms contract).


def die(
    number: int, faces: int, results: list[dict[str, Any]], modifiers: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    mods = modifiers or []
    total = sum(_counts(r) for r in results if r["active"])
    term = {
        "type": "die",
        "number": number,
        "faces": faces,
        "kind": "standard",
        "modifiers": mods,
        "results": results,
        "total": total,
        "expression": f"{number}d{faces}{''.join(mods)}",
    }
    term.update(extra)
    return term


def _counts(result: dict[str, Any]) -> Any:
    if "count" in result:
        return result["count"]
    return result["result"] - 1 if result.get("penetrated") else result["result"]


def num(value: float, **extra: Any) -> dict[str, Any]:
    return {"type": "number", "value": value, **extra}


def op(symbol: str) -> dict[str, Any]:
    return {"type": "operator", "op": symbol}


def formula_result(terms: list[dict[str, Any]], total: float, dialect: str = "foundry") -> Result:
    return {
        "system": "dice",
        "dice": [],
        "total": total,
        "formula": "(hand-built)",
        "text": f"hand-built = {total}",
        "terms": terms,
        "dialect": dialect,
    }


def on(result: int, **flags: Any) -> dict[str, Any]:
    return {"result": result, "active": True, **flags}


def off(result: int, **flags: Any) -> dict[str, Any]:
    return {"result": result, "active": False, **flags}
