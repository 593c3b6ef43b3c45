"""``daggerheart.attack``: an adversary's attack roll (seed 001).

One d20 plus the attack modifier, compared with the Evasion of every target. Advantage or
disadvantage rolls a second d20 and keeps the higher or lower; having both cancels. The GM may spend a
Fear to add the adversary's Experience. A natural at or above the critical threshold always hits and is
critical (Daggerheart SRD: an adversary's natural 20).

An optional ``damage`` formula (Foundry VTT notation, e.g. ``"2d8+3"``) is checked before any die is
rolled and rolled once after the attack when it hits: one roll serves every target hit, as the SRD has
one attack roll serve every target. A critical adds the highest the formula's dice could show (the
SRD's critical damage). With no targets the damage is rolled too, since the GM compares the total with
Evasion at the table; when every target listed is missed nothing is rolled and ``damage`` is null.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rules.args import Args, check_int, type_name
from rules.dice.limits import MAX_FORMULA_LENGTH
from rules.errors import RulesError
from rules.registry import system
from rules.result import Result, die, make_result, signed
from rules.rng import Dice
from rules.systems.daggerheart.spending import read_spend
from rules.systems.damage import DamageRoll, check_damage, roll_damage

MODIFIER_LIMIT = 100
EVASION_MAX = 100
TARGETS_MAX = 50
NAME_MAX = 100


@dataclass(frozen=True)
class Target:
    name: str | None
    evasion: int


def read_targets(args: Args) -> list[Target]:
    """``targets``: a list of ``{"name", "evasion"}`` maps; ``name`` may be left out."""
    raw: list[Any] = args.items("targets", [], max_len=TARGETS_MAX)
    targets: list[Target] = []
    for i, entry in enumerate(raw):
        where = f"{args.system} argument 'targets[{i}]'"
        if not isinstance(entry, Mapping):
            raise RulesError(
                "bad_type",
                f"{where} must be a map with 'evasion' and an optional 'name'; got {type_name(entry)}.",
            )
        unknown = sorted(str(k) for k in entry if k not in {"name", "evasion"})
        if unknown:
            raise RulesError(
                "unknown_argument",
                f"{where} does not take {', '.join(repr(k) for k in unknown)}; "
                "a target has 'name' and 'evasion'.",
            )
        if entry.get("evasion") is None:
            raise RulesError("missing_argument", f"{where} needs an 'evasion'.")
        evasion = check_int(
            f"{args.system} argument 'targets[{i}].evasion'", entry["evasion"], lo=0, hi=EVASION_MAX
        )
        name = entry.get("name")
        if name is not None:
            if not isinstance(name, str):
                raise RulesError(
                    "bad_type",
                    f"{args.system} argument 'targets[{i}].name' must be a string; got {type_name(name)}.",
                )
            if len(name) > NAME_MAX:
                raise RulesError(
                    "limit",
                    f"{args.system} argument 'targets[{i}].name' may be at most {NAME_MAX} characters long.",
                )
        targets.append(Target(name, evasion))
    return targets


def target_outcomes(total: int, critical: bool, targets: list[Target]) -> list[dict[str, Any]]:
    """Each target hit when the total meets its Evasion; a critical hits every target."""
    return [
        {"name": t.name, "evasion": t.evasion, "hit": critical or total >= t.evasion, "critical": critical}
        for t in targets
    ]


def _label(entry: Mapping[str, Any], index: int) -> str:
    name = entry["name"] if entry["name"] else f"target {index + 1}"
    return f"{name} (Evasion {entry['evasion']})"


@system(
    "daggerheart.attack",
    "Daggerheart adversary attack: d20 + attack modifier against each target's Evasion; natural 20 crits.",
)
def attack(args: Args, rng: Dice) -> Result:
    modifier: int = args.integer("modifier", lo=-MODIFIER_LIMIT, hi=MODIFIER_LIMIT)
    advantage: bool = args.boolean("advantage", False)
    disadvantage: bool = args.boolean("disadvantage", False)
    spend = read_spend(args, "spend_fear", "fear")
    targets = read_targets(args)
    crit_threshold: int = args.integer("crit_threshold", 20, lo=1, hi=20)
    damage_formula: str | None = args.string("damage", None, max_len=MAX_FORMULA_LENGTH)
    if damage_formula is not None:
        check_damage(args.where("damage"), damage_formula)
    args.finish()

    mode = "normal"
    if advantage != disadvantage:
        mode = "advantage" if advantage else "disadvantage"

    first = rng.roll(20)
    if mode == "normal":
        natural = first
        dice = [die(20, first)]
        formula = "1d20"
    else:
        second = rng.roll(20)
        natural = max(first, second) if mode == "advantage" else min(first, second)
        # On a tie the first die is the one kept, so exactly one d20 is ever marked dropped.
        keep_first = first == natural
        dice = [die(20, first, kept=keep_first), die(20, second, kept=not keep_first)]
        formula = "2d20kh" if mode == "advantage" else "2d20kl"

    total = natural + modifier + spend.bonus
    formula += signed(modifier) + spend.formula()
    critical = natural >= crit_threshold
    outcomes = target_outcomes(total, critical, targets)
    damage: DamageRoll | None = None
    if damage_formula is not None and (not outcomes or any(o["hit"] for o in outcomes)):
        damage = roll_damage(damage_formula, rng, critical=critical)
        dice += damage.dice

    text = f"Adversary attack {total}"
    if critical:
        text += ", critical"
    text += f" (natural {natural}"
    if mode != "normal":
        text += f", {mode}"
    text += ")"
    if outcomes:
        hits = [_label(o, i) for i, o in enumerate(outcomes) if o["hit"]]
        misses = [_label(o, i) for i, o in enumerate(outcomes) if not o["hit"]]
        parts = []
        if hits:
            parts.append("hits " + ", ".join(hits))
        if misses:
            parts.append("misses " + ", ".join(misses))
        text += ": " + "; ".join(parts)
    if damage is not None:
        text += f"; damage {damage.text}"
    elif damage_formula is not None:
        text += "; no damage"
    if spend.resource is not None:
        text += f"; spent 1 Fear for +{spend.experience} experience"
    text += "."

    extra: dict[str, Any] = {}
    if damage_formula is not None:
        extra["damage"] = None if damage is None else damage.amount
        extra["damage_roll"] = None if damage is None else damage.as_result()
    return make_result(
        "daggerheart.attack",
        dice,
        total,
        formula,
        text,
        effects=spend.effects(),
        requires=spend.requires(),
        natural=natural,
        critical=critical,
        mode=mode,
        modifier=modifier,
        experience=spend.bonus,
        crit_threshold=crit_threshold,
        targets=outcomes,
        **extra,
    )
