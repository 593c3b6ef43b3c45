"""The table of systems: name -> resolver, filled by the modules in ``rules/systems``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rules.args import Args
from rules.result import Result
from rules.rng import Dice

Resolver = Callable[[Args, Dice], Result]


@dataclass(frozen=True)
class System:
    name: str
    description: str
    resolver: Resolver


SYSTEMS: dict[str, System] = {}


def system(name: str, description: str) -> Callable[[Resolver], Resolver]:
    """Register ``fn`` as the resolver of ``name``.

    A resolver reads every argument through ``args``, calls ``args.finish()`` before it rolls, and
    returns ``rules.result.make_result(...)``.
    """

    def register(fn: Resolver) -> Resolver:
        if name in SYSTEMS:
            raise RuntimeError(f"system {name!r} registered twice")
        SYSTEMS[name] = System(name, description, fn)
        return fn

    return register
