"""Fuzzing: random text and random valid formulas in both dialects only ever raise ``RulesError``, fast."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from rules.dice import evaluate
from rules.errors import RulesError
from rules.rng import SecureDice

HANG_GUARD_SECONDS = 0.2
_rng = SecureDice()

ALPHABET = "0123456789dDfFcCkhlxorpsaemin!<>=+-*/%(){}[], .\t"

FOUNDRY_MODIFIERS = [
    "k", "kh", "kh2", "kl", "kl2", "d", "dl", "dh1", "x", "xo", "x>=5", "x2", "r", "r<3", "rr<2", "r1=1",
    "cs", "cs>=4", "cs<2", "cf", "cf<=2", "df", "df<2", "sf", "ms>5", "ms<9", "min2", "max4", "even", "odd",
]  # fmt: skip
ROLL20_MODIFIERS = [
    "!", "!!", "!p", "!>5", "!!<2", "k2", "kh1", "kl1", "d1", "dh1", "r", "r<2", "ro1", "ro<3", ">3", "<2",
    "=4", ">3f1", ">4f<2", "cs>5", "cf<2", "cs20", "s", "sa", "sd",
]  # fmt: skip


def dice(dialect: str) -> st.SearchStrategy[str]:
    mods = FOUNDRY_MODIFIERS if dialect == "foundry" else ROLL20_MODIFIERS
    count = st.one_of(st.just(""), st.integers(0, 12).map(str))
    faces = st.sampled_from(["1", "2", "3", "4", "6", "8", "10", "12", "20", "100", "F"])
    modifiers = st.lists(st.sampled_from(mods), max_size=3).map("".join)
    label = st.sampled_from(["", "", "[fire]", "[a label]"])

    def die(c: str, f: str, m: str, lab: str) -> str:
        return f"{c}d{f}{m if f != 'F' else ''}{lab}"

    return st.builds(die, count, faces, modifiers, label)


def numbers() -> st.SearchStrategy[str]:
    return st.one_of(st.integers(0, 100).map(str), st.sampled_from(["0.5", "2.25", "1.0"]))


def formulas(dialect: str) -> st.SearchStrategy[str]:
    ops = ["+", "-", "*", "/", "%"] + (["**"] if dialect == "roll20" else [])
    functions = ["floor", "ceil", "round", "abs"] + (["min", "max"] if dialect == "foundry" else [])

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        binary = st.builds(lambda a, op, b: f"{a} {op} {b}", inner, st.sampled_from(ops), inner)
        paren = inner.map(lambda a: f"({a})")
        negated = inner.map(lambda a: f"-{a}")
        call = st.builds(lambda f, a: f"{f}({a})", st.sampled_from(functions), inner)
        pool_mods = ["", "kh", "kl", "dl1"] + (["cs>=5"] if dialect == "foundry" else [">5", ">5f1"])
        pool = st.builds(
            lambda items, m: "{" + ", ".join(items) + "}" + m,
            st.lists(inner, min_size=1, max_size=3),
            st.sampled_from(pool_mods),
        )
        # Computed dice, "(1d4)d6" and "1d(2*3)": rolled in Foundry, refused in Roll20.
        computed = st.builds(
            lambda a, b, which: f"({a})d6" if which == 0 else f"1d({a})" if which == 1 else f"({a})d({b})kh",
            inner,
            inner,
            st.integers(0, 2),
        )
        options = [binary, paren, negated, call, pool, computed]
        if dialect == "roll20":
            options.append(inner.map(lambda a: f"[[{a}]]"))
        return st.one_of(*options)

    return st.recursive(st.one_of(dice(dialect), numbers()), extend, max_leaves=8)


def run(formula: str, dialect: str) -> None:
    # CPU time of this process, so a busy machine's scheduling does not count against the formula.
    started = time.process_time()
    refused: RulesError | None = None
    try:
        ev = evaluate(formula, _rng, dialect)
    except RulesError as error:
        refused = error
    if refused is not None:
        assert refused.code in ("bad_formula", "limit"), refused
        assert refused.message
    else:
        assert isinstance(ev.total, int) or (isinstance(ev.total, float) and not ev.total.is_integer())
        assert ev.text.endswith(f"= {ev.total}")
        for die in ev.dice:
            assert {"faces", "value", "kept"} <= die.keys()
    assert time.process_time() - started < HANG_GUARD_SECONDS, formula


@given(st.text(alphabet=ALPHABET, max_size=60), st.sampled_from(["foundry", "roll20"]))
def test_random_text(formula: str, dialect: str) -> None:
    run(formula, dialect)


@given(st.text(max_size=40), st.sampled_from(["foundry", "roll20"]))
def test_random_unicode(formula: str, dialect: str) -> None:
    run(formula, dialect)


@given(formulas("foundry"))
def test_random_foundry_formulas(formula: str) -> None:
    run(formula, "foundry")


@given(formulas("roll20"))
def test_random_roll20_formulas(formula: str) -> None:
    run(formula, "roll20")
