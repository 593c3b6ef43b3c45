"""``nexus.test``: a Nexus RPG skill test (seed 004).

Attribute die + 1d6 + skill rank (+ bonus) against a Target Number, 8 unless told otherwise. Boons and
banes cancel one for one; any left over roll a second d6 and keep the higher (boons) or lower (banes),
and each one beyond the first adds +1 or -1. The success level comes from the difference to the TN,
using the seed's table (errata: weak is 0 to 2 above, not "exact or one above").
"""

from __future__ import annotations

from rules.args import Args
from rules.errors import RulesError
from rules.registry import system
from rules.result import Die, Result, signed
from rules.rng import Dice

#: name -> (faces rolled, adjustment added to the face)
ATTRIBUTE_DICE: dict[str, tuple[int, int]] = {
    "d4-1": (4, -1),
    "d4": (4, 0),
    "d6": (6, 0),
    "d8": (8, 0),
    "d10": (10, 0),
    "d12": (12, 0),
    "d12+1": (12, 1),
}

DIFFICULTIES: dict[str, int] = {
    "trivial": 4,
    "easy": 6,
    "medium": 8,
    "hard": 10,
    "very_hard": 12,
    "extreme": 14,
    "legendary": 16,
}

SKILL_TYPES = ("general", "combat", "expert", "magic")
RANK_MAX = 20
BOONS_MAX = 20
BONUS_LIMIT = 100
TN_MAX = 100

SUCCESS_LEVELS = ("blunder", "failure", "weak", "strong", "critical")
_LEVEL_TEXT = {
    "blunder": "blunder",
    "failure": "failure",
    "weak": "weak success",
    "strong": "strong success",
    "critical": "critical success",
}


def success_level(difference: int) -> str:
    """The seed's table: -6 or lower blunder, -5..-1 failure, 0..2 weak, 3..5 strong, 6+ critical."""
    if difference <= -6:
        return "blunder"
    if difference < 0:
        return "failure"
    if difference <= 2:
        return "weak"
    if difference <= 5:
        return "strong"
    return "critical"


def boon_modifier(net: int) -> int:
    """+1 per boon beyond the first, -1 per bane beyond the first (``net`` = boons - banes)."""
    if net > 1:
        return net - 1
    if net < -1:
        return net + 1
    return 0


def attribute_value(name: str, face: int) -> int:
    """The attribute die's face with its adjustment; d4-1 runs 0..3 (a 1 gives 0, never less)."""
    adjust = ATTRIBUTE_DICE[name][1]
    return max(0, face + adjust)


def _attribute_formula(name: str) -> str:
    faces, adjust = ATTRIBUTE_DICE[name]
    return f"(1d{faces}{signed(adjust)})" if adjust else f"1d{faces}"


_ATTRIBUTE_NAMES = tuple(ATTRIBUTE_DICE)
_DIFFICULTY_NAMES = tuple(DIFFICULTIES)
#: Every argument but the attribute die and the rank: when none is given, the defaults apply.
_OPTIONAL = ("tn", "difficulty", "boons", "banes", "skill_type", "trained", "bonus")
#: "(1d4 - 1)", "1d8", ... for each attribute die.
_ATTRIBUTE_FORMULA = {name: _attribute_formula(name) for name in ATTRIBUTE_DICE}


def _read_tn(args: Args) -> int:
    if args.has("tn") and args.has("difficulty"):
        raise RulesError(
            "bad_value",
            f"{args.system} takes either 'tn' or 'difficulty', not both; give the number or the name.",
        )
    if args.has("tn"):
        tn: int = args.integer("tn", lo=1, hi=TN_MAX)
        return tn
    name: str = args.string("difficulty", "medium", choices=_DIFFICULTY_NAMES)
    return DIFFICULTIES[name]


@system(
    "nexus.test", "Nexus RPG skill test: attribute die + d6 + skill rank against a TN, with boons and banes."
)
def skill_test(args: Args, rng: Dice) -> Result:
    attribute: str = args.string("attribute_die", choices=_ATTRIBUTE_NAMES)
    rank: int = args.integer("skill_rank", 0, lo=0, hi=RANK_MAX)
    if args.absent(_OPTIONAL):
        tn, boons, banes, bonus, skill_type, trained = DIFFICULTIES["medium"], 0, 0, 0, "general", True
    else:
        tn = _read_tn(args)
        boons = args.integer("boons", 0, lo=0, hi=BOONS_MAX)
        banes = args.integer("banes", 0, lo=0, hi=BOONS_MAX)
        skill_type = args.string("skill_type", "general", choices=SKILL_TYPES)
        trained = args.boolean("trained", True)
        bonus = args.integer("bonus", 0, lo=-BONUS_LIMIT, hi=BONUS_LIMIT)
    args.finish()

    if not trained and skill_type == "magic":
        raise RulesError(
            "not_allowed",
            f"{args.system}: an untrained magic skill cannot be rolled at all; train the skill first "
            "(untrained general skills roll normally, untrained combat and expert skills take a bane).",
        )
    untrained_bane = not trained and skill_type in {"combat", "expert"}
    net = boons - (banes + (1 if untrained_bane else 0))

    faces, adjust = ATTRIBUTE_DICE[attribute]
    face = rng.roll(faces)
    value = max(0, face + adjust)  # attribute_value(), inlined
    # rules.result.die's shape, written out: faces, value, kept, role.
    dice: list[Die] = [{"faces": faces, "value": face, "kept": True, "role": "attribute"}]

    first = rng.roll(6)
    if net == 0:
        d6 = [first]
        d6_used = first
        dice.append({"faces": 6, "value": first, "kept": True, "role": "d6"})
    else:
        second = rng.roll(6)
        d6 = [first, second]
        d6_used = max(first, second) if net > 0 else min(first, second)
        # On a tie the first d6 counts, so exactly one d6 is ever kept.
        first_used = first == d6_used
        dice.append({"faces": 6, "value": first, "kept": first_used, "role": "d6"})
        dice.append({"faces": 6, "value": second, "kept": not first_used, "role": "d6"})

    modifier = boon_modifier(net) if net else 0
    total = value + d6_used + rank + modifier + bonus
    difference = total - tn
    level = success_level(difference)

    d6_formula = "1d6" if net == 0 else ("2d6kh" if net > 0 else "2d6kl")
    formula = f"{_ATTRIBUTE_FORMULA[attribute]} + {d6_formula}"
    if rank:
        formula += f" + {rank} (skill)"
    if modifier:
        formula += signed(modifier) + (" (boons)" if modifier > 0 else " (banes)")
    if bonus:
        formula += signed(bonus) + " (bonus)"

    text = f"Nexus test {total} vs TN {tn}: {_LEVEL_TEXT[level]} ({difference:+d})"
    if net:
        text += f", {abs(net)} {'boon' if net > 0 else 'bane'}{'s' if abs(net) > 1 else ''}"
    if untrained_bane:
        text += ", untrained (+1 bane)"
    text += "."

    # rules.result.make_result's fields in its order, written out (no effects or requires here).
    return {
        "system": "nexus.test",
        "dice": dice,
        "total": total,
        "formula": formula,
        "text": text,
        "attribute_die": attribute,
        "attribute_value": value,
        "d6": d6,
        "d6_used": d6_used,
        "net_boons": net,
        "boon_modifier": modifier,
        "skill_rank": rank,
        "bonus": bonus,
        "tn": tn,
        "difference": difference,
        "success_level": level,
        "success": difference >= 0,
    }
