"""``tablerelay roll``: resolve one intent locally and print it for a person (or as JSON)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from rules import resolve, systems
from rules.errors import RulesError


def parse_pairs(pairs: Sequence[str]) -> dict[str, Any]:
    """``key=value`` words to an intent's arguments: JSON values where they parse, else strings."""
    intent: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RulesError("bad_intent", f"Arguments are written key=value; got {pair!r}.")
        try:
            intent[key] = json.loads(value)
        except json.JSONDecodeError:
            intent[key] = value
    return intent


def roll_command(system: str, pairs: Sequence[str], *, as_json: bool = False) -> int:
    if system in {"list", "systems"}:
        for name, description in systems().items():
            print(f"{name:22} {description}")
        return 0
    try:
        intent = {"system": system, **parse_pairs(pairs)}
        result = resolve(intent)
    except RulesError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(result, indent=2))
        return 0
    print(result["text"])
    faces = " ".join(_face(d) for d in result["dice"])
    print(f"  dice:    {faces}")
    print(f"  formula: {result['formula']}")
    if result["total"] is not None:
        print(f"  total:   {result['total']}")
    for effect in result.get("effects", []):
        print(f"  effect:  {effect['resource']} {effect['delta']:+d}")
    for resource, amount in result.get("requires", {}).items():
        print(f"  spends:  {amount} {resource}")
    return 0


def _face(d: dict[str, Any]) -> str:
    face = str(d["value"])
    if "chain" in d:
        face = "+".join(str(v) for v in d["chain"]) + f"={d['value']}"
    face = f"d{d['faces']}:{face}"
    return face if d.get("kept", True) else f"({face})"
