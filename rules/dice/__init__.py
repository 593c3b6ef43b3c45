"""Dice notation in Foundry VTT and Roll20 dialects (grammar -> AST -> evaluated tree -> renderers).

Public API (the contract other modules build on):

- ``evaluate(formula: str, rng: Dice, dialect: str = "foundry") -> Evaluation``: parse and roll.
- ``Evaluation``: ``total`` (int, or float only when the arithmetic makes a fraction), ``terms``
  (``rules.dice.terms``), ``dice`` (every die as ``rules.result.die`` dicts, in the order rolled),
  ``formula`` (the normalised formula), ``text`` (one line), ``dice_max`` (the sum of the maxima of
  every rolled die term, for critical damage that "adds the dice's maximum").
- Errors are ``rules.RulesError`` with codes ``bad_formula`` or ``limit``.
"""
