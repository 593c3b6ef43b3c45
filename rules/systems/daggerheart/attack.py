"""``daggerheart.attack``: an adversary's attack roll (seed 001).

One d20 plus the attack modifier, compared with the Evasion of every target. Advantage or
disadvantage rolls a second d20 and keeps the higher or lower; having both cancels. The GM may spend a
Fear to add the adversary's Experience. A natural at or above the critical threshold always hits and is
critical (Daggerheart SRD: an adversary's natural 20).

Damage is not rolled here yet. When the dice-notation engine offers a formula evaluator, a ``damage``
argument belongs in ``attack`` after ``target_outcomes``: read it before ``args.finish()``, roll it once
if any target is hit, and on a critical add the formula's maximum dice value to it. Nothing else in this
module has to change for that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rules.args import Args, check_int, type_name
from rules.errors import RulesError
from rules.registry import system
from rules.result import Result, die, make_result, signed
from rules.rng import Dice
from rules.systems.daggerheart.spending import read_spend

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
    if spend.resource is not None:
        text += f"; spent 1 Fear for +{spend.experience} experience"
    text += "."

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
    )
