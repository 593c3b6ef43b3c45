"""The syntax tree of a formula, and how each node evaluates itself.

A parsed formula is a tree of these nodes, built once and cached (see ``rules.dice.parser``); it is never
changed afterwards, so one tree serves every roll of the same formula. ``ev(ctx, out)`` evaluates a node:
it rolls through ``ctx``, appends the node's evaluated terms (``rules.dice.terms``) to ``out`` and returns
the node's value. The dialect decides how dice and groups roll: each ``DiceNode``/``GroupNode`` carries the
function that rolls it (``rules.dice.foundry`` or ``rules.dice.roll20``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rules.dice.arith import Number, apply, call, fmt, norm
from rules.dice.limits import MAX_CHAIN, MAX_DICE, MAX_FACES, MAX_ROLLS, limit
from rules.errors import RulesError
from rules.result import Die
from rules.rng import Dice, roll_many


class Ctx:
    """The state of one evaluation: the random source, the dice rolled so far and the budgets."""

    __slots__ = ("asked", "dice", "dice_max", "inline", "rng", "rolls", "track")

    def __init__(self, rng: Dice, asked: int = 0) -> None:
        self.rng = rng
        self.dice: list[Die] = []
        self.rolls = 0
        # Dice asked for so far against MAX_DICE: the parser's count of written numbers, plus each
        # computed number once it is known.
        self.asked = asked
        self.dice_max = 0
        # Roll20 inline rolls, evaluated before the rest: index -> (total, term)
        self.inline: list[tuple[Number, dict[str, Any]]] = []
        # While a Roll20 one-expression group collects its dice: (result, die entry, die term) per die.
        self.track: list[tuple[dict[str, Any], Die, dict[str, Any]]] | None = None

    def spend(self, n: int) -> None:
        """Count ``n`` more rolls against ``MAX_ROLLS``."""
        self.rolls += n
        if self.rolls > MAX_ROLLS:
            rolls_limit()


def chain_limit() -> None:
    limit(f"one die may explode or be rerolled at most {MAX_CHAIN} times")


def rolls_limit() -> None:
    limit(f"a formula may roll at most {MAX_ROLLS:,} dice, explosions and rerolls included")


#: Evaluated terms as the engine builds them: plain dicts in the shape of ``rules.dice.terms``.
Out = list[dict[str, Any]]


class Node:
    __slots__ = ("text",)
    text: str

    def ev(self, ctx: Ctx, out: Out) -> Number:
        raise NotImplementedError


class NumberNode(Node):
    __slots__ = ("flavor", "value")

    def __init__(self, value: Number, flavor: str | None = None) -> None:
        self.value = value
        self.flavor = flavor
        self.text = fmt(value) + (f"[{flavor}]" if flavor is not None else "")

    def ev(self, ctx: Ctx, out: Out) -> Number:  # noqa: ARG002 (every node takes the context)
        if self.flavor is None:
            out.append({"type": "number", "value": self.value})
        else:
            out.append({"type": "number", "value": self.value, "flavor": self.flavor})
        return self.value


class ChainNode(Node):
    """Left-associative operators of one precedence: ``a + b - c`` or ``a * b / c``."""

    __slots__ = ("first", "rest")

    def __init__(self, first: Node, rest: tuple[tuple[str, Node], ...]) -> None:
        self.first = first
        self.rest = rest
        self.text = first.text + "".join(f" {op} {node.text}" for op, node in rest)

    def ev(self, ctx: Ctx, out: Out) -> Number:
        total = self.first.ev(ctx, out)
        for op, node in self.rest:
            out.append({"type": "operator", "op": op})
            total = apply(op, total, node.ev(ctx, out))
        return total


class UnaryNode(Node):
    """Leading signs: ``-1d6``, ``--2``. Each sign is its own operator term, as in Foundry's terms."""

    __slots__ = ("negative", "operand", "ops")

    def __init__(self, ops: tuple[str, ...], operand: Node) -> None:
        self.ops = ops
        self.operand = operand
        self.negative = ops.count("-") % 2 == 1
        self.text = "".join(ops) + operand.text

    def ev(self, ctx: Ctx, out: Out) -> Number:
        for op in self.ops:
            out.append({"type": "operator", "op": op})
        value = self.operand.ev(ctx, out)
        return -value if self.negative else value


class PowerNode(Node):
    """Roll20's ``a ** b``; its term is a ``pow`` function term (Foundry would write ``pow(a, b)``)."""

    __slots__ = ("base", "exponent")

    def __init__(self, base: Node, exponent: Node) -> None:
        self.base = base
        self.exponent = exponent
        self.text = f"{base.text} ** {exponent.text}"

    def ev(self, ctx: Ctx, out: Out) -> Number:
        left: Out = []
        right: Out = []
        a = self.base.ev(ctx, left)
        b = self.exponent.ev(ctx, right)
        total = apply("**", a, b)
        out.append({"type": "function", "name": "pow", "args": [left, right], "total": total})
        return total


class ParenNode(Node):
    __slots__ = ("expr", "flavor")

    def __init__(self, expr: Node, flavor: str | None = None) -> None:
        self.expr = expr
        self.flavor = flavor
        self.text = f"({expr.text})" + (f"[{flavor}]" if flavor is not None else "")

    def ev(self, ctx: Ctx, out: Out) -> Number:
        inner: Out = []
        total = self.expr.ev(ctx, inner)
        if self.flavor is None:
            out.append({"type": "paren", "terms": inner, "total": total})
        else:
            out.append({"type": "paren", "terms": inner, "total": total, "flavor": self.flavor})
        return total


class FunctionNode(Node):
    __slots__ = ("args", "flavor", "name")

    def __init__(self, name: str, args: tuple[Node, ...], flavor: str | None = None) -> None:
        self.name = name
        self.args = args
        self.flavor = flavor
        label = f"[{flavor}]" if flavor is not None else ""
        self.text = f"{name}({', '.join(a.text for a in args)}){label}"

    def ev(self, ctx: Ctx, out: Out) -> Number:
        arg_terms: list[Out] = []
        values: list[Number] = []
        for arg in self.args:
            terms: Out = []
            values.append(arg.ev(ctx, terms))
            arg_terms.append(terms)
        total = call(self.name, values)
        term: dict[str, Any] = {"type": "function", "name": self.name, "args": arg_terms, "total": total}
        if self.flavor is not None:
            term["flavor"] = self.flavor
        out.append(term)
        return total


class InlineNode(Node):
    """A Roll20 inline roll ``[[ ... ]]``: evaluated before everything else, then used as its total."""

    __slots__ = ("expr", "index")

    def __init__(self, expr: Node, index: int) -> None:
        self.expr = expr
        self.index = index
        self.text = f"[[{expr.text}]]"

    def evaluate_first(self, ctx: Ctx) -> None:
        inner: Out = []
        total = self.expr.ev(ctx, inner)
        ctx.inline.append((total, {"type": "paren", "terms": inner, "total": total, "inline": True}))

    def value(self, ctx: Ctx) -> Number:
        return ctx.inline[self.index][0]

    def ev(self, ctx: Ctx, out: Out) -> Number:
        total, term = ctx.inline[self.index]
        out.append(term)
        return total


Target = int | InlineNode


def target_value(ctx: Ctx, target: Target) -> Number:
    return target if type(target) is int else target.value(ctx)  # type: ignore[union-attr]


DiceRoller = Callable[[Ctx, "DiceNode", Out], Number]


class DiceNode(Node):
    """``NdX`` (or ``dF``, ``dc``) with its modifiers; ``spec`` is the dialect's parsed modifiers."""

    __slots__ = ("expression", "faces", "flavor", "kind", "mod_texts", "number", "roller", "spec")

    def __init__(
        self,
        number: int,
        faces: int,
        kind: str,
        mod_texts: tuple[str, ...],
        spec: Any,
        roller: DiceRoller,
        flavor: str | None = None,
    ) -> None:
        self.number = number
        self.faces = faces
        self.kind = kind
        self.mod_texts = mod_texts
        self.spec = spec
        self.roller = roller
        self.flavor = flavor
        denomination = {"standard": str(faces), "fate": "F", "coin": "c"}[kind]
        self.expression = f"{number}d{denomination}{''.join(mod_texts)}"
        self.text = self.expression + (f"[{flavor}]" if flavor is not None else "")

    def ev(self, ctx: Ctx, out: Out) -> Number:
        return self.roller(ctx, self, out)


def roll_plain(ctx: Ctx, node: DiceNode, out: Out) -> Number:
    """Standard dice with no modifiers, the common case, in as few steps as possible."""
    n = node.number
    faces = node.faces
    ctx.rolls += n
    if ctx.track is not None or n != 1:
        values = roll_many(ctx.rng, faces, n)
        total: int = sum(values)
    else:
        total = ctx.rng.roll(faces)
        values = [total]
    term: dict[str, Any] = {
        "type": "die",
        "number": n,
        "faces": faces,
        "kind": "standard",
        "modifiers": [],
        "results": [{"result": v, "active": True} for v in values],
        "total": total,
        "expression": node.expression,
    }
    if node.flavor is not None:
        term["flavor"] = node.flavor
    out.append(term)
    # The same shape as rules.result.die(faces, value, True), built inline because this is the hot path.
    entries = [{"faces": faces, "value": v, "kept": True} for v in values]
    ctx.dice += entries
    ctx.dice_max += n * faces
    if ctx.track is not None:
        ctx.track.extend((r, e, term) for r, e in zip(term["results"], entries, strict=True))
    return total


class ComputedDiceNode(Node):
    """Foundry's computed dice: ``(1d4)d6``, ``1d(2*3)``, ``(2+1)d(1d4+4)``.

    The parenthetical number or faces (a ``ParenNode``) is rolled when the term is, faces first and
    then number, as ``DiceTerm#_evaluateAsync`` does; the term then rolls like a ``DiceNode`` with
    those values. Its inner rolls ride on the die term as ``number_roll`` and ``faces_roll``.
    """

    __slots__ = (
        "expression", "faces", "faces_expr", "flavor", "kind", "mod_texts", "number", "number_expr", "roller",
        "spec",
    )  # fmt: skip

    def __init__(
        self,
        number: int | Node,
        faces: int | Node,
        kind: str,
        mod_texts: tuple[str, ...],
        spec: Any,
        roller: DiceRoller,
        flavor: str | None = None,
    ) -> None:
        self.number = number if isinstance(number, int) else None
        self.number_expr = None if isinstance(number, int) else number
        self.faces = faces if isinstance(faces, int) else None
        self.faces_expr = None if isinstance(faces, int) else faces
        self.kind = kind
        self.mod_texts = mod_texts
        self.spec = spec
        self.roller = roller
        self.flavor = flavor
        shown_faces = str(faces) if isinstance(faces, int) else faces.text
        denomination = {"fate": "F", "coin": "c"}.get(kind, shown_faces)
        count = str(number) if isinstance(number, int) else number.text
        self.expression = f"{count}d{denomination}{''.join(mod_texts)}"
        self.text = self.expression + (f"[{flavor}]" if flavor is not None else "")

    def ev(self, ctx: Ctx, out: Out) -> Number:
        faces_terms: Out = []
        faces = self.faces
        if self.faces_expr is not None:
            faces = _computed(self.faces_expr, self.faces_expr.ev(ctx, faces_terms), "number of faces", 1)
            if faces > MAX_FACES:
                limit(f"a die may have at most {MAX_FACES:,} faces")
        number_terms: Out = []
        number = self.number
        if self.number_expr is not None:
            number = _computed(self.number_expr, self.number_expr.ev(ctx, number_terms), "number of dice", 0)
            ctx.asked += number
            if ctx.asked > MAX_DICE:
                limit(f"a formula may ask for at most {MAX_DICE} dice")
        assert number is not None
        assert faces is not None
        die = DiceNode(number, faces, self.kind, self.mod_texts, self.spec, self.roller, self.flavor)
        total = self.roller(ctx, die, out)
        term = out[-1]
        term["expression"] = self.expression
        if self.number_expr is not None:
            term["number_roll"] = {"terms": number_terms, "total": number, "formula": self.number_expr.text}
        if self.faces_expr is not None:
            term["faces_roll"] = {"terms": faces_terms, "total": faces, "formula": self.faces_expr.text}
        return total


def _computed(expr: Node, value: Number, what: str, least: int) -> int:
    """A computed number of dice or faces, refused unless it is a whole number of at least ``least``."""
    if type(value) is not int or value < least:
        bound = "0 or more" if least == 0 else f"at least {least}"
        raise RulesError(
            "bad_formula",
            f"The {what} {expr.text} came to {fmt(value)}; it must be a whole number, {bound}.",
        )
    return value


GroupRoller = Callable[[Ctx, "GroupNode", Out], Number]


class GroupNode(Node):
    """A Foundry pool ``{a, b}kh`` or a Roll20 group ``{4d6+3d8}kh1``."""

    __slots__ = ("flavor", "mod_texts", "roller", "spec", "subs")

    def __init__(
        self,
        subs: tuple[Node, ...],
        mod_texts: tuple[str, ...],
        spec: Any,
        roller: GroupRoller,
        flavor: str | None = None,
    ) -> None:
        self.subs = subs
        self.mod_texts = mod_texts
        self.spec = spec
        self.roller = roller
        self.flavor = flavor
        self.text = (
            "{"
            + ", ".join(s.text for s in subs)
            + "}"
            + "".join(mod_texts)
            + (f"[{flavor}]" if flavor is not None else "")
        )

    def ev(self, ctx: Ctx, out: Out) -> Number:
        return self.roller(ctx, self, out)


def children(node: Node) -> list[Node]:
    """The nodes directly under ``node``, in formula order."""
    if isinstance(node, ChainNode):
        return [node.first, *(n for _, n in node.rest)]
    if isinstance(node, UnaryNode):
        return [node.operand]
    if isinstance(node, PowerNode):
        return [node.base, node.exponent]
    if isinstance(node, ParenNode | InlineNode):
        return [node.expr]
    if isinstance(node, FunctionNode):
        return list(node.args)
    if isinstance(node, GroupNode):
        return list(node.subs)
    if isinstance(node, ComputedDiceNode):
        return [n for n in (node.faces_expr, node.number_expr) if n is not None]
    return []


def emit_pool(
    node: GroupNode, out: Out, rolls: list[Any], results: list[dict[str, Any]], total: Number
) -> Number:
    """Append the pool term of a resolved Foundry pool or Roll20 group (both dialects share its layout)."""
    total = norm(total)
    term: dict[str, Any] = {
        "type": "pool",
        "rolls": rolls,
        "modifiers": list(node.mod_texts),
        "results": results,
        "total": total,
    }
    if node.flavor is not None:
        term["flavor"] = node.flavor
    out.append(term)
    return total


def roll_subs(ctx: Ctx, node: GroupNode) -> tuple[list[Any], list[dict[str, Any]], list[tuple[int, int]]]:
    """Roll each expression of a pool or group: its sub-rolls, one active result per total, and the span
    of ``ctx.dice`` each one rolled (so a dropped sub-roll's dice can be marked not kept)."""
    rolls: list[Any] = []
    results: list[dict[str, Any]] = []
    spans: list[tuple[int, int]] = []
    for sub in node.subs:
        start = len(ctx.dice)
        terms: Out = []
        value = sub.ev(ctx, terms)
        rolls.append({"terms": terms, "total": value, "formula": sub.text})
        results.append({"result": value, "active": True})
        spans.append((start, len(ctx.dice)))
    return rolls, results, spans


def unkeep_dropped(ctx: Ctx, results: list[dict[str, Any]], spans: list[tuple[int, int]]) -> None:
    """Mark every die of a dropped sub-roll as not kept."""
    for r, (start, end) in zip(results, spans, strict=True):
        if not r["active"]:
            for entry in ctx.dice[start:end]:
                entry["kept"] = False
