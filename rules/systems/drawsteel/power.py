"""``drawsteel.power``: a bare power roll (an ability roll or a test) with its tier."""

from __future__ import annotations

from rules.args import Args
from rules.registry import system
from rules.result import Result, die, make_result
from rules.rng import Dice, roll_many
from rules.systems.drawsteel.inputs import read_characteristic, read_modifiers
from rules.systems.drawsteel.outcome import Kind, power_outcome
from rules.systems.drawsteel.wording import formula_terms, rolled, tier_steps

SYSTEM = "drawsteel.power"
KINDS: tuple[Kind, ...] = ("ability", "test")


def roll_2d10(rng: Dice) -> list[int]:
    """The two d10s of a power roll."""
    return roll_many(rng, 10, 2)


@system(SYSTEM, "Draw Steel power roll: 2d10 + characteristic, edges and banes, tiers 1-3")
def resolve_power(args: Args, rng: Dice) -> Result:
    characteristic = read_characteristic(args, "characteristic")
    modifiers = read_modifiers(args)
    kind: Kind = args.string("kind", "ability", choices=KINDS)
    args.finish()

    faces = roll_2d10(rng)
    outcome = power_outcome(
        sum(faces),
        characteristic,
        edges=modifiers.edges,
        banes=modifiers.banes,
        bonus=modifiers.bonus,
        auto_tiers=modifiers.auto_tiers,
        downgrade_to=modifiers.downgrade_to,
        kind=kind,
    )
    terms = formula_terms(characteristic, modifiers.bonus, outcome.edge_state)
    label = "Ability roll" if kind == "ability" else "Test"
    steps = ", ".join(tier_steps(outcome, modifiers.auto_tiers))
    return make_result(
        SYSTEM,
        [die(10, face) for face in faces],
        outcome.total,
        "".join(terms),
        f"{label}: {rolled(terms, faces, outcome.total)}, {steps}",
        kind=kind,
        natural=outcome.natural,
        edge_state=outcome.edge_state,
        tier_rolled=outcome.tier_rolled,
        tier=outcome.tier,
        critical=outcome.critical,
        automatic=outcome.automatic,
        automatic_cancelled=outcome.automatic_cancelled,
        downgraded=outcome.downgraded,
    )
