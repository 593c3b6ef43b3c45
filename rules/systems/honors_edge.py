"""Honor's Edge: roll-and-keep d10 pools (seed 002 and its errata; see docs/rules/honors_edge.md).

A pool ``XkY`` rolls X ten-sided dice and keeps the Y highest. A 10 explodes: the die is rolled again and
the new face added, for as long as it keeps showing 10, and the whole chain still counts as one die when
choosing which to keep. Pool modifiers ``+XkY`` / ``-XkY`` add or remove rolled and kept dice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from rules.args import Args, check_int
from rules.errors import RulesError
from rules.registry import system
from rules.result import Die, Result
from rules.rng import Dice

FACES = 10
#: Largest number of rolled or kept dice, before and after modifiers.
MAX_DICE = 40
#: Rolls in one explosion chain (the first face included). Reaching it needs 19 tens in a row
#: (probability 1e-19 per die); it bounds a roll at 40 * 20 dice whatever the random source does.
MAX_CHAIN = 20
MAX_MODIFIERS = 20
MAX_BONUS = 1000
MAX_TN = 1000
MAX_ATTRIBUTE = 20
MAX_RANK = 100
MAX_ASSISTS = 50

_POOL = re.compile(r"\s*(\d{1,3})\s*[kK]\s*(\d{1,3})\s*")
_MODIFIER = re.compile(r"\s*([+-])\s*(\d{1,3})\s*[kK]\s*(\d{1,3})\s*")


@dataclass(frozen=True)
class Pool:
    """Rolled and kept dice; either may be negative only as a modifier."""

    rolled: int
    kept: int

    def __add__(self, other: Pool) -> Pool:
        return Pool(self.rolled + other.rolled, self.kept + other.kept)

    def __str__(self) -> str:
        return f"{self.rolled}k{self.kept}"

    def signed(self) -> str:
        """The modifier notation: ``+2k0``, ``-1k1``."""
        if self.rolled < 0 or self.kept < 0:
            return f"-{-self.rolled}k{-self.kept}"
        return f"+{self.rolled}k{self.kept}"


def parse_pool(where: str, text: object) -> Pool:
    """``"5k3"`` as a pool of at most ``MAX_DICE`` rolled and kept dice."""
    if not isinstance(text, str):
        raise RulesError("bad_type", f"{where} must be a string such as '5k3'.")
    pool = _read_pool(text)
    if pool is None:
        raise RulesError("bad_value", f"{where} must be written XkY, such as '5k3'; got {text[:40]!r}.")
    if pool.rolled > MAX_DICE or pool.kept > MAX_DICE:
        raise RulesError("out_of_range", f"{where} may roll and keep at most {MAX_DICE} dice; got {pool}.")
    return pool


@lru_cache(maxsize=1024)
def _read_pool(text: str) -> Pool | None:
    # Cached: players roll the same few pools again and again, and a Pool is immutable.
    match = _POOL.fullmatch(text)
    return None if match is None else Pool(int(match[1]), int(match[2]))


def parse_modifier(where: str, text: object, *, bonus_only: bool = False) -> Pool:
    """``"+2k0"`` / ``"-1k1"`` as a signed pool change (both parts take the sign).

    ``bonus_only`` (weapons) accepts ``+XkY`` or a bare ``XkY`` and refuses a penalty.
    """
    if not isinstance(text, str):
        raise RulesError("bad_type", f"{where} must be a string such as '+2k0' or '-1k1'.")
    if bonus_only and _POOL.fullmatch(text):
        text = "+" + text.strip()
    match = _MODIFIER.fullmatch(text)
    if match is None or (bonus_only and match[1] == "-"):
        shape = "+XkY, such as '+3k0'" if bonus_only else "+XkY or -XkY, such as '+2k0'"
        raise RulesError("bad_value", f"{where} must be written {shape}; got {text[:40]!r}.")
    rolled, kept = int(match[2]), int(match[3])
    if rolled > MAX_DICE or kept > MAX_DICE:
        raise RulesError("out_of_range", f"{where} may change the pool by at most {MAX_DICE} dice.")
    sign = -1 if match[1] == "-" else 1
    return Pool(sign * rolled, sign * kept)


def apply_modifiers(base: Pool, modifiers: Sequence[Pool]) -> Pool:
    """The final pool: modifiers added, then floored at 0 dice; more than ``MAX_DICE`` is refused.

    A penalty that takes more dice than the pool has leaves nothing to roll (0 dice), it is not an
    error: the roll then totals its bonuses alone.
    """
    if not modifiers and base.rolled >= 0 and base.kept >= 0:
        return base
    pool = base
    for modifier in modifiers:
        pool = pool + modifier
    if pool.rolled > MAX_DICE or pool.kept > MAX_DICE:
        raise RulesError(
            "limit",
            f"Honor's Edge pools may roll and keep at most {MAX_DICE} dice; the modifiers make {pool}.",
        )
    return Pool(max(0, pool.rolled), max(0, pool.kept))


def roll_chain(rng: Dice, explode: bool) -> list[int]:
    """One die's faces: a 10 rolls again and adds, up to ``MAX_CHAIN`` rolls."""
    first = rng.roll(FACES)
    return roll_chain_from(rng, first) if explode else [first]


def roll_chain_from(rng: Dice, first: int) -> list[int]:
    """An exploding die's faces after its first face ``first``."""
    chain = [first]
    while chain[-1] == FACES and len(chain) < MAX_CHAIN:
        chain.append(rng.roll(FACES))
    return chain


def keep_highest(values: Sequence[int], kept: int) -> list[bool]:
    """Which dice are kept: the ``kept`` highest values, the earlier die first among equals."""
    if kept >= len(values):
        return [True] * len(values)
    # A reversed sort is still stable: equal values stay in rolling order, so the earlier die wins.
    order = sorted(range(len(values)), key=values.__getitem__, reverse=True)
    chosen = set(order[:kept])
    return [i in chosen for i in range(len(values))]


def margins(total: int, tn: int) -> tuple[int, int]:
    """(success margins, failure margins) of ``total`` against ``tn``.

    Success margins count full 5s above the TN (22 vs 15: 1). Failure margins count full 5s below it
    (12 vs 15: 0; 10 vs 15: 1; 8 vs 15: 1), as the errata reads them.
    """
    if total >= tn:
        return (total - tn) // 5, 0
    return 0, (tn - total) // 5


def _plural(n: int, one: str, many: str = "") -> str:
    return f"{n} {one}" if n == 1 else f"{n} {many or one + 's'}"


@dataclass(frozen=True)
class Options:
    """The arguments every Honor's Edge roll shares."""

    modifiers: tuple[Pool, ...]
    bonus: int
    assists: tuple[int, ...]
    tn: int | None
    explode: bool


_SKILL_OPTIONS = ("modifiers", "bonus", "explode", "assist_ranks", "tn")
_DAMAGE_OPTIONS = ("modifiers", "bonus", "explode")
#: Frozen, so one instance serves every roll that gives none of the options.
DEFAULT_OPTIONS = Options((), 0, (), None, True)


def read_options(args: Args, *, skill_roll: bool = True) -> Options:
    """Read ``modifiers``, ``bonus``, ``explode`` and, for skill rolls, ``assist_ranks`` and ``tn``."""
    if args.absent(_SKILL_OPTIONS if skill_roll else _DAMAGE_OPTIONS):
        return DEFAULT_OPTIONS
    raw_mods = args.items("modifiers", [], max_len=MAX_MODIFIERS)
    modifiers = tuple(
        parse_modifier(f"{args.where('modifiers')} item {i + 1}", m) for i, m in enumerate(raw_mods)
    )
    bonus = args.integer("bonus", 0, lo=-MAX_BONUS, hi=MAX_BONUS)
    explode = args.boolean("explode", True)
    assists: tuple[int, ...] = ()
    tn: int | None = None
    if skill_roll:
        raw_assists = args.items("assist_ranks", [], max_len=MAX_ASSISTS)
        where = args.where("assist_ranks")
        assists = tuple(
            check_int(f"{where} item {i + 1}", rank, lo=0, hi=MAX_RANK) for i, rank in enumerate(raw_assists)
        )
        tn = args.integer("tn", None, lo=0, hi=MAX_TN)
    return Options(modifiers, bonus, assists, tn, explode)


def resolve_pool(system_name: str, label: str, base: Pool, options: Options, rng: Dice) -> Result:
    """Roll ``base`` with ``options`` and build the result."""
    pool = apply_modifiers(base, options.modifiers)
    # Die by die, each chain finished before the next die (the order the scripted tests pin);
    # roll_chain's rule written inline, as this loop is the whole cost of a roll.
    roll = rng.roll
    explode = options.explode
    chains: list[list[int]] = []
    values: list[int] = []
    exploded = 0
    for _ in range(pool.rolled):
        face = roll(FACES)
        if face == FACES and explode:
            chain = roll_chain_from(rng, face)
            exploded += 1
            values.append(sum(chain))
        else:
            chain = [face]
            values.append(face)
        chains.append(chain)
    kept_flags = keep_highest(values, pool.kept)
    # rules.result.die's shape, written out: faces, value, kept, then this system's marks.
    dice: list[Die] = [
        {"faces": FACES, "value": value, "kept": kept, "chain": chain, "exploded": len(chain) > 1}
        for chain, value, kept in zip(chains, values, kept_flags, strict=True)
    ]
    if exploded:
        for entry in dice:
            chain = entry["chain"]
            if len(chain) == MAX_CHAIN and chain[-1] == FACES:
                entry["capped"] = True
    kept_values = [v for v, k in zip(values, kept_flags, strict=True) if k]
    assist = sum(options.assists)
    total = sum(kept_values) + options.bonus + assist

    pool_text = pool_text_final = f"{pool.rolled}k{pool.kept}"
    if options.modifiers:
        pool_text = " ".join([str(base), *(m.signed() for m in options.modifiers)]) + f" = {pool}"
    formula = pool_text + ": " + (" + ".join(map(str, kept_values)) or "0")
    if options.bonus:
        formula += f" {'+' if options.bonus > 0 else '-'} {abs(options.bonus)}"
    if options.assists:
        formula += f" + {assist} (assist)"

    success: bool | None = None
    success_margins: int | None = None
    failure_margins: int | None = None
    text = f"{label} {pool_text_final}"
    if options.tn is not None:
        success = total >= options.tn
        success_margins, failure_margins = margins(total, options.tn)
        text += f" vs TN {options.tn}: {total}, "
        if success:
            text += "success"
            if success_margins:
                text += f" with {_plural(success_margins, 'success margin')}"
        else:
            text += "failure"
            if failure_margins:
                text += f" with {_plural(failure_margins, 'failure margin')}"
    else:
        text += f": {total}"
    if exploded:
        text += f" ({_plural(exploded, 'die', 'dice')} exploded)"

    # rules.result.make_result's fields in its order, written out (no effects or requires here).
    return {
        "system": system_name,
        "dice": dice,
        "total": total,
        "formula": formula,
        "text": text,
        "pool": pool_text_final,
        "rolled": pool.rolled,
        "kept": pool.kept,
        "bonus": options.bonus,
        "assist": assist,
        "tn": options.tn,
        "success": success,
        "success_margins": success_margins,
        "failure_margins": failure_margins,
    }


@system("honors_edge.roll", "Honor's Edge roll and keep: XkY d10s, exploding 10s, TN and margins")
def roll(args: Args, rng: Dice) -> Result:
    where = "honors_edge.roll"
    given_pool = args.has("pool")
    given_counts = args.has("rolled") or args.has("kept")
    if given_pool and given_counts:
        raise RulesError("bad_value", f"{where} takes either 'pool' or 'rolled' and 'kept', not both.")
    if given_pool:
        raw = args.raw("pool")
        # The cached reading first; parse_pool again only to raise its error for a pool it refuses.
        cached = _read_pool(raw) if type(raw) is str else None
        if cached is not None and cached.rolled <= MAX_DICE and cached.kept <= MAX_DICE:
            base = cached
        else:
            base = parse_pool(args.where("pool"), raw)
    elif given_counts:
        base = Pool(
            args.integer("rolled", lo=0, hi=MAX_DICE),
            args.integer("kept", lo=0, hi=MAX_DICE),
        )
    else:
        raise RulesError("missing_argument", f"{where} needs 'pool' (such as '5k3') or 'rolled' and 'kept'.")
    options = read_options(args)
    args.finish()
    return resolve_pool("honors_edge.roll", "Honor's Edge", base, options, rng)


@system("honors_edge.skill", "Honor's Edge skill roll: (attribute + skill)k(attribute) against a TN")
def skill(args: Args, rng: Dice) -> Result:
    attribute = args.integer("attribute", lo=0, hi=MAX_ATTRIBUTE)
    rank = args.integer("skill", 0, lo=0, hi=MAX_ATTRIBUTE)
    options = read_options(args)
    args.finish()
    base = Pool(attribute + rank, attribute)
    result = resolve_pool("honors_edge.skill", "Honor's Edge skill roll", base, options, rng)
    result["attribute"] = attribute
    result["skill"] = rank
    return result


@system("honors_edge.damage", "Honor's Edge damage roll: (strength + X)k(strength + Y) for a +XkY weapon")
def damage(args: Args, rng: Dice) -> Result:
    strength = args.integer("strength", lo=0, hi=MAX_ATTRIBUTE)
    weapon = parse_modifier(args.where("weapon"), args.raw("weapon", "+0k0"), bonus_only=True)
    options = read_options(args, skill_roll=False)
    args.finish()
    # The weapon is the first pool modifier, so the formula shows "2k2 +3k0 = 5k2".
    if weapon != Pool(0, 0):
        options = replace(options, modifiers=(weapon, *options.modifiers))
    base = Pool(strength, strength)
    result = resolve_pool("honors_edge.damage", "Honor's Edge damage", base, options, rng)
    result["strength"] = strength
    result["weapon"] = weapon.signed()
    return result
