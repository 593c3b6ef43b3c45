"""Tier entries of an ability's power roll (``"7 + M or A fire damage; slowed (save ends)"``).

An entry is damage, damage then ``;`` and an effect, or an effect alone. The damage part is numbers and
at most one characteristic group (``M``, ``M or A``, ``M, A, or R``) joined by ``+``, an optional damage
type, and the word ``damage``. ``parse_entry`` reads one entry (pure, no dice); ``evaluate_damage`` turns
the damage part into a number for the characteristic chosen.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from rules.errors import RulesError
from rules.result import Die, signed
from rules.rng import Dice

LETTERS = ("M", "A", "R", "I", "P")
DAMAGE_TYPES = ("acid", "cold", "corruption", "fire", "holy", "lightning", "poison", "psychic", "sonic")
MAX_NUMBER = 1000

_LETTER_SPLIT = re.compile(r"\s*,\s*(?:or\s+)?|\s+or\s+")
_DICE = re.compile(r"\d*d\d+", re.IGNORECASE)
_DAMAGE_WORD = re.compile(r"\bdamage\b", re.IGNORECASE)
_HOW = "write damage like '3 + M damage' or '7 + M or A fire damage', with effects after a ';'"


@dataclass(frozen=True)
class DamageExpr:
    """The damage part of an entry: ``flat`` plus one of ``letters`` (none, one, or a choice)."""

    flat: int
    letters: tuple[str, ...]
    damage_type: str | None

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
    """Evaluated damage: the amount (never below 0), how it was made, and any dice it rolled."""

    amount: int
    formula: str
    dice: list[Die]


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
    starts_like_damage = head[:1].isdigit() or words[0].rstrip(",") in LETTERS
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
    for term in (t.strip() for t in " ".join(body).split("+")):
        if term.isdecimal():
            number = int(term)
            if number > MAX_NUMBER:
                raise _unreadable(where, entry, f"numbers in damage may be at most {MAX_NUMBER}")
            flat += number
        elif _DICE.fullmatch(term):
            # Seam for the dice-notation engine: once rules.dice.evaluate exists, keep the dice term in
            # DamageExpr and roll it in evaluate_damage instead of refusing it here.
            raise _unreadable(where, entry, f"dice in tier entries ('{term}') are not supported yet")
        else:
            group = tuple(_LETTER_SPLIT.split(term))
            if not term or not all(letter in LETTERS for letter in group):
                raise _unreadable(where, entry, f"cannot read '{term}'")
            if letters:
                raise _unreadable(where, entry, "give at most one characteristic (or one 'X or Y' choice)")
            if len(set(group)) != len(group):
                raise _unreadable(where, entry, f"'{term}' names a characteristic twice")
            letters = group
    return DamageExpr(flat, letters, damage_type)


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


def evaluate_damage(
    expr: DamageExpr,
    letter: str | None,
    characteristics: Mapping[str, int],
    rng: Dice,  # noqa: ARG001  (kept for dice terms, which will roll here)
) -> Damage:
    """The damage ``expr`` deals when ``letter`` is the characteristic added (damage is never negative)."""
    formula = str(expr.flat) if expr.flat or letter is None else ""
    raw = expr.flat
    if letter is not None:
        value = characteristics[letter]
        raw += value
        added = f"{signed(value) or ' + 0'} ({letter})"
        formula = f"{formula}{added}" if formula else f"{value} ({letter})"
    if raw < 0:
        return Damage(0, f"{formula} (at least 0)", [])
    return Damage(raw, formula, [])
