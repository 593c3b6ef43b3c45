"""Reading the roll modifiers both Draw Steel systems take, with their bounds in one place."""

from __future__ import annotations

from dataclasses import dataclass

from rules.args import Args, check_int

#: Bounds that keep intents sane; the rules themselves cap edges and banes at two when they count.
CHARACTERISTIC_RANGE = (-10, 10)
EDGES_RANGE = (0, 20)
BONUS_RANGE = (-100, 100)
TIER_RANGE = (1, 3)
MAX_AUTO_TIERS = 10


@dataclass(frozen=True)
class Modifiers:
    """Edges, banes, bonuses, automatic outcomes and a downgrade cap for one roll (or one target)."""

    edges: int = 0
    banes: int = 0
    bonus: int = 0
    auto_tiers: tuple[int, ...] = ()
    downgrade_to: int | None = None

    def plus(self, other: Modifiers) -> Modifiers:
        """Roll-wide modifiers combined with a target's own: counts and bonuses add, automatic
        outcomes gather (so a different one on either side cancels), and the lower cap wins."""
        caps = [c for c in (self.downgrade_to, other.downgrade_to) if c is not None]
        return Modifiers(
            edges=self.edges + other.edges,
            banes=self.banes + other.banes,
            bonus=self.bonus + other.bonus,
            auto_tiers=self.auto_tiers + other.auto_tiers,
            downgrade_to=min(caps) if caps else None,
        )


#: The arguments ``read_modifiers`` reads.
MODIFIER_ARGS = ("edges", "banes", "bonus", "auto_tiers", "downgrade_to")
NO_MODIFIERS = Modifiers()


def read_modifiers(args: Args) -> Modifiers:
    """``edges``, ``banes``, ``bonus``, ``auto_tiers`` and ``downgrade_to`` from ``args``."""
    if args.absent(MODIFIER_ARGS):
        return NO_MODIFIERS  # frozen, so one shared instance serves every roll without modifiers
    edges_lo, edges_hi = EDGES_RANGE
    bonus_lo, bonus_hi = BONUS_RANGE
    tier_lo, tier_hi = TIER_RANGE
    edges: int = args.integer("edges", 0, lo=edges_lo, hi=edges_hi)
    banes: int = args.integer("banes", 0, lo=edges_lo, hi=edges_hi)
    bonus: int = args.integer("bonus", 0, lo=bonus_lo, hi=bonus_hi)
    raw_auto: list[object] = args.items("auto_tiers", [], max_len=MAX_AUTO_TIERS)
    where = args.where("auto_tiers")
    auto_tiers = tuple(
        check_int(f"{where} item {i}", value, lo=tier_lo, hi=tier_hi) for i, value in enumerate(raw_auto, 1)
    )
    downgrade_to: int | None = args.integer("downgrade_to", None, lo=tier_lo, hi=tier_hi)
    return Modifiers(edges, banes, bonus, auto_tiers, downgrade_to)
