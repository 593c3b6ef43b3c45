"""``drawsteel.ability``: one power roll for an ability, read against its three tier entries per target."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rules.args import Args, check_int, type_name
from rules.errors import RulesError
from rules.registry import system
from rules.result import Result, die, make_result
from rules.rng import Dice
from rules.systems.damage import DamageRoll
from rules.systems.drawsteel.inputs import CHARACTERISTIC_RANGE, Modifiers, read_modifiers
from rules.systems.drawsteel.outcome import power_outcome
from rules.systems.drawsteel.power import roll_2d10
from rules.systems.drawsteel.tier_entry import (
    LETTERS,
    TierEntry,
    choose_letter,
    evaluate_damage,
    parse_entry,
    roll_entry_dice,
)
from rules.systems.drawsteel.wording import formula_terms, rolled, shown, tier_steps

SYSTEM = "drawsteel.ability"
MAX_TARGETS = 50
MAX_ENTRY_LEN = 300
MAX_NAME_LEN = 100


@dataclass(frozen=True)
class Target:
    name: str | None
    modifiers: Modifiers


@dataclass(frozen=True)
class Roll:
    """What every target shares: the faces, the characteristic used, the entries and the damage choice."""

    faces: list[int]
    letter: str
    value: int
    characteristics: Mapping[str, int]
    entries: list[TierEntry]
    choose: str | None

    @property
    def natural(self) -> int:
        return sum(self.faces)


@system(SYSTEM, "Draw Steel ability roll: one 2d10 power roll read against tier entries for each target")
def resolve_ability(args: Args, rng: Dice) -> Result:
    characteristics = _read_characteristics(args)
    roll_with = _read_roll_with(args)
    entries = _read_tiers(args)
    choose: str | None = args.string("choose", None, choices=LETTERS)
    shared = read_modifiers(args)
    targets = _read_targets(args)
    args.finish()
    _check_letters(args, characteristics, roll_with, entries, choose)

    # Ties keep the letter listed first, so the result names a predictable characteristic.
    letter = max(roll_with, key=lambda c: (characteristics[c], -roll_with.index(c)))
    roll = Roll(roll_2d10(rng), letter, characteristics[letter], characteristics, entries, choose)
    # One damage roll per tier entry, made when the first target lands on that tier and shared by every
    # target on it: Draw Steel rolls once for an ability, whatever it targets.
    damage_rolls: dict[int, DamageRoll | None] = {}
    resolved = [
        _resolve_target(roll, target, shared.plus(target.modifiers), rng, damage_rolls) for target in targets
    ]
    reports = [r.report for r in resolved]
    first = reports[0]
    # The power roll's d10s come first, then the damage dice in the order they were rolled.
    dice = [die(10, face) for face in roll.faces]
    for entry_roll in damage_rolls.values():
        if entry_roll is not None:
            dice += entry_roll.dice
    return make_result(
        SYSTEM,
        dice,
        first["total"],
        first["formula"],
        _summary(roll, resolved),
        natural=roll.natural,
        roll_with=letter,
        characteristic=roll.value,
        critical=first["critical"],
        targets=reports,
    )


@dataclass(frozen=True)
class Resolved:
    """A target's part of the result, with its formula terms and tier steps for the summary line."""

    report: dict[str, Any]
    terms: list[str]
    steps: list[str]
    damage_shown: str | None


def _resolve_target(
    roll: Roll, target: Target, mods: Modifiers, rng: Dice, damage_rolls: dict[int, DamageRoll | None]
) -> Resolved:
    """One target's outcome: its own total, tier, damage and effect from the shared roll."""
    outcome = power_outcome(
        roll.natural,
        roll.value,
        edges=mods.edges,
        banes=mods.banes,
        bonus=mods.bonus,
        auto_tiers=mods.auto_tiers,
        downgrade_to=mods.downgrade_to,
        kind="ability",
    )
    entry = roll.entries[outcome.tier - 1]
    terms = formula_terms(roll.value, mods.bonus, outcome.edge_state, letter=roll.letter)
    report: dict[str, Any] = {
        "name": target.name,
        "total": outcome.total,
        "formula": "".join(terms),
        "edge_state": outcome.edge_state,
        "tier_rolled": outcome.tier_rolled,
        "tier": outcome.tier,
        "critical": outcome.critical,
        "automatic": outcome.automatic,
        "automatic_cancelled": outcome.automatic_cancelled,
        "downgraded": outcome.downgraded,
        "entry": entry.text,
        "damage": None,
        "damage_type": None,
        "damage_formula": None,
        "effect": entry.effect,
    }
    damage_shown: str | None = None
    if entry.damage is not None:
        if entry.tier not in damage_rolls:
            damage_rolls[entry.tier] = roll_entry_dice(entry, rng)
        letter = choose_letter(entry.damage, roll.characteristics, roll.choose)
        damage = evaluate_damage(entry.damage, letter, roll.characteristics, damage_rolls[entry.tier])
        if entry.damage.dice is not None:
            damage_shown = damage.shown
        report.update(
            damage=damage.amount, damage_type=entry.damage.damage_type, damage_formula=damage.formula
        )
    return Resolved(report, terms, tier_steps(outcome, mods.auto_tiers), damage_shown)


def _outcome_text(resolved: Resolved) -> str:
    report = resolved.report
    parts = []
    if report["damage"] is not None:
        kind = f"{report['damage_type']} damage" if report["damage_type"] else "damage"
        # Rolled damage shows its dice: "11 fire damage (2d6 (3, 5) + 3 (M))".
        how = f" ({resolved.damage_shown})" if resolved.damage_shown is not None else ""
        parts.append(f"{report['damage']} {kind}{how}")
    if report["effect"]:
        parts.append(report["effect"])
    return "; ".join(parts)


def _summary(roll: Roll, resolved: Sequence[Resolved]) -> str:
    """One line: the roll, then each target's total, tier steps and outcome."""
    if len(resolved) == 1 and resolved[0].report["name"] is None:
        only = resolved[0]
        line = rolled(only.terms, roll.faces, only.report["total"])
        return f"Ability roll: {line}, {', '.join(only.steps)}: {_outcome_text(only)}"
    # Every target shares the dice and the characteristic (the first two terms); the rest is its own.
    lines = [f"Ability roll: {shown(resolved[0].terms[:2], roll.faces)}"]
    for n, r in enumerate(resolved, 1):
        label = r.report["name"] if r.report["name"] is not None else f"target {n}"
        own = "".join(r.terms[2:])
        lines.append(f"{label}{own} = {r.report['total']}, {', '.join(r.steps)}: {_outcome_text(r)}")
    return " | ".join(lines)


def _read_characteristics(args: Args) -> dict[str, int]:
    raw: dict[object, object] = args.mapping("characteristics")
    where = args.where("characteristics")
    lo, hi = CHARACTERISTIC_RANGE
    values: dict[str, int] = {}
    for key, value in raw.items():
        if key not in LETTERS:
            raise RulesError(
                "bad_value", f"{where} has a key {key!r}; its keys are the letters {', '.join(LETTERS)}."
            )
        assert isinstance(key, str)
        values[key] = check_int(f"{where} '{key}'", value, lo=lo, hi=hi)
    return values


def _read_roll_with(args: Args) -> list[str]:
    raw = args.raw("roll_with")
    where = args.where("roll_with")
    letters = [raw] if isinstance(raw, str) else raw
    allowed = ", ".join(LETTERS)
    if not isinstance(letters, list | tuple) or not letters:
        raise RulesError(
            "bad_type", f"{where} must be a letter ({allowed}) or a list of them; got {type_name(raw)}."
        )
    if len(letters) > len(LETTERS):
        raise RulesError("limit", f"{where} may list at most {len(LETTERS)} letters; got {len(letters)}.")
    for letter in letters:
        if letter not in LETTERS:
            shown = repr(letter) if isinstance(letter, str) else type_name(letter)
            raise RulesError("bad_value", f"{where} must use the letters {allowed}; got {shown}.")
    return [str(letter) for letter in letters]


def _read_tiers(args: Args) -> list[TierEntry]:
    raw: list[object] = args.items("tiers", max_len=10)
    where = args.where("tiers")
    if len(raw) != 3:
        raise RulesError(
            "bad_value", f"{where} must hold exactly 3 entries (tiers 1, 2 and 3); got {len(raw)}."
        )
    entries = []
    for tier, text in enumerate(raw, 1):
        item = f"{where} item {tier}"
        if not isinstance(text, str):
            raise RulesError("bad_type", f"{item} must be a string; got {type_name(text)}.")
        if len(text) > MAX_ENTRY_LEN:
            raise RulesError("limit", f"{item} may be at most {MAX_ENTRY_LEN} characters long.")
        entries.append(parse_entry(item, tier, text))
    return entries


def _read_targets(args: Args) -> list[Target]:
    raw: list[object] | None = args.items("targets", None, max_len=MAX_TARGETS)
    if raw is None:
        return [Target(None, Modifiers())]
    where = args.where("targets")
    if not raw:
        raise RulesError("bad_value", f"{where} must list at least one target; leave it out for one target.")
    targets = []
    for n, item in enumerate(raw, 1):
        label = f"{where} item {n}"
        if not isinstance(item, Mapping):
            raise RulesError("bad_type", f"{label} must be a map; got {type_name(item)}.")
        odd = [k for k in item if not isinstance(k, str) or k == "system"]
        if odd:
            raise RulesError(
                "unknown_argument",
                f"{label} has the key {odd[0]!r}; a target takes name, edges, banes, bonus, auto_tiers "
                "and downgrade_to.",
            )
        target_args = Args(f"{SYSTEM} target {n}", item)
        name: str | None = target_args.string("name", None, max_len=MAX_NAME_LEN)
        modifiers = read_modifiers(target_args)
        target_args.finish()
        targets.append(Target(name, modifiers))
    return targets


def _check_letters(
    args: Args,
    characteristics: Mapping[str, int],
    roll_with: Sequence[str],
    entries: Sequence[TierEntry],
    choose: str | None,
) -> None:
    """Every letter the roll or an entry uses is given, and ``choose`` fits every choice offered."""
    have = args.where("characteristics")
    for letter in roll_with:
        if letter not in characteristics:
            raise RulesError("bad_value", f"{have} has no '{letter}', which 'roll_with' uses.")
    choices = []
    for entry in entries:
        if entry.damage is None:
            continue
        for letter in entry.damage.letters:
            if letter not in characteristics:
                raise RulesError("bad_value", f"{have} has no '{letter}', which tier {entry.tier} uses.")
        if entry.damage.offers_choice:
            choices.append(entry)
    if choose is None:
        return
    where = args.where("choose")
    if not choices:
        raise RulesError(
            "bad_value", f"{where} picks the letter for an 'X or Y' damage, but no tier offers one."
        )
    for entry in choices:
        assert entry.damage is not None
        if choose not in entry.damage.letters:
            offered = " or ".join(entry.damage.letters)
            raise RulesError(
                "bad_value",
                f"{where} is '{choose}', but tier {entry.tier} offers {offered}; pick one of those.",
            )
