"""Resolving intents with scripted dice, for the systems' worked-example tests."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rules import RulesError, resolve
from rules.rng import Scripted


def roll(system: str, script: list[int], **args: Any) -> dict[str, Any]:
    """Resolve with exactly these faces: every scripted die must be used, and the result is plain data."""
    dice = Scripted(script)
    result = resolve({"system": system, **args}, rng=dice)
    assert dice.remaining == 0, "the roll used fewer dice than scripted"
    # Results travel as JSON/MessagePack: plain data only.
    assert json.loads(json.dumps(result)) == result
    return result


def refused(code: str, system: str, **args: Any) -> str:
    """The sentence of the RulesError with ``code`` that the intent raises."""
    with pytest.raises(RulesError) as caught:
        resolve({"system": system, **args}, rng=Scripted([1] * 10))
    assert caught.value.code == code, caught.value.message
    return caught.value.message
