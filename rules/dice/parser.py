"""The formula grammar: a hand-written scanner and recursive-descent parser for both dialects.

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
``_foundry_modifiers`` and ``_roll20_modifiers``). Parsing checks every limit that does not depend on the
dice (length, nesting, dice count, faces, number size), so a tree that parses can always be evaluated
within bounds. Trees are cached by (dialect, formula).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NoReturn

from rules.dice import foundry, roll20
from rules.dice.arith import FUNCTIONS, Number, norm
from rules.dice.fast import plan
from rules.dice.limits import MAX_DEPTH, MAX_DICE, MAX_FACES, MAX_FORMULA_LENGTH, MAX_NUMBER, limit
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
    Target,
    UnaryNode,
    children,
    roll_plain,
)
from rules.errors import RulesError

DIALECT_NAMES = {"foundry": "Foundry VTT", "roll20": "Roll20"}
_ROLL20_FUNCTIONS = ("floor", "ceil", "round", "abs")
_COMPARISONS = (">=", "<=", ">", "<", "=")
_MAX_LABEL = 100
#: What Foundry's ``MODIFIER_REGEXP`` takes as a modifier's text after its letters (here: digits and
#: comparisons; whitespace, operators, brackets and the ends of groups end the term).
_MODIFIER_TEXT = frozenset("0123456789<>=.")


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


class _Parser:
    def __init__(self, source: str, dialect: str) -> None:
        self.src = source
        self.low = source.lower()
        self.n = len(source)
        self.pos = 0
        self.roll20 = dialect == "roll20"
        self.dialect = dialect
        self.depth = 0
        self.dice_total = 0
        self.inlines: list[InlineNode] = []

    # -- errors and small helpers -------------------------------------------------------------

    def fail(self, expected: str, at: int | None = None) -> NoReturn:
        pos = self.pos if at is None else at
        if pos >= self.n:
            found = "the formula ends"
        else:
            snippet = self.src[pos : pos + 12]
            found = f"{snippet!r} begins"
        shown = self.src if len(self.src) <= 60 else self.src[:57] + "..."
        raise RulesError(
            "bad_formula",
            f"In the {DIALECT_NAMES[self.dialect]} formula {shown!r}, at character {pos + 1} {found} "
            f"where {expected} was expected.",
        )

    def refuse(self, sentence: str) -> NoReturn:
        raise RulesError("bad_formula", f"In the {DIALECT_NAMES[self.dialect]} formula: {sentence}")

    def ws(self) -> None:
        low, pos, n = self.low, self.pos, self.n
        while pos < n and low[pos] in " \t\r\n":
            pos += 1
        self.pos = pos

    def peek(self) -> str:
        return self.low[self.pos] if self.pos < self.n else ""

    def at(self, text: str) -> bool:
        return self.low.startswith(text, self.pos)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            limit(f"parentheses, groups, functions and powers may nest at most {MAX_DEPTH} deep")

    def digits(self) -> int | None:
        low, start = self.low, self.pos
        pos = start
        while pos < self.n and "0" <= low[pos] <= "9":
            pos += 1
        if pos == start:
            return None
        self.pos = pos
        if pos - start > 16:
            limit(f"numbers may be at most {MAX_NUMBER:,} in size")
        value = int(low[start:pos])
        if value > MAX_NUMBER:
            limit(f"numbers may be at most {MAX_NUMBER:,} in size")
        return value

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

    def number(self) -> Number:
        start = self.pos
        whole = self.digits()
        if self.peek() == "." and self.pos + 1 < self.n and "0" <= self.low[self.pos + 1] <= "9":
            self.pos += 1
            while self.pos < self.n and "0" <= self.low[self.pos] <= "9":
                self.pos += 1
            if self.pos - start > 24:
                limit("a number may be written with at most 24 characters")
            return norm(float(self.low[start : self.pos]))
        if whole is None:
            self.fail("a number", start)
        return whole

    def label(self) -> str | None:
        self.ws()
        if self.peek() != "[" or (self.roll20 and self.at("[[")):
            return None
        start = self.pos
        end = self.src.find("]", start + 1)
        if end < 0:
            self.fail("a label such as '[fire]' closed by ']'", start)
        text = self.src[start + 1 : end].strip()
        if not text or "[" in text:
            self.fail("a label with text in it, such as '[fire]'", start)
        if len(text) > _MAX_LABEL:
            limit(f"a label may be at most {_MAX_LABEL} characters long")
        self.pos = end + 1
        return text

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

    def comparison(self) -> str | None:
        for op in _COMPARISONS:
            if self.at(op):
                self.pos += len(op)
                if self.peek() in ("<", ">", "="):
                    self.fail("a number after the comparison '" + op + "'")
                return op
        return None

    def foundry_modifiers(
        self, kind: str, *, pool: bool = False, faces: int | None = None
    ) -> tuple[tuple[str, ...], tuple[foundry.Mod, ...]]:
        """A Foundry term's modifiers, read the way Foundry's own code reads them.

        Foundry (``DiceTerm.MODIFIER_REGEXP``) cuts the modifier text into runs of letters, each with
        the non-letters after it; a run that names no modifier is split greedily, longest name first,
        into modifiers that get no number (``_evaluateModifiers``). So ``xkh`` is ``x`` then ``kh``, and
        the ``3`` of ``xkh3`` is dropped: such a formula is refused, since Foundry would roll it
        differently from how it reads.
        """
        if pool:
            names: tuple[str, ...] = foundry.POOL_MODIFIERS
        else:
            names = {
                "standard": foundry.DIE_MODIFIERS,
                "fate": foundry.FATE_MODIFIERS,
                "coin": foundry.COIN_MODIFIERS,
            }[kind]
        what = "pools" if pool else {"standard": "dice", "fate": "Fate dice", "coin": "coins"}[kind]
        low = self.low
        mods: list[foundry.Mod] = []
        while self.pos < self.n and "a" <= low[self.pos] <= "z":
            run_start = run_end = self.pos
            while run_end < self.n and "a" <= low[run_end] <= "z":
                run_end += 1
            run = low[run_start:run_end]
            pieces = [run] if run in names else self._split_run(run, run_start, names, what)
            if len(pieces) > 1:
                self._check_nothing_lost(run, run_end, pieces, faces)
            at = run_start
            for piece in pieces:
                self.pos = at + len(piece)
                mods.append(self.foundry_modifier(piece, at, pool=pool))
                at += len(piece)
        return tuple(m.text for m in mods), tuple(mods)

    def _split_run(self, run: str, start: int, names: tuple[str, ...], what: str) -> list[str]:
        pieces: list[str] = []
        at = 0
        while at < len(run):
            name = next((m for m in names if run.startswith(m, at)), None)
            if name is None:
                self.fail(f"one of the modifiers {what} take ({' '.join(sorted(names))})", start + at)
            pieces.append(name)
            at += len(name)
        return pieces

    def _check_nothing_lost(self, run: str, run_end: int, pieces: list[str], faces: int | None) -> None:
        end = run_end
        while end < self.n and self.low[end] in _MODIFIER_TEXT:
            end += 1
        lost = self.src[run_end:end]
        if not lost:
            return
        explicit = [foundry.explicit(p, faces) for p in pieces[:-1]]
        if all(explicit):
            hint = f"write '{''.join(e for e in explicit if e)}{pieces[-1]}{lost}'"
        else:
            hint = "give each modifier before the last its own number, or write them in another order"
        self.refuse(
            f"Foundry VTT reads the modifier letters '{run}' as {', '.join(repr(p) for p in pieces)}, each "
            f"without a number, and ignores the '{lost}' after them, so it would roll this formula "
            f"differently from how it reads; {hint}."
        )

    def foundry_modifier(self, name: str, start: int, *, pool: bool) -> foundry.Mod:
        """One Foundry modifier ``name`` (already read) and the number, comparison and target after it."""
        count: int | None = None
        op: str | None = None
        target: int | None = None
        if name in ("r", "rr", "x", "xo"):
            count = self.digits()
            op = self.comparison()
            target = self.digits() if op is not None else None
            if count is not None and op is None:
                count, target = None, count  # "r2" rerolls 2s; "r1=2" rerolls one 2
        elif name in foundry.KEEPS:
            count = self.digits()
        elif name in ("cs", "cf", "df", "sf", "ms"):
            op = self.comparison()
            target = self.digits()
            if op is not None and target is None:
                self.fail(f"a number after '{name}{op}'")
            if name == "ms" and target is None:
                self.fail("a target number after 'ms', as in 'ms>10'")
            if name in ("cs", "cf") and target is None:
                example = "cs>=5" if name == "cs" else "cf<=2"
                self.refuse(
                    f"'{name}' needs a target, as in '{example}': Foundry VTT's engine counts nothing for a "
                    f"'{name}' without one (its documentation says otherwise), so the formula is refused "
                    "rather than guessed."
                )
            if pool and target is None:
                self.fail(f"a target after the pool modifier '{name}', as in '{name}>=10'")
            if pool and op is None:
                op = "="
        elif name in ("min", "max"):
            target = self.digits()
            if target is None:
                self.fail(f"a number after '{name}', as in '{name}2'")
        elif name == "c":
            target = self.digits()
            if target not in (0, 1):
                self.fail("'c1' (call heads) or 'c0' (call tails)", start)
        return foundry.Mod(name, count, op, target, self.low[start : self.pos])

    def cp(self, *, required: bool, what: str) -> roll20.CompareRule | None:
        """A Roll20 compare point: ``<N`` (at most), ``>N`` (at least), ``=N`` or ``N``."""
        op = "="
        c = self.peek()
        if c in ("<", ">", "="):
            self.pos += 1
            op = {"<": "<=", ">": ">=", "=": "="}[c]
            if self.peek() in ("<", ">", "="):
                self.fail(f"a number after '{c}' (Roll20 writes 'at least 3' as '>3')")
        elif not ("0" <= c <= "9" or self.at("[[")):
            if required:
                self.fail(f"a number after {what}")
            return None
        target: Target
        if self.at("[["):
            target = self.inline()  # type: ignore[assignment]
        else:
            value = self.digits()
            if value is None:
                self.fail(f"a number after {what}")
            target = value
        return (op, target)

    def roll20_modifiers(self, *, group: bool = False) -> tuple[tuple[str, ...], roll20.Spec]:
        spec = roll20.Spec()
        texts: list[str] = []
        allowed = "kdrcfs!<>=" if not group else "kd<>=f"
        while self.pos < self.n and self.low[self.pos] in allowed:
            start = self.pos
            c = self.low[self.pos]
            if c == "!":
                mode = "!!" if self.at("!!") else "!p" if self.at("!p") else "!"
                if spec.explode is not None:
                    self.fail("only one of '!', '!!' or '!p' per die", start)
                self.pos += len(mode)
                spec.explode = (mode, self.cp(required=False, what=mode))
            elif c in ("k", "d"):
                name = self.low[self.pos : self.pos + 2]
                if name not in ("kh", "kl", "dh", "dl"):
                    name = c
                self.pos += len(name)
                count = self.digits()
                keep, highest = foundry.KEEPS[name]
                spec.keeps.append((keep, highest, 1 if count is None else count))
            elif c == "r":
                once = self.at("ro")
                self.pos += 2 if once else 1
                spec.once = spec.once and once
                rule = self.cp(required=False, what="'r'")
                spec.rerolls.append(rule or ("=", 1))
            elif c == "c":
                name = self.low[self.pos : self.pos + 2]
                if name not in ("cs", "cf"):
                    self.fail("'cs' (critical success) or 'cf' (critical failure)")
                self.pos += 2
                rule = self.cp(required=True, what=f"'{name}'")
                assert rule is not None
                (spec.crit_success if name == "cs" else spec.crit_failure).append(rule)
            elif c == "f":
                self.pos += 1
                if spec.failure is not None:
                    self.fail("only one failure check ('f') per roll", start)
                spec.failure = self.cp(required=True, what="'f'")
            elif c == "s":
                self.pos += 1
                spec.sort = "d" if self.peek() == "d" else "a"
                if self.peek() in ("a", "d"):
                    self.pos += 1
            else:  # a success target: < > =
                if spec.success is not None:
                    self.fail("only one success target (such as '>3') per roll", start)
                spec.success = self.cp(required=True, what="the success comparison")
            texts.append(self.low[start : self.pos])
        if spec.failure is not None and spec.success is None:
            self.refuse("a failure check ('f') counts only together with a success target such as '>3'.")
        return tuple(texts), spec

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
