"""The ``faces`` system: bare dice faces for a VTT that evaluates its own formula (see docs/rules.md).

A Foundry VTT table keeps its game system's own roll logic (modifiers, crits, keep-highest) but asks the
relay for every face through Foundry's dice fulfillment. The relay cannot know what the faces are for, so
this system only rolls what it is asked: ``{"dice": [{"number": 2, "faces": 20}, {"number": 3, "faces": 6}]}``
rolls two d20 and three d6, in that order. The faces are stored, broadcast and sealed like any roll, so the
rest of the table sees the same faces the VTT shows. ``formula`` (optional) is the VTT's formula the faces
are for, shown as context; it changes nothing.
"""

from __future__ import annotations

from rules.args import Args, check_int
from rules.dice.limits import MAX_DICE, MAX_FACES
from rules.errors import RulesError
from rules.registry import system
from rules.result import Result, die, make_result
from rules.rng import Dice, roll_many

#: Groups in one request: Foundry asks per roll, and a roll with more distinct dice terms is not a table's.
MAX_GROUPS = 100
MAX_CONTEXT = 200


@system("faces", "bare dice faces for a VTT's own formula, e.g. dice=[{number: 2, faces: 20}]")
def roll_faces(args: Args, rng: Dice) -> Result:
    groups = [_group(args, i, item) for i, item in enumerate(args.items("dice", max_len=MAX_GROUPS))]
    context = args.string("formula", None, max_len=MAX_CONTEXT)
    args.finish()
    if not groups:
        raise RulesError("missing_argument", "faces argument 'dice' must name at least one group of dice.")
    asked = sum(number for number, _ in groups)
    if asked > MAX_DICE:
        raise RulesError("limit", f"faces may roll at most {MAX_DICE} dice at once; {asked} were asked for.")
    dice = [die(faces, value) for number, faces in groups for value in roll_many(rng, faces, number)]
    formula = " + ".join(f"{number}d{faces}" for number, faces in groups)
    shown = " · ".join(
        f"d{faces} {' '.join(str(d['value']) for d in dice if d['faces'] == faces)}"
        for faces in dict.fromkeys(faces for _, faces in groups)
    )
    text = f"{context}: {shown}" if context else shown
    # No total: the faces' sum is not the VTT roll's total (its formula adds, keeps and drops).
    return make_result("faces", dice, None, formula, text, **({"for": context} if context else {}))


def _group(args: Args, index: int, item: object) -> tuple[int, int]:
    where = f"{args.system} argument 'dice[{index}]"
    if not isinstance(item, dict) or set(item) - {"number", "faces"}:
        raise RulesError("bad_type", f"{where}' must be a map with 'number' and 'faces'.")
    number = check_int(f"{where}.number'", item.get("number"), lo=1, hi=MAX_DICE)
    faces = check_int(f"{where}.faces'", item.get("faces"), lo=1, hi=MAX_FACES)
    return number, faces
