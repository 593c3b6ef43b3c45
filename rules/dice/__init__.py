"""Dice notation in Foundry VTT and Roll20 dialects (grammar -> AST -> evaluated tree -> renderers).

Public API (the contract other modules build on):

- ``evaluate(formula: str, rng: Dice, dialect: str = "foundry") -> Evaluation``: parse and roll.
- ``Evaluation``: ``total`` (int, or float only when the arithmetic makes a fraction), ``terms``
  (``rules.dice.terms``), ``dice`` (every die as ``rules.result.die`` dicts, in the order rolled),
  ``formula`` (the normalised formula), ``text`` (one line), ``dice_max`` (for each die term, the number
  of dice it keeps times its highest face, summed: what a critical that "adds the dice's maximum" adds).
- Errors are ``rules.RulesError`` with codes ``bad_formula`` or ``limit`` (``bad_type``/``bad_value`` for a
  formula that is not a string or an unknown dialect).

>>> from rules.rng import Scripted
>>> result = evaluate("4d6kh3 + 2", Scripted([6, 2, 5, 3]))
>>> result.total, result.text
(16, '4d6kh3 (6, ~~2~~, 5, 3) + 2 = 16')
>>> evaluate("{3d20+5}>21", Scripted([17, 4, 20]), "roll20").total
2

How it works: ``rules.dice.parser`` turns the text into a tree of ``rules.dice.nodes`` (cached by dialect
and formula); each node evaluates itself, rolling dice the way its dialect does (``rules.dice.foundry``,
``rules.dice.roll20``) and appending its evaluated terms; ``rules.dice.text`` writes the one line. The
limits are in ``rules.dice.limits``; docs/notation.md describes every construct.
"""

from rules.dice.engine import DIALECTS, Evaluation, evaluate

__all__ = ["DIALECTS", "Evaluation", "evaluate"]
