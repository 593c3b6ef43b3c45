"""The Draw Steel power-roll rules as pure functions: edges and banes, tiers, automatic outcomes, downgrades.

Both resolvers (``drawsteel.power`` and ``drawsteel.ability``) decide tiers here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

EdgeState = Literal["none", "edge", "double_edge", "bane", "double_bane"]
Kind = Literal["ability", "test"]

#: Edges and banes each stop counting at two (the rules' "Why Cap?"), before they cancel.
EDGE_CAP = 2
#: What a single edge adds to (or a single bane takes from) the total; doubles add nothing.
EDGE_BONUS = 2
#: A natural roll (the two d10s alone) at or above this is tier 3 whatever else applies.
NATURAL_TIER_3 = 19
#: Totals at or below this are tier 1; at or above ``TIER_3_FROM`` tier 3; in between tier 2.
TIER_1_UP_TO = 11
TIER_3_FROM = 17

_STATES: dict[int, EdgeState] = {-2: "double_bane", -1: "bane", 0: "none", 1: "edge", 2: "double_edge"}


def edge_state(edges: int, banes: int) -> EdgeState:
    """What is left of ``edges`` and ``banes`` after capping each at two and cancelling them.

    One edge and one bane cancel, as do a double edge and a double bane; a double edge and one bane
    leave one edge however many edges made the double; likewise a double bane and one edge leave one
    bane. Capping first and then subtracting gives exactly those cases.
    """
    return _STATES[min(edges, EDGE_CAP) - min(banes, EDGE_CAP)]


def edge_modifier(state: EdgeState) -> int:
    """What the edge state adds to the total: +2 for one edge, -2 for one bane, else nothing."""
    if state == "edge":
        return EDGE_BONUS
    if state == "bane":
        return -EDGE_BONUS
    return 0


def tier_for_total(total: int) -> int:
    """The tier a total reaches: 11 or lower is tier 1, 12 to 16 tier 2, 17 or higher tier 3."""
    if total <= TIER_1_UP_TO:
        return 1
    if total >= TIER_3_FROM:
        return 3
    return 2


def automatic_tier(auto_tiers: Sequence[int]) -> int | None:
    """The automatic outcome that applies: the tier when every effect grants the same one, else None.

    Different automatic outcomes cancel each other and are all ignored; no automatic outcome at all is
    also None.
    """
    granted = set(auto_tiers)
    return granted.pop() if len(granted) == 1 else None


@dataclass(slots=True)
class Outcome:
    """How one power roll turned out for one roller against one target.

    ``tier_from_total`` is the tier the total reaches on its own; ``tier_rolled`` adds the double
    edge/bane shift and the natural 19/20 rule (everything the dice and modifiers decide);
    ``tier`` is the outcome that applies after an automatic tier and a downgrade.

    Treat it as read-only. It is not a frozen dataclass because a frozen one sets each field through
    ``object.__setattr__``, which made building it cost more than rolling the dice.
    """

    natural: int
    total: int
    edge_state: EdgeState
    tier_from_total: int
    tier_rolled: int
    automatic: int | None
    automatic_cancelled: bool
    tier: int
    downgraded: bool
    critical: bool

    @property
    def natural_tier_3(self) -> bool:
        return self.natural >= NATURAL_TIER_3


def power_outcome(
    natural: int,
    characteristic: int,
    edges: int = 0,
    banes: int = 0,
    bonus: int = 0,
    auto_tiers: Sequence[int] = (),
    downgrade_to: int | None = None,
    kind: Kind = "ability",
) -> Outcome:
    """Resolve a power roll whose two d10s sum to ``natural``.

    Order: bonuses and penalties and a single edge or bane move the total; a double edge or double
    bane moves the tier by one (within 1..3); a natural 19 or 20 makes it tier 3 even under a double
    bane. That is ``tier_rolled``. An automatic outcome then replaces it, and ``downgrade_to`` caps it
    (a downgrade never raises a tier, so a cap at or above the tier reached changes nothing). A
    critical is a natural 19 or 20 on an ability roll; neither an automatic outcome nor a downgrade
    takes it away.
    """
    # edge_state(), edge_modifier() and tier_for_total() written inline: this runs for every power roll.
    if edges or banes:
        state = _STATES[min(edges, EDGE_CAP) - min(banes, EDGE_CAP)]
        total = natural + characteristic + bonus + edge_modifier(state)
    else:
        state = "none"
        total = natural + characteristic + bonus
    from_total = 1 if total <= TIER_1_UP_TO else 3 if total >= TIER_3_FROM else 2
    rolled = from_total
    if state == "double_edge":
        rolled = min(3, rolled + 1)
    elif state == "double_bane":
        rolled = max(1, rolled - 1)
    if natural >= NATURAL_TIER_3:
        rolled = 3
    automatic = automatic_tier(auto_tiers) if auto_tiers else None
    applied = rolled if automatic is None else automatic
    tier = applied if downgrade_to is None else min(applied, downgrade_to)
    # Positional, in field order: natural, total, edge_state, tier_from_total, tier_rolled, automatic,
    # automatic_cancelled, tier, downgraded, critical.
    return Outcome(
        natural,
        total,
        state,
        from_total,
        rolled,
        automatic,
        automatic is None and len(auto_tiers) > 0,
        tier,
        tier < applied,
        kind == "ability" and natural >= NATURAL_TIER_3,
    )
