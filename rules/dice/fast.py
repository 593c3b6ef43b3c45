"""The fast path for the formulas people roll most: dice and whole numbers added and subtracted.

``1d20 + 5``, ``4d6kh3``, ``2d20kh1 + 7``, ``3d6 + 2d8 + 1d4 + 5``, ``10d10x``: when a formula is only
standard dice (plain, or with one keep/drop, or with a bare ``x``) and whole numbers joined by ``+`` and
``-``, the parser also prepares a ``Simple`` plan, and evaluation runs one flat loop over it instead of
walking the tree. The results are identical to the tree's (the tests compare both on every construct
the plan accepts); only the work is less.
"""

from __future__ import annotations

from typing import Any

from rules.dice.arith import Number, norm
from rules.dice.common import keep_or_drop, kept_after
from rules.dice.foundry import KEEPS
from rules.dice.limits import MAX_CHAIN, MAX_NUMBER, MAX_ROLLS
from rules.dice.nodes import ChainNode, DiceNode, Node, NumberNode, chain_limit, roll_plain, rolls_limit
from rules.result import Die
from rules.rng import Dice, roll_many

_NUMBER, _PLAIN, _KEEP, _EXPLODE = 0, 1, 2, 3

Item = tuple[str | None, int, int, int, Any, str, str | None]


class Simple:
    """A flat plan: (operator, kind, count or value, faces, keep rule, expression, label) per item."""

    __slots__ = ("items",)

    def __init__(self, items: tuple[Item, ...]) -> None:
        self.items = items

    def run(self, rng: Dice) -> tuple[Number, list[dict[str, Any]], str, int]:
        """Roll the plan: total, terms, text (without the total) and dice_max.

        The ``dice`` list is left to ``dice_of`` (on first use): in a plan the terms list every die in
        the order rolled, so the list can be read off them.
        """
        terms: list[dict[str, Any]] = []
        text: list[str] = []
        total = 0
        dice_max = 0
        rolls = 0
        for op, kind, n, faces, keep, expression, flavor in self.items:
            if op is not None:
                terms.append({"type": "operator", "op": op})
                text.append(op)
            if kind == _NUMBER:
                value = n
                if flavor is None:
                    terms.append({"type": "number", "value": n})
                    text.append(expression)
                else:
                    terms.append({"type": "number", "value": n, "flavor": flavor})
                    text.append(expression)
            else:
                rolls += n
                modifiers: list[str] = []
                if n == 1:
                    value = rng.roll(faces)
                    results = [{"result": value, "active": True}]
                    values = [value]
                else:
                    values = roll_many(rng, faces, n)
                    results = [{"result": v, "active": True} for v in values]
                if kind == _PLAIN:
                    if n != 1:
                        value = sum(values)
                    shown = ", ".join(map(str, values))
                    dice_max += n * faces
                elif kind == _KEEP:
                    keep_flag, highest, count, mod_text = keep
                    keep_or_drop(results, count, keep=keep_flag, highest=highest)
                    value = 0
                    parts = []
                    for r in results:
                        v = r["result"]
                        if r["active"]:
                            value += v
                            parts.append(str(v))
                        else:
                            parts.append(f"~~{v}~~")
                    shown = ", ".join(parts)
                    dice_max += kept_after(n, count, keep=keep_flag) * faces
                    modifiers = [mod_text]
                else:  # _EXPLODE: Foundry's bare "x", an extra die for every maximum, new dice included
                    depth = [0] * n
                    i = 0
                    while i < len(results):
                        r = results[i]
                        if r["result"] == faces:
                            r["exploded"] = True
                            if depth[i] >= MAX_CHAIN:
                                chain_limit()
                            rolls += 1
                            if rolls > MAX_ROLLS:
                                rolls_limit()
                            results.append({"result": rng.roll(faces), "active": True})
                            depth.append(depth[i] + 1)
                        i += 1
                    value = 0
                    parts = []
                    for r in results:
                        v = r["result"]
                        value += v
                        parts.append(f"{v}!" if "exploded" in r else str(v))
                    shown = ", ".join(parts)
                    dice_max += n * faces
                    modifiers = ["x"]
                term = {
                    "type": "die",
                    "number": n,
                    "faces": faces,
                    "kind": "standard",
                    "modifiers": modifiers,
                    "results": results,
                    "total": value,
                    "expression": expression,
                }
                if flavor is not None:
                    term["flavor"] = flavor
                    text.append(f"{expression}[{flavor}] ({shown})")
                else:
                    text.append(f"{expression} ({shown})")
                terms.append(term)
            total = total - value if op == "-" else total + value
        if not -MAX_NUMBER <= total <= MAX_NUMBER:
            norm(total)
        return total, terms, " ".join(text), dice_max


def dice_of(terms: list[dict[str, Any]]) -> list[Die]:
    """The ``dice`` entries of a plan's terms: every die result, in order, with its marks."""
    dice: list[Die] = []
    for term in terms:
        if term["type"] == "die":
            faces = term["faces"]
            for r in term["results"]:
                if len(r) == 2:
                    dice.append({"faces": faces, "value": r["result"], "kept": r["active"]})
                else:
                    entry = {"faces": faces, "value": r["result"], "kept": r["active"]}
                    for key, value in r.items():
                        if key != "result" and key != "active":
                            entry[key] = value
                    dice.append(entry)
    return dice


def plan(root: Node, roll20: bool) -> Simple | None:
    """A ``Simple`` plan for ``root`` when the formula is simple enough, else ``None``."""
    pairs: list[tuple[str | None, Node]] = [(None, root)]
    if isinstance(root, ChainNode):
        if any(op not in ("+", "-") for op, _ in root.rest):
            return None
        pairs = [(None, root.first), *root.rest]
    items: list[Item] = []
    for op, node in pairs:
        if isinstance(node, NumberNode):
            if type(node.value) is not int:
                return None
            items.append((op, _NUMBER, node.value, 0, None, node.text, node.flavor))
        elif isinstance(node, DiceNode) and node.kind == "standard":
            if node.roller is roll_plain:
                items.append((op, _PLAIN, node.number, node.faces, None, node.expression, node.flavor))
            elif roll20 or len(node.spec) != 1:
                return None
            else:
                mod = node.spec[0]
                if mod.name in KEEPS:
                    keep, highest = KEEPS[mod.name]
                    rule = (keep, highest, mod.count or 1, mod.text)
                    items.append((op, _KEEP, node.number, node.faces, rule, node.expression, node.flavor))
                elif mod.text == "x":
                    items.append((op, _EXPLODE, node.number, node.faces, None, node.expression, node.flavor))
                else:
                    return None
        else:
            return None
    return Simple(tuple(items))
