"""Tier entries of an ability's power roll (``"7 + M or A fire damage; slowed (save ends)"``).

An entry is damage, damage then ``;`` and an effect, or an effect alone. The damage part is dice
(``2d6``), numbers and at most one characteristic group (``M``, ``M or A``, ``M, A, or R``) joined by
``+``, an optional damage type, and the word ``damage``. ``parse_entry`` reads one entry (pure, no dice
rolled: a bad dice term is refused here); the resolver rolls an entry's dice once (``roll_entry_dice``)
and ``evaluate_damage`` turns the damage part into a number for the characteristic chosen.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from rules.dice.parser import parse
from rules.dice.text import describe
from rules.errors import RulesError
from rules.result import signed
from rules.rng import Dice
from rules.systems.damage import DamageRoll, check_damage, roll_damage

LETTERS = ("M", "A", "R", "I", "P")
DAMAGE_TYPES = ("acid", "cold", "corruption", "fire", "holy", "lightning", "poison", "psychic", "sonic")
MAX_NUMBER = 1000

_LETTER_SPLIT = re.compile(r"\s*,\s*(?:or\s+)?|\s+or\s+")
_DICE = re.compile(r"\d*d\d+", re.IGNORECASE)
_DAMAGE_WORD = re.compile(r"\bdamage\b", re.IGNORECASE)
_HOW = "write damage like '3 + M damage' or '7 + M or A fire damage', with effects after a ';'"


@dataclass(frozen=True)
class DamageExpr:
    """The damage part of an entry: ``dice`` (a formula such as ``2d6``, or None) plus ``flat`` plus one
    of ``letters`` (none, one, or a choice)."""

    flat: int
    letters: tuple[str, ...]
    damage_type: str | None
    dice: str | None = None

    @property
    def offers_choice(self) -> bool:
        return len(self.letters) > 1


@dataclass(frozen=True)
class TierEntry:
    tier: int
    text: str
    damage: DamageExpr | None
    effect: str | None


@dataclass(frozen=True)
class Damage:
    """Evaluated damage: the amount (never below 0), how it was made, and the same with the faces rolled
    (``2d6 (3, 5) + 2 (M)``; equal to ``formula`` when the entry has no dice)."""

    amount: int
    formula: str
    shown: str


def parse_entry(where: str, tier: int, text: str) -> TierEntry:
    """Read one tier entry; ``where`` names it in errors ("drawsteel.ability argument 'tiers' item 2")."""
    stripped = text.strip()
    head, _, tail = stripped.partition(";")
    words = head.split()
    if not words:
        # "; push 1": nothing before the ';' means there is no damage, only the effect.
        if not tail.strip():
            raise RulesError("bad_value", f"{where} is empty; give the tier's damage, its effect, or both.")
        return TierEntry(tier, stripped, None, tail.strip())
    starts_like_damage = (
        head[:1].isdigit() or words[0].rstrip(",") in LETTERS or _DICE.fullmatch(words[0]) is not None
    )
    if words[-1].lower() != "damage":
        if starts_like_damage and _DAMAGE_WORD.search(head):
            raise _unreadable(where, stripped, "the damage must end with the word 'damage'")
        return TierEntry(tier, stripped, None, stripped)
    if not starts_like_damage:
        if all(word.lower() in DAMAGE_TYPES for word in words[:-1]):
            raise _unreadable(where, stripped, "there is no amount before 'damage'")
        # Prose that happens to end in "damage" ("the target takes no damage") is an effect.
        return TierEntry(tier, stripped, None, stripped)
    return TierEntry(tier, stripped, _parse_damage(where, stripped, words[:-1]), tail.strip() or None)


def _parse_damage(where: str, entry: str, body: list[str]) -> DamageExpr:
    damage_type: str | None = None
    last = body[-1]
    if last.isalpha() and not (len(last) == 1 and last.isupper()) and last.lower() != "or":
        word = body.pop()
        if word.upper() in LETTERS:
            raise _unreadable(where, entry, f"characteristic letters are capitals ({', '.join(LETTERS)})")
        if word.lower() not in DAMAGE_TYPES:
            raise _unreadable(
                where, entry, f"'{word}' is not a damage type; the types are {', '.join(DAMAGE_TYPES)}"
            )
        damage_type = word.lower()
    if not body:
        raise _unreadable(where, entry, "there is no amount before 'damage'")
    flat = 0
    letters: tuple[str, ...] = ()
    dice: list[str] = []
    for term in (t.strip() for t in " ".join(body).split("+")):
        if term.isdecimal():
            number = int(term)
            if number > MAX_NUMBER:
                raise _unreadable(where, entry, f"numbers in damage may be at most {MAX_NUMBER}")
            flat += number
        elif _DICE.fullmatch(term):
            dice.append(term.lower())
        else:
            group = tuple(_LETTER_SPLIT.split(term))
            if not term or not all(letter in LETTERS for letter in group):
                raise _unreadable(where, entry, f"cannot read '{term}'")
            if letters:
                raise _unreadable(where, entry, "give at most one characteristic (or one 'X or Y' choice)")
            if len(set(group)) != len(group):
                raise _unreadable(where, entry, f"'{term}' names a characteristic twice")
            letters = group
    formula = None
    if dice:
        formula = " + ".join(dice)
        # The dice engine's own limits (faces, dice per formula) apply; refuse here, before any roll.
        check_damage(f"{where} ({entry!r})", formula)
        formula = parse(formula, "foundry").formula  # as the engine writes it: "d8" is "1d8"
    return DamageExpr(flat, letters, damage_type, formula)


def _unreadable(where: str, entry: str, why: str) -> RulesError:
    return RulesError("bad_value", f"{where} ({entry!r}) cannot be read: {why}; {_HOW}.")


def choose_letter(expr: DamageExpr, characteristics: Mapping[str, int], choose: str | None) -> str | None:
    """The characteristic an entry adds: its only letter, ``choose`` among a choice, else the highest.

    Ties go to the letter written first. ``choose`` must already be checked against the entry's letters.
    """
    if not expr.letters:
        return None
    if choose is not None and choose in expr.letters:
        return choose
    return max(expr.letters, key=lambda letter: (characteristics[letter], -expr.letters.index(letter)))


def roll_entry_dice(entry: TierEntry, rng: Dice) -> DamageRoll | None:
    """Roll the dice of ``entry``'s damage once (None when it has none); each die is marked with the tier.

    Draw Steel makes one roll for an ability however many creatures it targets, so the resolver rolls an
    entry's dice the first time a target lands on that tier and every target on the same tier shares it.
    """
    if entry.damage is None or entry.damage.dice is None:
        return None
    rolled = roll_damage(entry.damage.dice, rng)
    for die in rolled.dice:
        die["tier"] = entry.tier
    return rolled


def evaluate_damage(
    expr: DamageExpr,
    letter: str | None,
    characteristics: Mapping[str, int],
    rolled: DamageRoll | None = None,
) -> Damage:
    """The damage ``expr`` deals when ``letter`` is the characteristic added (damage is never negative).

    ``rolled`` is the entry's dice, rolled once by ``roll_entry_dice`` (None when the entry has none).
    """
    raw = expr.flat
    parts: list[str] = []
    shown: list[str] = []
    if rolled is not None:
        assert expr.dice is not None
        raw += rolled.amount
        parts.append(expr.dice)
        shown.append(describe(rolled.terms))
    if expr.flat or (letter is None and rolled is None):
        parts.append(str(expr.flat))
        shown.append(str(expr.flat))
    if letter is not None:
        value = characteristics[letter]
        raw += value
        added = f"{value} ({letter})"
        if parts:
            added = f"{signed(value) or ' + 0'} ({letter})"
        parts.append(added)
        shown.append(added)
    formula = _join(parts)
    text = _join(shown)
    if raw < 0:
        return Damage(0, f"{formula} (at least 0)", f"{text} (at least 0)")
    return Damage(raw, formula, text)


def _join(parts: list[str]) -> str:
    """``["2d6", "3", " + 2 (M)"]`` -> ``2d6 + 3 + 2 (M)``: parts after the first join with `` + ``
    unless they already carry their sign."""
    out = parts[0]
    for part in parts[1:]:
        out += part if part.startswith(" ") else f" + {part}"
    return out
