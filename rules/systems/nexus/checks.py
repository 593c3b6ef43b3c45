"""``nexus.check``: Nexus RPG dice checks (seed 004): one die read against a rule, not a TN.

- durability: the item's Durability die. The seed gives no outcome rule; this project's decision is
  that a 1 damages the item and a 1 on an item that is already damaged destroys it (docs/rules/nexus.md).
- supply: the current Supply die; a 1 or a 2 steps it down d12 → d10 → d8 → d6 → d4 → 1, and a check
  with only "1" left uses the supply up without a roll.
- individual: a table of outcomes by face, given by the caller or the built-in "frightened" table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.args import Args, check_int, type_name
from rules.errors import RulesError
from rules.registry import system
from rules.result import Result, die, make_result
from rules.rng import Dice

CHECK_DICE: dict[str, int] = {"d4": 4, "d6": 6, "d8": 8, "d10": 10, "d12": 12}
SUPPLY_STEPS: tuple[str, ...] = ("d12", "d10", "d8", "d6", "d4", "1", "gone")
KINDS = ("durability", "supply", "individual")
OUTCOME_MAX = 200

#: The seed's frightened check, in this project's words.
FRIGHTENED: list[dict[str, Any]] = [
    {"from": 1, "to": 1, "outcome": "cower in fear: cannot act or move"},
    {"from": 2, "to": 5, "outcome": "run away from the source of the fear"},
    {"from": 6, "to": 6, "outcome": "act normally, with a bane on skill rolls"},
]
BUILTIN_TABLES: dict[str, tuple[str, list[dict[str, Any]]]] = {"frightened": ("d6", FRIGHTENED)}


def supply_step(current: str, value: int | None) -> str:
    """The supply die after a check: one step down on a 1 or 2; "1" is always used up."""
    if current == "1":
        return "gone"
    assert value is not None
    if value <= 2:
        return SUPPLY_STEPS[SUPPLY_STEPS.index(current) + 1]
    return current


def durability_outcome(value: int, damaged: bool) -> str:
    if value != 1:
        return "ok"
    return "destroyed" if damaged else "damaged"


def validate_table(where: str, raw: list[Any], faces: int) -> list[dict[str, Any]]:
    """A caller's table: maps with ``from``, ``to`` and ``outcome`` covering 1..faces exactly once."""
    if not raw:
        raise RulesError("bad_value", f"{where} needs at least one entry covering 1 to {faces}.")
    entries: list[dict[str, Any]] = []
    for i, entry in enumerate(raw):
        at = f"{where} entry {i}"
        if not isinstance(entry, Mapping):
            raise RulesError(
                "bad_type", f"{at} must be a map with 'from', 'to' and 'outcome'; got {type_name(entry)}."
            )
        unknown = sorted(str(k) for k in entry if k not in {"from", "to", "outcome"})
        if unknown:
            raise RulesError(
                "unknown_argument",
                f"{at} does not take {', '.join(repr(k) for k in unknown)}; an entry has 'from', 'to' "
                "and 'outcome'.",
            )
        for key in ("from", "to", "outcome"):
            if entry.get(key) is None:
                raise RulesError("missing_argument", f"{at} needs '{key}'.")
        low = check_int(f"{at} 'from'", entry["from"], lo=1, hi=faces)
        high = check_int(f"{at} 'to'", entry["to"], lo=1, hi=faces)
        if low > high:
            raise RulesError("bad_value", f"{at} runs from {low} to {high}; 'from' may not be above 'to'.")
        outcome = entry["outcome"]
        if not isinstance(outcome, str):
            raise RulesError("bad_type", f"{at} 'outcome' must be a string; got {type_name(outcome)}.")
        if not outcome.strip():
            raise RulesError("bad_value", f"{at} 'outcome' must say something; got an empty string.")
        if len(outcome) > OUTCOME_MAX:
            raise RulesError("limit", f"{at} 'outcome' may be at most {OUTCOME_MAX} characters long.")
        entries.append({"from": low, "to": high, "outcome": outcome})

    expected = 1
    for entry in sorted(entries, key=lambda e: (e["from"], e["to"])):
        if entry["from"] > expected:
            raise RulesError(
                "bad_value",
                f"{where} leaves {_faces(expected, entry['from'] - 1)} of the d{faces} without an outcome; "
                f"the entries must cover 1 to {faces} with no gaps.",
            )
        if entry["from"] < expected:
            twice = _faces(entry["from"], min(entry["to"], expected - 1))
            raise RulesError(
                "bad_value",
                f"{where} gives {twice} more than one outcome; the entries may not overlap.",
            )
        expected = entry["to"] + 1
    if expected <= faces:
        raise RulesError(
            "bad_value",
            f"{where} leaves {_faces(expected, faces)} of the d{faces} without an outcome; "
            f"the entries must cover 1 to {faces} with no gaps.",
        )
    return entries


def _faces(low: int, high: int) -> str:
    return f"face {low}" if low == high else f"faces {low} to {high}"


@system(
    "nexus.check",
    "Nexus RPG dice check: durability (damaged on a 1), supply (steps down on 1-2) or an individual table.",
)
def check(args: Args, rng: Dice) -> Result:
    kind: str = args.string("kind", choices=KINDS)
    if kind != "durability" and args.has("damaged"):
        raise RulesError("bad_value", f"{args.where('damaged')} only applies to durability checks.")
    if kind != "individual" and args.has("table"):
        raise RulesError("bad_value", f"{args.where('table')} only applies to individual checks.")
    if kind == "durability":
        return _durability(args, rng)
    if kind == "supply":
        return _supply(args, rng)
    return _individual(args, rng)


def _durability(args: Args, rng: Dice) -> Result:
    name: str = args.string("die", choices=tuple(CHECK_DICE))
    damaged: bool = args.boolean("damaged", False)
    args.finish()
    faces = CHECK_DICE[name]
    value = rng.roll(faces)
    outcome = durability_outcome(value, damaged)
    state = "damaged item" if damaged else "item"
    text = f"Durability check ({state}, {name}): {value}, {outcome}."
    return make_result(
        "nexus.check",
        [die(faces, value)],
        value,
        f"1d{faces}",
        text,
        kind="durability",
        die=name,
        damaged=damaged,
        value=value,
        outcome=outcome,
    )


def _supply(args: Args, rng: Dice) -> Result:
    name: str = args.string("die", choices=(*CHECK_DICE, "1"))
    args.finish()
    if name == "1":
        return make_result(
            "nexus.check",
            [],
            None,
            "1 (last supply, no roll)",
            "Supply check with 1 left: the supply is used up.",
            kind="supply",
            die=name,
            value=None,
            outcome="gone",
        )
    faces = CHECK_DICE[name]
    value = rng.roll(faces)
    outcome = supply_step(name, value)
    if outcome == name:
        change = f"stays {name}"
    elif outcome == "1":
        change = "down to 1 left"
    else:
        change = f"down to {outcome}"
    return make_result(
        "nexus.check",
        [die(faces, value)],
        value,
        f"1d{faces}",
        f"Supply check ({name}): {value}, supply {change}.",
        kind="supply",
        die=name,
        value=value,
        outcome=outcome,
    )


def _individual(args: Args, rng: Dice) -> Result:
    raw = args.raw("table")
    if not isinstance(raw, str | list | tuple):
        raise RulesError(
            "bad_type",
            f"{args.where('table')} must be a list of {{'from', 'to', 'outcome'}} entries or the name of a "
            f"built-in table; got {type_name(raw)}.",
        )
    if isinstance(raw, str):
        if raw not in BUILTIN_TABLES:
            known = ", ".join(repr(k) for k in BUILTIN_TABLES)
            raise RulesError(
                "bad_value",
                f"{args.where('table')} names no built-in table; the built-in tables are: {known}.",
            )
        table_die, entries = BUILTIN_TABLES[raw]
        name: str = args.string("die", table_die, choices=tuple(CHECK_DICE))
        if name != table_die:
            raise RulesError(
                "bad_value",
                f"{args.where('die')} must be {table_die!r} for the built-in {raw!r} table; got {name!r}.",
            )
        title = raw
    else:
        name = args.string("die", choices=tuple(CHECK_DICE))
        rows: list[Any] = args.items("table", max_len=CHECK_DICE[name])
        entries = validate_table(args.where("table"), rows, CHECK_DICE[name])
        title = "individual"
    args.finish()

    faces = CHECK_DICE[name]
    value = rng.roll(faces)
    entry = next(e for e in entries if e["from"] <= value <= e["to"])
    # The summary stays one line whatever whitespace a caller's outcome carries.
    said = " ".join(entry["outcome"].split()).rstrip(".")
    return make_result(
        "nexus.check",
        [die(faces, value)],
        value,
        f"1d{faces}",
        f"{title.capitalize()} check ({name}): {value}, {said}.",
        kind="individual",
        die=name,
        table=title,
        value=value,
        outcome=dict(entry),
    )
