"""Arithmetic the way both platforms do it (JavaScript numbers), with exact integers where possible.

Foundry VTT and Roll20 both compute totals with JavaScript: ``/`` makes fractions, ``%`` keeps the sign of
the dividend, ``round`` takes halves up. Integers stay Python ints (exact) and a fraction becomes a float
only when it really is one; every value is kept within ``MAX_NUMBER`` so nothing grows without bound.
"""

from __future__ import annotations

import math

from rules.dice.limits import MAX_NUMBER, limit
from rules.errors import RulesError

Number = int | float


def norm(value: Number) -> Number:
    """``value`` as an int when integral, refusing non-finite and oversized values."""
    if type(value) is int:
        if -MAX_NUMBER <= value <= MAX_NUMBER:
            return value
        limit(f"numbers may be at most {MAX_NUMBER:,} in size")
    if isinstance(value, complex):
        raise RulesError("bad_formula", "The formula makes a number that is not real (a root of a negative).")
    if math.isnan(value):
        raise RulesError("bad_formula", "The formula makes a number that is undefined (such as 0 / 0).")
    if not -MAX_NUMBER <= value <= MAX_NUMBER:
        limit(f"numbers may be at most {MAX_NUMBER:,} in size")
    if float(value).is_integer():
        return int(value)
    return value


def _divide(a: Number, b: Number) -> Number:
    if b == 0:
        raise RulesError("bad_formula", "The formula divides by zero.")
    if type(a) is int and type(b) is int and a % b == 0:
        return a // b
    return a / b


def _remainder(a: Number, b: Number) -> Number:
    if b == 0:
        raise RulesError("bad_formula", "The formula takes a remainder after dividing by zero.")
    if type(a) is int and type(b) is int:
        r = abs(a) % abs(b)
        return -r if a < 0 else r
    return math.fmod(a, b)


def power(a: Number, b: Number) -> Number:
    """``a ** b``, refused before computing when the result could not fit."""
    if type(a) is int and type(b) is int and b >= 0:
        if a in (-1, 0, 1) or b <= 1:
            return norm(a**b)
        if b * math.log2(abs(a)) > 54:
            limit(f"numbers may be at most {MAX_NUMBER:,} in size")
        return norm(a**b)
    try:
        result = float(a) ** float(b)
    except ZeroDivisionError:
        raise RulesError("bad_formula", "The formula raises zero to a negative power.") from None
    except OverflowError:
        limit(f"numbers may be at most {MAX_NUMBER:,} in size")
    return norm(result)


def apply(op: str, a: Number, b: Number) -> Number:
    """One binary operation, normalised."""
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    elif op == "/":
        r = _divide(a, b)
    elif op == "%":
        r = _remainder(a, b)
    else:
        return power(a, b)
    if type(r) is int and -MAX_NUMBER <= r <= MAX_NUMBER:
        return r
    return norm(r)


def js_round(x: Number) -> Number:
    """JavaScript's ``Math.round``: halves go up (towards positive infinity)."""
    return norm(math.floor(x + 0.5)) if type(x) is float else x


FUNCTIONS: dict[str, tuple[int, int]] = {
    # name: (fewest, most) arguments
    "floor": (1, 1),
    "ceil": (1, 1),
    "round": (1, 1),
    "abs": (1, 1),
    "min": (1, 50),
    "max": (1, 50),
}


def call(name: str, args: list[Number]) -> Number:
    """A math function over already-evaluated arguments."""
    x = args[0]
    if name == "floor":
        return norm(math.floor(x))
    if name == "ceil":
        return norm(math.ceil(x))
    if name == "round":
        return js_round(x)
    if name == "abs":
        return norm(abs(x))
    if name == "min":
        return min(args)
    return max(args)


def fmt(value: Number) -> str:
    """A number as people (and JavaScript) write it: ``3``, ``3.5``, ``-0.25``."""
    if type(value) is int:
        return str(value)
    return repr(value)
