"""Safety limits of the dice engine: what no formula may exceed, and the one error that says so.

Every limit is checked before the work it guards (a dice count before any die is rolled, an exponent
before the power is computed), so no formula can hang, recurse without bound or grow memory without bound.
"""

from __future__ import annotations

from typing import NoReturn

from rules.errors import RulesError

#: Characters in a formula.
MAX_FORMULA_LENGTH = 1000
#: Nesting of parentheses, groups, function calls, inline rolls and ``**`` in one formula.
MAX_DEPTH = 32
#: Dice asked for in a whole formula (the ``N`` of every ``NdX``, summed), checked before rolling.
MAX_DICE = 1000
#: Faces on one die.
MAX_FACES = 1_000_000
#: Extra rolls one die may cause by exploding, compounding, penetrating or being rerolled.
MAX_CHAIN = 100
#: Every roll of every die in a formula, explosions and rerolls included.
MAX_ROLLS = 10_000
#: The largest magnitude of any number or intermediate value (JavaScript's largest exact integer,
#: which is also where Foundry VTT and Roll20 stop counting exactly).
MAX_NUMBER = 2**53 - 1


def limit(what: str) -> NoReturn:
    """Raise the ``limit`` error for ``what`` (a sentence fragment naming the limit)."""
    raise RulesError("limit", f"The formula exceeds a safety limit: {what}.")
