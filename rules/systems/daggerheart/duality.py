"""``daggerheart.duality``: a player's action roll with the Duality dice (Daggerheart SRD).

A Hope d12 and a Fear d12 are added with the modifier. Matching dice are a critical success; otherwise
the higher die says whether the result is "with Hope" or "with Fear", which gives the roller a Hope or
the GM a Fear. Advantage adds a d6, disadvantage subtracts one; they cancel one for one and the
remainder only decides the sign, so there is never more than one such die.
"""

from __future__ import annotations

from typing import Any

from rules.args import Args
from rules.registry import system
from rules.result import Result, die, signed
from rules.rng import Dice
from rules.systems.daggerheart.spending import NOTHING_SPENT, read_spend

MODIFIER_LIMIT = 100
DIFFICULTY_MAX = 100
ADVANTAGE_MAX = 20

#: Every argument but the modifier: when none is given, the defaults apply without reading each.
_OPTIONAL = ("difficulty", "advantage", "disadvantage", "experience", "spend_hope", "reaction")
_WITH_TEXT = {"hope": " with Hope", "fear": " with Fear", "critical": ", critical success"}


def duality_outcome(hope: int, fear: int) -> str:
    """``critical`` on matching dice, else whichever die is higher."""
    if hope == fear:
        return "critical"
    return "hope" if hope > fear else "fear"


def generated(outcome: str, *, reaction: bool) -> list[dict[str, Any]]:
    """The resource the roll itself generates: none on a reaction roll."""
    if reaction:
        return []
    if outcome == "fear":
        return [{"resource": "fear", "delta": 1}]
    return [{"resource": "hope", "delta": 1}]


@system(
    "daggerheart.duality",
    "Daggerheart action roll: Hope d12 + Fear d12 + modifier against a difficulty; with Hope, with Fear "
    "or critical.",
)
def duality(args: Args, rng: Dice) -> Result:
    modifier: int = args.integer("modifier", 0, lo=-MODIFIER_LIMIT, hi=MODIFIER_LIMIT)
    difficulty: int | None
    reaction: bool
    if args.absent(_OPTIONAL):
        difficulty, advantage, disadvantage, spend, reaction = None, 0, 0, NOTHING_SPENT, False
    else:
        difficulty = args.integer("difficulty", None, lo=0, hi=DIFFICULTY_MAX)
        advantage = args.integer("advantage", 0, lo=0, hi=ADVANTAGE_MAX)
        disadvantage = args.integer("disadvantage", 0, lo=0, hi=ADVANTAGE_MAX)
        spend = read_spend(args, "spend_hope", "hope")
        reaction = args.boolean("reaction", False)
    args.finish()

    hope = rng.roll(12)
    fear = rng.roll(12)
    dice = [
        {"faces": 12, "value": hope, "kept": True, "role": "hope"},
        {"faces": 12, "value": fear, "kept": True, "role": "fear"},
    ]
    formula = "1d12 (hope) + 1d12 (fear)"

    net = advantage - disadvantage
    advantage_die: int | None = None
    if net != 0:
        face = rng.roll(6)
        role = "advantage" if net > 0 else "disadvantage"
        advantage_die = face if net > 0 else -face
        dice.append(die(6, face, role=role))
        formula += f" {'+' if net > 0 else '-'} 1d6 ({role})"

    total = hope + fear + (advantage_die or 0) + modifier + spend.bonus
    if modifier:
        formula += signed(modifier)
    if spend.resource is not None:
        formula += spend.formula()

    outcome = duality_outcome(hope, fear)
    success: bool | None = None
    if outcome == "critical":
        success = True
    elif difficulty is not None:
        success = total >= difficulty

    kind = "Reaction roll" if reaction else "Duality roll"
    text = f"{kind} {total}{_WITH_TEXT[outcome]} (Hope {hope}, Fear {fear}"
    if advantage_die is not None:
        text += f", {'advantage' if advantage_die > 0 else 'disadvantage'} {abs(advantage_die)}"
    text += ")"
    if difficulty is not None:
        text += f" vs difficulty {difficulty}: {'success' if success else 'failure'}"
    if spend.resource is not None:
        text += f"; spent 1 Hope for +{spend.experience} experience"
    text += "."

    # rules.result.make_result's fields in its order, written out because this resolver is hot: the
    # promised fields, the system's own, then effects and requires only when there are any.
    result: Result = {
        "system": "daggerheart.duality",
        "dice": dice,
        "total": total,
        "formula": formula,
        "text": text,
        "hope_die": hope,
        "fear_die": fear,
        "advantage_die": advantage_die,
        "with": outcome,
        "modifier": modifier,
        "experience": spend.bonus,
        "difficulty": difficulty,
        "reaction": reaction,
        "success": success,
    }
    effects = generated(outcome, reaction=reaction)
    if spend.resource is not None:
        effects = spend.effects() + effects
        result["effects"] = effects
        result["requires"] = spend.requires()
    elif effects:
        result["effects"] = effects
    return result
