"""tablerelay's rules core: pure functions that resolve roll intents with a given random source.

>>> from rules import resolve
>>> from rules.rng import Scripted
>>> resolve({"system": "drawsteel.power", "characteristic": 2}, rng=Scripted([4, 5]))["tier"]
1
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from rules import systems as _systems  # noqa: F401  (registers every resolver)
from rules.args import Args, type_name
from rules.errors import CODES, RulesError
from rules.registry import SYSTEMS
from rules.rng import Dice, SecureDice

__all__ = ["CODES", "RulesError", "resolve", "systems"]

_local = threading.local()


def _default_dice() -> Dice:
    # One buffered generator per thread: sharing one buffer across threads could hand two rolls the
    # same bytes.
    dice: SecureDice | None = getattr(_local, "dice", None)
    if dice is None:
        dice = _local.dice = SecureDice()
    return dice


def resolve(intent: Mapping[str, Any], *, rng: Dice | None = None) -> dict[str, Any]:
    """Resolve one roll intent (``intent["system"]`` picks the resolver) and return its result."""
    if not isinstance(intent, Mapping):
        raise RulesError("bad_intent", f"A roll intent must be a map; got {type_name(intent)}.")
    name = intent.get("system")
    if not isinstance(name, str):
        raise RulesError("bad_intent", "A roll intent needs a 'system' string naming the rules to use.")
    entry = SYSTEMS.get(name)
    if entry is None:
        known = ", ".join(sorted(SYSTEMS))
        raise RulesError("unknown_system", f"There is no system {name[:60]!r}; the systems are: {known}.")
    return entry.resolver(Args(name, intent), rng if rng is not None else _default_dice())


def systems() -> dict[str, str]:
    """Every system name with its one-line description."""
    return {name: entry.description for name, entry in sorted(SYSTEMS.items())}
