"""A room's dice seeds as the room rolls with them (spec/fairness.md), sans-I/O.

The secrets themselves are drawn and stored by the shell (``PrepareSeed``: the log's ``ensure_seed``, so
every node of a room holds the same) before the room may commit to one: a ``seed_commit`` event is only
ever made for a seed that is already stored, and the next seed is stored while the open one serves. This
object decides which seed a roll uses, when the open one is revealed (by count, by age, or by a GM), and
which seed to prepare next.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay.core import fairness
from relay.core.state import RoomState
from relay.settings.config import Limits

HOUR_MS = 3_600_000
#: A seed event to append: its kind and its fields.
SeedEvent = tuple[str, dict[str, Any]]


class RoomSeeds:
    """The secrets of a room's open seed and of the one after it."""

    def __init__(self, room: str, stored: Mapping[int, bytes], limits: Limits) -> None:
        self.room = room
        self.limits = limits
        self.secrets = dict(stored)
        self.storing: set[int] = set()  # asked of the shell, not stored yet: not asked again meanwhile

    def add(self, n: int, secret: bytes) -> None:
        self.secrets[n] = secret
        self.storing.discard(n)

    def not_stored(self, n: int) -> None:
        """The shell could not store seed ``n``: the next roll asks for it again."""
        self.storing.discard(n)

    def missing(self, state: RoomState) -> list[int]:
        """The seeds to draw and store so that the next roll and the next reveal can go ahead, each asked
        for once until it is stored (or could not be)."""
        current = state.seed_n if state.seed_open else state.seed_n + 1
        wanted = [n for n in (current, current + 1) if n not in self.secrets and n not in self.storing]
        self.storing.update(wanted)
        return wanted

    def for_roll(
        self, state: RoomState, now_ms: int, *, hold: bool = False
    ) -> tuple[list[SeedEvent], int, bytes] | None:
        """The seed events to append before a roll made now, and the number and secret of the seed it
        uses; None while the seed it needs is not stored yet. ``hold``: a witnessed roll is open on the
        open seed, which may not be revealed before it is made."""
        if not state.seed_open:
            n = state.seed_n + 1
            secret = self.secrets.get(n)
            return None if secret is None else ([self._commit(n)], n, secret)
        n = state.seed_n
        due = state.seed_rolls >= self.limits.seed_rolls
        due = due or now_ms - state.seed_opened >= self.limits.seed_hours * HOUR_MS
        if due and not hold and n + 1 in self.secrets:
            # A seed past its count or age is revealed at the next roll, which takes the next seed; if the
            # next is not stored yet, the open one serves this roll and the reveal waits for the next.
            return [self._reveal(n), self._commit(n + 1)], n + 1, self.secrets[n + 1]
        secret = self.secrets.get(n)
        return None if secret is None else ([], n, secret)

    def for_reveal(self, state: RoomState) -> list[SeedEvent] | None:
        """A GM's reveal of the open seed: its reveal and the next seed's commitment; None while the next
        seed is not stored yet. ``[]`` when no seed is open (nothing to reveal)."""
        if not state.seed_open:
            return []
        n = state.seed_n
        if n not in self.secrets or n + 1 not in self.secrets:
            return None
        return [self._reveal(n), self._commit(n + 1)]

    def forget_revealed(self, state: RoomState) -> None:
        """Let go of the secrets of revealed seeds: the log holds them now."""
        keep = state.seed_n if state.seed_open else state.seed_n + 1
        for n in [n for n in self.secrets if n < keep]:
            del self.secrets[n]

    def _commit(self, n: int) -> SeedEvent:
        return "seed_commit", {"n": n, "commit": fairness.seed_commit(self.room, n, self.secrets[n])}

    def _reveal(self, n: int) -> SeedEvent:
        return "seed_reveal", {"n": n, "seed": self.secrets[n]}
