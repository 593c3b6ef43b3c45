"""``drawsteel.power``: a bare power roll (an ability roll or a test) with its tier."""

from __future__ import annotations

from rules.args import Args
from rules.registry import system
from rules.result import Result
from rules.rng import Dice
from rules.systems.drawsteel.inputs import CHARACTERISTIC_RANGE, MODIFIER_ARGS, NO_MODIFIERS, read_modifiers
from rules.systems.drawsteel.outcome import Kind, power_outcome
from rules.systems.drawsteel.wording import formula_terms, shown, tier_steps

SYSTEM = "drawsteel.power"
KINDS: tuple[Kind, ...] = ("ability", "test")
_LOWEST, _HIGHEST = CHARACTERISTIC_RANGE
#: Every argument but the characteristic: when none is given, the defaults apply without reading each.
_OPTIONAL = (*MODIFIER_ARGS, "kind")


def roll_2d10(rng: Dice) -> list[int]:
    """The two d10s of a power roll."""
    return [rng.roll(10), rng.roll(10)]


@system(SYSTEM, "Draw Steel power roll: 2d10 + characteristic, edges and banes, tiers 1-3")
def resolve_power(args: Args, rng: Dice) -> Result:
    characteristic: int = args.integer("characteristic", 0, lo=_LOWEST, hi=_HIGHEST)
    kind: Kind
    if args.absent(_OPTIONAL):
        modifiers, kind = NO_MODIFIERS, "ability"
    else:
        modifiers = read_modifiers(args)
        kind = args.string("kind", "ability", choices=KINDS)
    args.finish()

    first = rng.roll(10)
    second = rng.roll(10)
    natural = first + second
    outcome = power_outcome(
        natural,
        characteristic,
        modifiers.edges,
        modifiers.banes,
        modifiers.bonus,
        modifiers.auto_tiers,
        modifiers.downgrade_to,
        kind,
    )
    terms = formula_terms(characteristic, modifiers.bonus, outcome.edge_state)
    label = "Ability roll" if kind == "ability" else "Test"
    steps = tier_steps(outcome, modifiers.auto_tiers)
    total = outcome.total
    faces = (first, second)
    # The fields of rules.result.make_result, in its order, written out: this is the hottest resolver
    # and a call with a dozen keyword arguments cost as much as the rest of the roll.
    return {
        "system": SYSTEM,
        "dice": [{"faces": 10, "value": first, "kept": True}, {"faces": 10, "value": second, "kept": True}],
        "total": total,
        "formula": "".join(terms),
        "text": f"{label}: {shown(terms, faces)} = {total}, {', '.join(steps)}",
        "kind": kind,
        "natural": natural,
        "edge_state": outcome.edge_state,
        "tier_rolled": outcome.tier_rolled,
        "tier": outcome.tier,
        "critical": outcome.critical,
        "automatic": outcome.automatic,
        "automatic_cancelled": outcome.automatic_cancelled,
        "downgraded": outcome.downgraded,
    }
