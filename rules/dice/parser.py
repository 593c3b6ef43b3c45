"""The formula grammar: a hand-written recursive-descent parser for both dialects (its scanner, which reads
the characters, is ``rules.dice.scanner``).

Grammar (both dialects unless marked)::

    formula  = sum
    sum      = product (("+" | "-") product)*
    product  = unary (("*" | "/" | "%") unary)*
    unary    = ("+" | "-")* power
    power    = primary ("**" unary)?                      Roll20 only; Foundry: power = primary
    primary  = (number | dice | "(" sum ")" | group | function | inline) label?
    dice     = count? "d" (integer | "F" | "c" | paren) modifiers   "c" (a coin) is Foundry only
    count    = integer | paren                             paren (computed dice) is Foundry only
    paren    = "(" sum ")"                                 right against the "d", no label
    group    = "{" sum ("," sum)* "}" modifiers
    function = name "(" sum ("," sum)* ")"
    inline   = "[[" sum "]]"                               Roll20 only
    label    = "[" text "]"

Modifiers are written right after their dice, without spaces; each dialect has its own set (see
``foundry_modifiers`` and ``roll20_modifiers`` in ``rules.dice.scanner``). Parsing checks every limit that
does not depend on the dice (length, nesting, dice count, faces, number size), so a tree that parses can
always be evaluated within bounds. Trees are cached by (dialect, formula).
"""

from __future__ import annotations

from functools import lru_cache

from rules.dice import foundry, roll20
from rules.dice.arith import FUNCTIONS
from rules.dice.fast import plan
from rules.dice.limits import MAX_DICE, MAX_FACES, MAX_FORMULA_LENGTH, limit
from rules.dice.nodes import (
    ChainNode,
    ComputedDiceNode,
    DiceNode,
    FunctionNode,
    GroupNode,
    InlineNode,
    Node,
    NumberNode,
    ParenNode,
    PowerNode,
    UnaryNode,
    children,
    roll_plain,
)
from rules.dice.scanner import DIALECT_NAMES, Scanner

__all__ = ["DIALECT_NAMES", "Parsed", "parse"]

_ROLL20_FUNCTIONS = ("floor", "ceil", "round", "abs")


class Parsed:
    """A parsed formula: its tree, its normalised text and (Roll20) its inline rolls in evaluation order."""

    __slots__ = ("dialect", "dice_asked", "fast", "formula", "inlines", "root")

    def __init__(
        self, root: Node, dialect: str, inlines: tuple[InlineNode, ...], dice_asked: int = 0
    ) -> None:
        self.root = root
        self.dialect = dialect
        self.inlines = inlines
        self.dice_asked = dice_asked  # the written numbers of dice; computed ones are added as they roll
        self.formula = root.text
        self.fast = plan(root, dialect == "roll20")


class _Parser(Scanner):
    # -- expressions --------------------------------------------------------------------------

    def formula(self) -> Node:
        self.ws()
        if self.pos >= self.n:
            self.refuse("the formula is empty; write dice such as '1d20 + 5'.")
        node = self.sum()
        self.ws()
        if self.pos < self.n:
            ops = "+ - * / % **" if self.roll20 else "+ - * / %"
            self.fail(f"an operator ({ops}) or the end of the formula")
        return node

    def sum(self) -> Node:
        first = self.product()
        rest: list[tuple[str, Node]] = []
        while True:
            self.ws()
            c = self.peek()
            if c == "+" or c == "-":
                self.pos += 1
                rest.append((c, self.product()))
            else:
                break
        return ChainNode(first, tuple(rest)) if rest else first

    def product(self) -> Node:
        first = self.unary()
        rest: list[tuple[str, Node]] = []
        while True:
            self.ws()
            c = self.peek()
            if c in ("*", "/", "%") and not self.at("**"):
                self.pos += 1
                rest.append((c, self.unary()))
            else:
                break
        return ChainNode(first, tuple(rest)) if rest else first

    def unary(self) -> Node:
        ops: list[str] = []
        while True:
            self.ws()
            c = self.peek()
            if c == "+" or c == "-":
                ops.append(c)
                self.pos += 1
            else:
                break
        operand = self.power() if self.roll20 else self.primary()
        return UnaryNode(tuple(ops), operand) if ops else operand

    def power(self) -> Node:
        base = self.primary()
        self.ws()
        if not self.at("**"):
            return base
        self.pos += 2
        self.enter()
        exponent = self.unary()
        self.depth -= 1
        return PowerNode(base, exponent)

    def primary(self) -> Node:
        self.ws()
        c = self.peek()
        start = self.pos
        if "0" <= c <= "9" or c == ".":
            value = self.number()
            if self.peek() == "d":
                if type(value) is not int:
                    self.fail("a whole number of dice", start)
                return self.dice(value, start)
            return NumberNode(value, self.label())
        if c == "d":
            return self.dice(None, start)
        if c == "(":
            paren = self.parenthetical()
            if self.peek() == "d":
                return self.dice(paren, start)
            return ParenNode(paren.expr, self.label())
        if c == "{":
            return self.group()
        if c == "[" and self.roll20 and self.at("[["):
            return self.inline()
        if "a" <= c <= "z":
            return self.function()
        self.fail("a number, dice such as 'd6', '(' or a function such as 'floor('")
        raise AssertionError  # fail() raises; this line satisfies the linters

    def parenthetical(self) -> ParenNode:
        """``( sum )`` without a label: a grouping, or the computed number or faces of dice."""
        start = self.pos
        self.pos += 1
        self.enter()
        inner = self.sum()
        self.ws()
        if self.peek() != ")":
            self.fail("')' to close the '(' at character " + str(start + 1))
        self.pos += 1
        self.depth -= 1
        return ParenNode(inner)

    def function(self) -> Node:
        start = self.pos
        while self.pos < self.n and "a" <= self.low[self.pos] <= "z":
            self.pos += 1
        name = self.low[start : self.pos]
        names = _ROLL20_FUNCTIONS if self.roll20 else tuple(FUNCTIONS)
        if name not in names:
            self.fail("a number, dice, '(' or one of the functions " + ", ".join(names), start)
        self.ws()
        if self.peek() != "(":
            self.fail(f"'(' after the function name '{name}'")
        self.pos += 1
        self.enter()
        args = [self.sum()]
        while True:
            self.ws()
            c = self.peek()
            if c == ",":
                self.pos += 1
                args.append(self.sum())
            elif c == ")":
                self.pos += 1
                break
            else:
                self.fail(f"',' or ')' in the call of '{name}'")
        self.depth -= 1
        fewest, most = FUNCTIONS[name]
        if not fewest <= len(args) <= most:
            takes = "one value" if most == 1 else f"{fewest} to {most} values"
            self.refuse(f"the function '{name}' takes {takes}; it was given {len(args)}.")
        return FunctionNode(name, tuple(args), self.label())

    def inline(self) -> Node:
        start = self.pos
        self.pos += 2
        self.enter()
        inner = self.sum()
        self.ws()
        if not self.at("]]"):
            self.fail(f"']]' to close the inline roll opened at character {start + 1}")
        self.pos += 2
        self.depth -= 1
        node = InlineNode(inner, len(self.inlines))
        self.inlines.append(node)  # after its own inner inline rolls: the order they are rolled in
        return node

    # -- dice ---------------------------------------------------------------------------------

    def dice(self, number: int | ParenNode | None, start: int) -> Node:
        self.pos += 1  # the "d"
        c = self.peek()
        kind = "standard"
        faces: int | ParenNode | None
        if c == "f":
            kind, faces = "fate", 3
            self.pos += 1
        elif c == "c" and not self.roll20:
            kind, faces = "coin", 2
            self.pos += 1
        elif c == "(":
            faces = self.parenthetical()
        else:
            faces = self.digits()
            if faces is None:
                kinds = "'F' (Fate dice)" if self.roll20 else "'F' (Fate dice) or 'c' (a coin)"
                self.fail(f"the number of faces (as in 'd6') or {kinds}")
        count = 1 if number is None else number
        computed = isinstance(count, ParenNode) or isinstance(faces, ParenNode)
        if computed and self.roll20:
            self.refuse(
                f"computed dice such as '{self.src[start : self.pos]}' are not supported in Roll20 notation "
                "(Roll20 does not document the order in which it rolls them nor how its roll results show "
                "them); roll the number of dice first and write it as a number."
            )
        # Written numbers are checked here; computed ones when they are known (ComputedDiceNode).
        if kind == "standard" and isinstance(faces, int):
            if faces > MAX_FACES:
                limit(f"a die may have at most {MAX_FACES:,} faces")
            if faces < 1 and not (self.roll20 and count == 0):
                self.fail("a die with at least 1 face", start)
        if isinstance(count, int):
            self.dice_total += count
            if count > MAX_DICE or self.dice_total > MAX_DICE:
                limit(f"a formula may ask for at most {MAX_DICE} dice")
        if self.roll20:
            assert isinstance(count, int)
            assert isinstance(faces, int)
            mod_texts, spec = self.roll20_modifiers()
            roller = roll20.roll_die if mod_texts or kind != "standard" else roll_plain
            return DiceNode(count, faces, kind, mod_texts, spec, roller, self.label())
        mod_texts, mods = self.foundry_modifiers(kind, faces=faces if isinstance(faces, int) else None)
        roller = foundry.roll_die if mod_texts or kind != "standard" else roll_plain
        if isinstance(count, ParenNode) or isinstance(faces, ParenNode):
            # Foundry's "Parenthetical Expressions": (1d4)d6, 1d(2*3).
            return ComputedDiceNode(count, faces, kind, mod_texts, mods, roller, self.label())
        return DiceNode(count, faces, kind, mod_texts, mods, roller, self.label())

    # -- groups -------------------------------------------------------------------------------

    def group(self) -> Node:
        start = self.pos
        self.pos += 1
        self.enter()
        subs = [self.sum()]
        while True:
            self.ws()
            c = self.peek()
            if c == ",":
                self.pos += 1
                subs.append(self.sum())
            elif c == "}":
                self.pos += 1
                break
            else:
                self.fail(f"',' or '}}' in the group opened at character {start + 1}")
        self.depth -= 1
        if self.roll20:
            texts, spec = self.roll20_modifiers(group=True)
            if spec.failure is not None and spec.success is None:
                self.refuse("a failure check ('f') counts only together with a success target.")
            self._check_roll20_group(subs, spec)
            return GroupNode(tuple(subs), texts, spec, roll20.roll_group, self.label())
        texts, mods = self.foundry_modifiers("standard", pool=True)
        return GroupNode(tuple(subs), texts, mods, foundry.roll_pool, self.label())

    def _check_roll20_group(self, subs: list[Node], spec: roll20.Spec) -> None:
        if len(subs) == 1:
            if spec.keeps or spec.success is not None:
                self._check_single(subs[0])
            return
        # Roll20: every expression of a group holds the same kind of roll ("Grouped Rolls").
        kinds = {_roll_kind(sub) for sub in subs}
        if len(kinds) > 1:
            self.refuse(
                "Roll20 needs every expression of a group to be the same kind of roll: all with dice, "
                "all counting successes, or all plain numbers (write '5 + 0d0' to put a number beside dice)."
            )

    def _check_single(self, sub: Node) -> None:
        items: list[Node] = [sub]
        if isinstance(sub, ChainNode):
            items = [sub.first] + [n for _, n in sub.rest]
        for item in items:
            inner = item.operand if isinstance(item, UnaryNode) else item
            counts = isinstance(inner, DiceNode) and inner.spec.success is not None
            ok = isinstance(inner, NumberNode | InlineNode) or (isinstance(inner, DiceNode) and not counts)
            if not ok or (isinstance(sub, ChainNode) and any(op not in "+-" for op, _ in sub.rest)):
                self.refuse(
                    "a group with one expression and modifiers applies them to each die, so that expression "
                    "may only add and subtract dice and numbers (as in '{4d6+3d8}kh1' or '{3d20+5}>21')."
                )


def _roll_kind(sub: Node) -> str:
    """What Roll20 calls the kind of a group expression: "sum", "success" or plain "number"."""
    kinds = set()
    stack = [sub]
    while stack:
        node = stack.pop()
        if isinstance(node, InlineNode):
            continue  # an inline roll is a number by the time the group rolls
        if isinstance(node, DiceNode):
            kinds.add("success" if isinstance(node.spec, roll20.Spec) and node.spec.success else "sum")
        elif isinstance(node, GroupNode):
            kinds.add("success" if node.spec.success is not None else "sum")
        else:
            stack.extend(children(node))
    if not kinds:
        return "number"
    return "success" if "success" in kinds else "sum"


@lru_cache(maxsize=4096)
def parse(formula: str, dialect: str) -> Parsed:
    """Parse ``formula`` in ``dialect`` (cached); raises ``RulesError`` (``bad_formula`` or ``limit``)."""
    if len(formula) > MAX_FORMULA_LENGTH:
        limit(f"a formula may be at most {MAX_FORMULA_LENGTH} characters long")
    parser = _Parser(formula, dialect)
    root = parser.formula()
    return Parsed(root, dialect, tuple(parser.inlines), parser.dice_total)
