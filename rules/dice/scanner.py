"""The formula's characters: the scanner the grammar (``rules.dice.parser``) reads them with.

It keeps the position in the text, and reads whitespace, numbers, labels, comparisons and each dialect's
modifiers after dice and groups, the way Foundry VTT and Roll20 read them. Its errors name the character
where something else was expected, or say in a sentence what the formula cannot do.
"""

from __future__ import annotations

from typing import NoReturn

from rules.dice import foundry, roll20
from rules.dice.arith import Number, norm
from rules.dice.limits import MAX_DEPTH, MAX_NUMBER, limit
from rules.dice.nodes import InlineNode, Node, Target
from rules.errors import RulesError

DIALECT_NAMES = {"foundry": "Foundry VTT", "roll20": "Roll20"}
_COMPARISONS = (">=", "<=", ">", "<", "=")
_MAX_LABEL = 100
#: What Foundry's ``MODIFIER_REGEXP`` takes as a modifier's text after its letters (here: digits and
#: comparisons; whitespace, operators, brackets and the ends of groups end the term).
_MODIFIER_TEXT = frozenset("0123456789<>=.")


class Scanner:
    """One formula in one dialect, the position reached in it, and what the grammar has counted so far (how
    deep it nests, the dice it asks for, its inline rolls)."""

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

    # -- numbers, labels, comparisons ---------------------------------------------------------

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

    def comparison(self) -> str | None:
        for op in _COMPARISONS:
            if self.at(op):
                self.pos += len(op)
                if self.peek() in ("<", ">", "="):
                    self.fail("a number after the comparison '" + op + "'")
                return op
        return None

    # -- modifiers ----------------------------------------------------------------------------

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

    def inline(self) -> Node:
        """A Roll20 inline roll (``[[ sum ]]``), which a compare point may hold: the grammar reads it."""
        raise NotImplementedError
