"""The fast path for the formulas people roll most: dice and whole numbers added and subtracted.

``1d20 + 5``, ``4d6kh3``, ``2d20kh1 + 7``, ``3d6 + 2d8 + 1d4 + 5``, ``10d10x``: when a formula is only
standard dice (plain, or with one keep/drop, or with a bare ``x``) and whole numbers joined by ``+`` and
``-``, the parser also makes a plan for it, and once the formula has been rolled a few times the plan is
compiled into one straight-line Python function that rolls the dice, builds the terms and writes the text
without walking the tree. The results are identical to the tree's (the tests compare both on every
construct the plan accepts, with the same dice); only the work is less.

Compiling costs a few hundred microseconds, ten times a parse, so a formula seen once or twice is not
worth it: the first ``COMPILE_AFTER`` rolls of a formula walk the tree, and formulas of more than
``MAX_ITEMS`` terms always do, which also bounds the memory each cached formula can hold.

The function is made from Python source the way ``dataclasses`` and ``collections.namedtuple`` make
theirs. Only integers the parser has checked and operators from a fixed set are written into the source;
every piece of text from the formula (expressions, labels) is bound to a name (``K0``, ``K1``...) and
referenced, never pasted in, so no formula can change what the code does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rules.dice.arith import Number, norm
from rules.dice.foundry import KEEPS
from rules.dice.limits import MAX_CHAIN, MAX_NUMBER, MAX_ROLLS
from rules.dice.nodes import ChainNode, DiceNode, Node, NumberNode, chain_limit, roll_plain, rolls_limit
from rules.result import Die
from rules.rng import Dice

_NUMBER, _PLAIN, _KEEP, _EXPLODE = 0, 1, 2, 3
#: Rolls of a formula that walk the tree before its plan is compiled.
COMPILE_AFTER = 3
#: Dice and numbers in the largest formula that gets a plan.
MAX_ITEMS = 16
#: Dice terms of at most this many dice list their faces one by one in the generated text code.
_SPELLED_OUT = 8

#: (operator, kind, count or value, faces, keep rule, expression, label)
Item = tuple[str | None, int, int, int, Any, str, str | None]
#: What a compiled plan returns: total, terms, the one-line text (with `` = total``) and dice_max.
Run = Callable[[Dice], tuple[Number, list[dict[str, Any]], str, int]]


class Simple:
    """A flat plan (one ``Item`` per term) and, once compiled, its function ``run``."""

    __slots__ = ("_uses", "items", "run")

    def __init__(self, items: tuple[Item, ...]) -> None:
        self.items = items
        self.run: Run | None = None
        self._uses = 0

    def warm(self) -> Run | None:
        """Count one more roll of the formula; its compiled function from the ``COMPILE_AFTER``-th on."""
        self._uses += 1
        if self._uses < COMPILE_AFTER:
            return None
        return self.compile()

    def compile(self) -> Run:
        """The compiled function (made on the first call; two threads racing both make an equal one)."""
        if self.run is None:
            self.run = _compile(self.items)
        return self.run


def _explode(rng: Dice, faces: int, n: int, spent: int) -> tuple[list[dict[str, Any]], int, str, int]:
    """Foundry's bare ``x``: an extra die for every maximum, new dice included.

    Returns the results, their sum, the shown faces and how many extra dice exploding rolled
    (``spent`` counts every roll of the formula so far, these ``n`` dice included).
    """
    roll = rng.roll
    first = [roll(faces)] if n == 1 else _many(rng)(faces, n)
    results: list[dict[str, Any]] = [{"result": v, "active": True} for v in first]
    extra = 0
    depth = [0] * n
    i = 0
    while i < len(results):
        r = results[i]
        if r["result"] == faces:
            r["exploded"] = True
            if depth[i] >= MAX_CHAIN:
                chain_limit()
            extra += 1
            if spent + extra > MAX_ROLLS:
                rolls_limit()
            results.append({"result": roll(faces), "active": True})
            depth.append(depth[i] + 1)
        i += 1
    value = 0
    parts = []
    for r in results:
        v = r["result"]
        value += v
        parts.append(f"{v}!" if "exploded" in r else str(v))
    return results, value, ", ".join(parts), extra


def _keep_many(values: list[int], discard: int, lowest_first: bool) -> tuple[list[dict[str, Any]], int, str]:
    """Keep/drop that discards two or more dice: results, kept sum and shown faces.

    A stable sort puts equal values in rolling order (also when reversed), so among equal values the
    earlier die is discarded first, as Foundry VTT does (``rules.dice.common.keep_or_drop``).
    """
    order = sorted(range(len(values)), key=values.__getitem__, reverse=not lowest_first)
    dropped = set(order[:discard])
    results: list[dict[str, Any]] = []
    parts = []
    total = 0
    for i, v in enumerate(values):
        if i in dropped:
            results.append({"result": v, "active": False, "discarded": True})
            parts.append(f"~~{v}~~")
        else:
            results.append({"result": v, "active": True})
            parts.append(str(v))
            total += v
    return results, total, ", ".join(parts)


def _many(rng: Dice) -> Callable[[int, int], list[int]]:
    batch: Callable[[int, int], list[int]] | None = getattr(rng, "rolls", None)
    if batch is not None:
        return batch
    roll = rng.roll
    return lambda faces, n: [roll(faces) for _ in range(n)]


def _shown_faces(var: str, n: int) -> str:
    """f-string source listing the faces in the list ``var``: ``{r0[0]}, {r0[1]}`` or a join."""
    if n <= _SPELLED_OUT:
        return ", ".join(f"{{{var}[{j}]}}" for j in range(n))
    return f"{{', '.join(map(str, {var}))}}"


def _compile(items: tuple[Item, ...]) -> Run:
    consts: dict[str, object] = {}
    names: dict[str, str] = {}

    def const(value: str) -> str:
        name = names.get(value)
        if name is None:
            name = names[value] = f"K{len(consts)}"
            consts[name] = value
        return name

    body: list[str] = []
    needs_many = any(kind in (_PLAIN, _KEEP) and n != 1 for _, kind, n, *_ in items)
    if needs_many:
        body.append("many = _many(rng)")
    if any(kind in (_PLAIN, _KEEP) and n == 1 for _, kind, n, *_ in items):
        body.append("roll = rng.roll")
    terms: list[str] = []
    text: list[str] = []
    total: list[str] = []
    dice_max = 0
    spent = 0  # dice asked for so far; the run-time "extra" counts the dice explosions added
    exploding = False
    for i, (op, kind, n, faces, keep, expression, flavor) in enumerate(items):
        if op is not None:
            assert op in ("+", "-")
            terms.append(f"{{'type': 'operator', 'op': '{op}'}}")
            text.append(f" {op} ")
        if kind == _NUMBER:
            assert type(n) is int
            label = "" if flavor is None else f", 'flavor': {const(flavor)}"
            terms.append(f"{{'type': 'number', 'value': {n}{label}}}")
            text.append(f"{{{const(expression)}}}")
            total.append(f"{op or ''} {n}")
            continue
        assert type(n) is int
        assert type(faces) is int
        spent += n
        value = f"s{i}"
        modifiers = "[]"
        if kind == _EXPLODE:
            exploding = True
            body.append(f"res{i}, {value}, shown{i}, e{i} = _explode(rng, {faces}, {n}, {spent} + extra)")
            body.append(f"extra += e{i}")
            results = f"res{i}"
            shown = f"{{shown{i}}}"
            modifiers = "['x']"
            dice_max += n * faces
        elif n == 1 and kind == _PLAIN:
            body.append(f"{value} = roll({faces})")
            results = f"[{{'result': {value}, 'active': True}}]"
            shown = f"{{{value}}}"
            dice_max += faces
        else:
            body.append(f"r{i} = many({faces}, {n})" if n != 1 else f"r{i} = [roll({faces})]")
            discard = 0
            if kind == _KEEP:
                keep_flag, highest, count, mod_text = keep
                modifiers = f"[{const(mod_text)}]"
                kept = min(n, max(count, 0)) if keep_flag else max(n - count, 0)
                discard = n - kept
                dice_max += kept * faces
                lowest_first = keep_flag == highest
            else:
                dice_max += n * faces
            if discard == 0:
                body.append(f"{value} = sum(r{i})")
                results = f"[{{'result': v, 'active': True}} for v in r{i}]"
                shown = _shown_faces(f"r{i}", n)
            elif discard == 1:
                pick = "min" if lowest_first else "max"
                # index() finds the first of equal values: the earlier die is the one discarded.
                body.append(f"x{i} = r{i}.index({pick}(r{i}))")
                body.append(f"res{i} = [{{'result': v, 'active': True}} for v in r{i}]")
                body.append(f"res{i}[x{i}] = {{'result': r{i}[x{i}], 'active': False, 'discarded': True}}")
                body.append(f"{value} = sum(r{i}) - r{i}[x{i}]")
                body.append(f"p{i} = list(map(str, r{i}))")
                body.append(f"p{i}[x{i}] = '~~' + p{i}[x{i}] + '~~'")
                results = f"res{i}"
                shown = f"{{', '.join(p{i})}}"
            else:
                body.append(f"res{i}, {value}, shown{i} = _keep_many(r{i}, {discard}, {lowest_first})")
                results = f"res{i}"
                shown = f"{{shown{i}}}"
        label = "" if flavor is None else f", 'flavor': {const(flavor)}"
        terms.append(
            f"{{'type': 'die', 'number': {n}, 'faces': {faces}, 'kind': 'standard', "
            f"'modifiers': {modifiers}, 'results': {results}, 'total': {value}, "
            f"'expression': {const(expression)}{label}}}"
        )
        shown_label = "" if flavor is None else f"[{{{const(flavor)}}}]"
        text.append(f"{{{const(expression)}}}{shown_label} ({shown})")
        total.append(f"{op or ''} {value}")
    if exploding:
        body.insert(0, "extra = 0")
    body.append(f"total = {' '.join(total)}")
    # Sums of checked numbers and dice can still pass the largest exact integer: norm() refuses them.
    body.append(f"if not -{MAX_NUMBER} <= total <= {MAX_NUMBER}:")
    body.append("    norm(total)")
    term_list = ", ".join(terms)
    line = "".join(text)
    body.append(f'return total, [{term_list}], f"{line} = {{total}}", {dice_max}')
    source = "def run(rng):\n" + "".join(f"    {line}\n" for line in body)
    namespace: dict[str, Any] = {
        "_many": _many,
        "_explode": _explode,
        "_keep_many": _keep_many,
        "norm": norm,
        **consts,
    }
    exec(compile(source, "<rules.dice plan>", "exec"), namespace)  # noqa: S102 (see the module docstring)
    run: Run = namespace["run"]
    return run


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
    if len(pairs) > MAX_ITEMS:
        return None
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
                    if not keep and (mod.count or 1) >= node.number:
                        return None  # Foundry drops nothing then (rules.dice.foundry): the tree does it
                    rule = (keep, highest, mod.count or 1, mod.text)
                    items.append((op, _KEEP, node.number, node.faces, rule, node.expression, node.flavor))
                elif mod.text == "x":
                    items.append((op, _EXPLODE, node.number, node.faces, None, node.expression, node.flavor))
                else:
                    return None
        else:
            return None
    return Simple(tuple(items))
