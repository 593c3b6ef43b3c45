"""``tablerelay roll``: resolve one intent locally and print it for a person (or as JSON)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from rules import resolve, systems
from rules.errors import RulesError
from rules.registry import SYSTEMS

#: Exit status for an intent the rules refuse (the same as a command-line usage error).
REFUSED = 2
#: Exit status for a fault in the rules core itself.
FAULT = 1
#: A first word shaped like a system's name: one that names none is refused with the list of names, not read
#: as a dice formula, so a misspelled system is answered as one.
SYSTEM_SHAPE = re.compile(r"[a-z_]+(?:\.[a-z_]+)+")
#: A word that starts an argument (``dialect=roll20``); a formula's own ``=`` (``4d6cs>=5``) follows no name.
ARGUMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def parse_pairs(pairs: Sequence[str]) -> dict[str, Any]:
    """``key=value`` words to an intent's arguments: JSON values where they parse, else strings."""
    intent: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RulesError("bad_intent", f"Arguments are written key=value; got {pair!r}.")
        if key == "system":
            raise RulesError(
                "bad_intent", "The system is the first word after 'roll', not a key=value argument."
            )
        if key in intent:
            raise RulesError("bad_intent", f"The argument {key!r} is given twice.")
        try:
            intent[key] = json.loads(value)
        except json.JSONDecodeError:
            intent[key] = value
        except RecursionError as exc:
            raise RulesError("bad_intent", f"The argument {key!r} nests deeper than any roll takes.") from exc
    return intent


def intent_of(first: str, words: Sequence[str]) -> dict[str, Any]:
    """The intent the words after ``roll`` ask for: a first word that names a system (or is shaped like a
    name) rolls that system with the ``key=value`` words after it; anything else is a dice formula, as the
    Foundry and Roll20 clients read their chat commands: ``4d6kh3``, ``2d20kh + 7``, ``1d20+5 dialect=roll20``
    (the formula is the words before the first ``key=value``)."""
    if first in SYSTEMS or SYSTEM_SHAPE.fullmatch(first):
        return {"system": first, **parse_pairs(words)}
    cut = next((i for i, word in enumerate(words) if ARGUMENT.match(word)), len(words))
    arguments = parse_pairs(words[cut:])
    if "formula" in arguments:
        raise RulesError(
            "bad_intent", "The formula is given twice: as the words after 'roll' and as formula=."
        )
    return {"system": "dice", "formula": " ".join([first, *words[:cut]]), **arguments}


def roll_command(system: str, pairs: Sequence[str], *, as_json: bool = False) -> int:
    if system in {"list", "systems"} and not pairs:
        return _list(as_json)
    try:
        result = resolve(intent_of(system, pairs))
    except RulesError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return REFUSED
    except Exception as exc:
        # A bug in a resolver: say so in one line rather than showing a person a traceback.
        print(
            f"error [internal]: the rules core failed on this intent ({type(exc).__name__}); "
            "please report it.",
            file=sys.stderr,
        )
        return FAULT
    if as_json:
        print(json.dumps(result, indent=2))
        return 0
    print(result["text"])
    if result["dice"]:
        print(f"  dice:    {' '.join(_face(d) for d in result['dice'])}")
    print(f"  formula: {result['formula']}")
    if result["total"] is not None:
        print(f"  total:   {result['total']}")
    for effect in result.get("effects", []):
        print(f"  effect:  {effect['resource']} {effect['delta']:+d}")
    for resource, amount in result.get("requires", {}).items():
        print(f"  spends:  {amount} {resource}")
    return 0


def _list(as_json: bool) -> int:
    listed = systems()
    if as_json:
        print(json.dumps(listed, indent=2))
        return 0
    width = max(map(len, listed), default=0) + 2
    for name, description in listed.items():
        print(f"{name:{width}}{description}")
    return 0


def _face(d: dict[str, Any]) -> str:
    """``d10:7``, an exploded chain as ``d10:10+5=15``, a die not kept in parentheses."""
    face = str(d["value"])
    chain = d.get("chain")
    if isinstance(chain, list) and len(chain) > 1:
        face = "+".join(str(v) for v in chain) + f"={d['value']}"
    face = f"d{d['faces']}:{face}"
    return face if d.get("kept", True) else f"({face})"
