"""The one exception type the rules core raises for anything a caller got wrong."""

from __future__ import annotations


class RulesError(ValueError):
    """A roll intent the rules core refuses.

    ``code`` is a short machine string (see ``CODES``); the message is one sentence for a person that
    names the argument and says what is allowed.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"RulesError({self.code!r}, {self.message!r})"


#: Every code the rules core uses, with what it means. Kept here so docs and clients have one list.
CODES: dict[str, str] = {
    "bad_intent": "the intent is not a mapping or has no system",
    "unknown_system": "no resolver has that system name",
    "unknown_argument": "the intent carries an argument the system does not take",
    "missing_argument": "a required argument is absent",
    "bad_type": "an argument has the wrong type",
    "out_of_range": "an argument is outside its allowed range",
    "bad_value": "an argument has the right type but a value the rules do not allow",
    "not_allowed": "the rules forbid this roll (e.g. an untrained magic test)",
    "limit": "the roll would exceed a safety limit (dice, explosions, formula size)",
    "bad_formula": "a dice formula could not be parsed",
    "script_exhausted": "a Scripted random source ran out of values or was given an impossible face",
}
