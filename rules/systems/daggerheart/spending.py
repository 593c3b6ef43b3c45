"""Adding an Experience to a Daggerheart roll by spending a resource (Hope for players, Fear for the GM).

Both rolls read the pair the same way, so the rule and its error sentences live here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rules.args import Args
from rules.errors import RulesError

EXPERIENCE_MAX = 20


@dataclass(frozen=True)
class Spend:
    """The Experience added to a roll and the resource paid for it (``None`` when nothing is spent)."""

    experience: int
    resource: str | None

    @property
    def bonus(self) -> int:
        return self.experience if self.resource is not None else 0

    def requires(self) -> dict[str, int]:
        return {self.resource: 1} if self.resource is not None else {}

    def effects(self) -> list[dict[str, Any]]:
        """The spend as its own effect entry, so a feed can show it apart from any gain."""
        return [{"resource": self.resource, "delta": -1}] if self.resource is not None else []

    def formula(self) -> str:
        return f" + {self.experience} (experience)" if self.resource is not None else ""


#: Frozen, so one instance serves every roll that spends nothing.
NOTHING_SPENT = Spend(0, None)


def read_spend(args: Args, flag: str, resource: str) -> Spend:
    """Read ``experience`` and the flag that pays for it (``spend_hope`` / ``spend_fear``).

    An Experience only counts when it is paid for, and paying adds nothing without one. Rather than
    silently dropping an Experience whose flag a client forgot, or charging a resource for nothing,
    both half-given forms are refused.
    """
    if args.absent(("experience", flag)):
        return NOTHING_SPENT
    experience: int = args.integer("experience", 0, lo=0, hi=EXPERIENCE_MAX)
    spend: bool = args.boolean(flag, False)
    noun = resource.capitalize()
    if experience > 0 and not spend:
        raise RulesError(
            "bad_value",
            f"{args.where('experience')} is only added when you spend a {noun}: "
            f"set '{flag}' to true, or leave 'experience' at 0.",
        )
    if spend and experience == 0:
        raise RulesError(
            "bad_value",
            f"{args.where(flag)} pays for an Experience: give 'experience' from 1 to {EXPERIENCE_MAX} "
            f"with it.",
        )
    return Spend(experience, resource if spend else None)
