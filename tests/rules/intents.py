"""Strategies written from spec/rules.md (not from the code) for the property tests of every system but
``dice``: valid intents of each system (``VALID``), and junk made from them (``junk_intent``): keys replaced,
added or dropped, values of every type, and maps of random keys.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import strategies as st

Intent = dict[str, Any]

# --- valid intents, from the spec ----------------------------------------------------------------------


def optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A map with each field present or absent (absent means the default)."""
    return st.fixed_dictionaries({}, optional=fields)


def intent(
    system: str, required: dict[str, st.SearchStrategy[Any]], **options: st.SearchStrategy[Any]
) -> Any:
    return st.builds(
        lambda req, opt: {"system": system, **req, **opt},
        st.fixed_dictionaries(required),
        optional(**options),
    )


small = st.integers(-5, 5)
counts = st.integers(0, 4)
tier = st.integers(1, 3)
auto_tiers = st.lists(tier, max_size=3)

drawsteel_power = intent(
    "drawsteel.power",
    {},
    characteristic=small,
    edges=counts,
    banes=counts,
    bonus=st.integers(-10, 10),
    auto_tiers=auto_tiers,
    downgrade_to=st.one_of(st.none(), tier),
    kind=st.sampled_from(["ability", "test"]),
)

LETTERS = ["M", "A", "R", "I", "P"]
DAMAGE_TYPES = ["fire", "cold", "acid", "poison", "psychic", "holy", "lightning", "sonic", "corruption"]
EFFECTS = ["push 1", "slowed (save ends)", "the target is grabbed", "prone", "M < 2 weakened (save ends)"]


@st.composite
def drawsteel_ability(draw: st.DrawFn) -> Intent:
    letters = draw(st.lists(st.sampled_from(LETTERS), min_size=1, max_size=5, unique=True))
    characteristics = {letter: draw(small) for letter in letters}
    roll_with: Any = draw(st.lists(st.sampled_from(letters), min_size=1, max_size=len(letters), unique=True))
    if len(roll_with) == 1 and draw(st.booleans()):
        roll_with = roll_with[0]
    # Every "X or Y" choice uses the same pair, so one 'choose' can fit them all.
    pair = (
        draw(st.lists(st.sampled_from(letters), min_size=2, max_size=2, unique=True))
        if len(letters) > 1
        else None
    )

    def entry() -> str:
        shape = draw(st.sampled_from(["flat", "letter", "choice", "effect", "both"]))
        amount = draw(st.integers(0, 20))
        kind = draw(st.one_of(st.just(""), st.sampled_from(DAMAGE_TYPES).map(lambda t: t + " ")))
        if shape == "effect":
            return draw(st.sampled_from(EFFECTS))
        if shape == "choice" and pair:
            text = f"{amount} + {pair[0]} or {pair[1]} {kind}damage"
        elif shape in {"letter", "choice"}:
            text = f"{amount} + {draw(st.sampled_from(letters))} {kind}damage"
        else:
            text = f"{amount} {kind}damage"
        if shape == "both":
            text += "; " + draw(st.sampled_from(EFFECTS))
        return text

    tiers = [entry() for _ in range(3)]
    result: Intent = {
        "system": "drawsteel.ability",
        "characteristics": characteristics,
        "roll_with": roll_with,
    }
    result["tiers"] = tiers
    if pair and any(" or " in t for t in tiers) and draw(st.booleans()):
        result["choose"] = draw(st.sampled_from(pair))
    result.update(
        draw(optional(edges=counts, banes=counts, bonus=st.integers(-10, 10), auto_tiers=auto_tiers))
    )
    if draw(st.booleans()):
        target = optional(
            name=st.text(max_size=20),
            edges=counts,
            banes=counts,
            bonus=st.integers(-10, 10),
            auto_tiers=auto_tiers,
        )
        result["targets"] = draw(st.lists(target, min_size=1, max_size=4))
    return result


@st.composite
def experience(draw: st.DrawFn, flag: str) -> dict[str, Any]:
    # An Experience is added by paying for it, so the two come together (or not at all).
    if draw(st.booleans()):
        return {"experience": draw(st.integers(1, 5)), flag: True}
    return draw(optional(experience=st.just(0), **{flag: st.just(False)}))


daggerheart_duality = st.builds(
    lambda base, spend: {**base, **spend},
    intent(
        "daggerheart.duality",
        {},
        modifier=st.integers(-5, 10),
        difficulty=st.one_of(st.none(), st.integers(5, 30)),
        advantage=counts,
        disadvantage=counts,
        reaction=st.booleans(),
    ),
    experience("spend_hope"),
)

daggerheart_attack = st.builds(
    lambda base, spend: {**base, **spend},
    intent(
        "daggerheart.attack",
        {"modifier": st.integers(-5, 15)},
        advantage=st.booleans(),
        disadvantage=st.booleans(),
        targets=st.lists(
            st.fixed_dictionaries({"evasion": st.integers(5, 25)}, optional={"name": st.text(max_size=20)}),
            max_size=5,
        ),
        crit_threshold=st.integers(15, 20),
    ),
    experience("spend_fear"),
)

pool_text = st.builds(lambda r, k: f"{r}k{k}", st.integers(0, 10), st.integers(0, 10))
pool_modifier = st.builds(
    lambda s, r, k: f"{s}{r}k{k}", st.sampled_from("+-"), st.integers(0, 3), st.integers(0, 3)
)
honors_options: dict[str, st.SearchStrategy[Any]] = {
    "modifiers": st.lists(pool_modifier, max_size=4),
    "bonus": st.integers(-10, 10),
    "assist_ranks": st.lists(st.integers(0, 5), max_size=4),
    "tn": st.one_of(st.none(), st.integers(5, 50)),
    "explode": st.booleans(),
}
honors_roll = st.one_of(
    intent("honors_edge.roll", {"pool": pool_text}, **honors_options),
    intent("honors_edge.roll", {"rolled": st.integers(0, 10), "kept": st.integers(0, 10)}, **honors_options),
)
honors_skill = intent(
    "honors_edge.skill", {"attribute": st.integers(1, 6), "skill": st.integers(0, 10)}, **honors_options
)
honors_damage = intent(
    "honors_edge.damage",
    {
        "strength": st.integers(1, 6),
        "weapon": st.builds(lambda r, k: f"+{r}k{k}", st.integers(0, 4), st.integers(0, 2)),
    },
    modifiers=st.lists(pool_modifier, max_size=3),
    bonus=st.integers(-10, 10),
    explode=st.booleans(),
)

ATTRIBUTE_DICE = ["d4-1", "d4", "d6", "d8", "d10", "d12", "d12+1"]
DIFFICULTIES = ["trivial", "easy", "medium", "hard", "very_hard", "extreme", "legendary"]
nexus_test = st.builds(
    lambda base, target: {**base, **target},
    intent(
        "nexus.test",
        {"attribute_die": st.sampled_from(ATTRIBUTE_DICE)},
        skill_rank=st.integers(0, 6),
        boons=counts,
        banes=counts,
        skill_type=st.sampled_from(["general", "combat", "expert"]),
        trained=st.booleans(),
        bonus=st.integers(-5, 5),
    ),
    st.one_of(
        st.just({}),
        st.fixed_dictionaries({"tn": st.integers(1, 20)}),
        st.fixed_dictionaries({"difficulty": st.sampled_from(DIFFICULTIES)}),
    ),
)
nexus_magic = intent(
    "nexus.test",
    {"attribute_die": st.sampled_from(ATTRIBUTE_DICE), "skill_type": st.just("magic")},
    trained=st.just(True),
    skill_rank=st.integers(0, 6),
)

CHECK_DICE = {"d4": 4, "d6": 6, "d8": 8, "d10": 10, "d12": 12}


@st.composite
def outcome_table(draw: st.DrawFn) -> Intent:
    die = draw(st.sampled_from(sorted(CHECK_DICE)))
    faces = CHECK_DICE[die]
    cuts = sorted(draw(st.sets(st.integers(1, faces - 1), max_size=faces - 1)))
    bounds = [0, *cuts, faces]
    table = [
        {"from": lo + 1, "to": hi, "outcome": draw(st.text(min_size=1, max_size=30).filter(str.strip))}
        for lo, hi in itertools.pairwise(bounds)
    ]
    return {"system": "nexus.check", "kind": "individual", "die": die, "table": draw(st.permutations(table))}


nexus_check = st.one_of(
    intent(
        "nexus.check",
        {"kind": st.just("durability"), "die": st.sampled_from(sorted(CHECK_DICE))},
        damaged=st.booleans(),
    ),
    intent("nexus.check", {"kind": st.just("supply"), "die": st.sampled_from([*sorted(CHECK_DICE), "1"])}),
    intent("nexus.check", {"kind": st.just("individual"), "table": st.just("frightened")}, die=st.just("d6")),
    outcome_table(),
)

faces_groups = st.lists(
    st.fixed_dictionaries(
        {"number": st.integers(1, 5), "faces": st.sampled_from([2, 4, 6, 8, 10, 12, 20, 100])}
    ),
    min_size=1,
    max_size=4,
)
faces_intent = intent("faces", {"dice": faces_groups}, formula=st.text(min_size=1, max_size=40))

VALID: dict[str, st.SearchStrategy[Intent]] = {
    "drawsteel.power": drawsteel_power,
    "drawsteel.ability": drawsteel_ability(),
    "daggerheart.duality": daggerheart_duality,
    "daggerheart.attack": daggerheart_attack,
    "honors_edge.roll": honors_roll,
    "honors_edge.skill": honors_skill,
    "honors_edge.damage": honors_damage,
    "nexus.test": st.one_of(nexus_test, nexus_magic),
    "nexus.check": nexus_check,
    "faces": faces_intent,
}
SYSTEMS = sorted(VALID)

# --- junk ---------------------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-3, 30),
    st.sampled_from([2**63, -(2**63), 2**64 + 1, 10**100]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        ["5k3", "+2k0", "-99k99", "d6", "d12+1", "M", "M or A", "frightened", "1", "magic", "🎲", ""]
    ),
    st.binary(max_size=8),
)
junk_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.tuples(inner, inner),
        st.dictionaries(
            st.one_of(st.text(max_size=10), st.sampled_from(LETTERS), st.integers()), inner, max_size=5
        ),
    ),
    max_leaves=12,
)
ARGUMENT_NAMES = sorted(
    {
        *(
            "characteristic",
            "edges",
            "banes",
            "bonus",
            "auto_tiers",
            "downgrade_to",
            "kind",
            "characteristics",
        ),
        *("roll_with", "tiers", "choose", "targets", "modifier", "difficulty", "advantage", "disadvantage"),
        *("experience", "spend_hope", "spend_fear", "reaction", "crit_threshold", "pool", "rolled", "kept"),
        *("modifiers", "assist_ranks", "tn", "explode", "attribute", "skill", "strength", "weapon"),
        *("attribute_die", "skill_rank", "boons", "skill_type", "trained", "die", "damaged", "table"),
        *("name", "evasion", "from", "to", "outcome", "system"),
    }
)
keys = st.one_of(st.sampled_from(ARGUMENT_NAMES), st.text(max_size=12))


def mutate(value: Any, draw: st.DrawFn) -> Any:
    """Replace, drop or add one entry somewhere inside ``value`` (maps and lists, any depth)."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value, key=repr)))
        action = draw(st.sampled_from(["replace", "drop", "deeper"]))
        copy = dict(value)
        if action == "drop":
            del copy[key]
        elif action == "deeper":
            copy[key] = mutate(copy[key], draw)
        else:
            copy[key] = draw(junk_values)
        return copy
    if isinstance(value, dict):
        return {**value, draw(keys): draw(junk_values)}
    if isinstance(value, list) and value and draw(st.booleans()):
        i = draw(st.integers(0, len(value) - 1))
        return [*value[:i], mutate(value[i], draw), *value[i + 1 :]]
    return draw(junk_values)


@st.composite
def junk_intent(draw: st.DrawFn, system: str) -> Any:
    shape = draw(st.sampled_from(["mutated", "mutated twice", "random map", "not a map"]))
    if shape == "not a map":
        return draw(junk_values)
    if shape == "random map":
        return {"system": system, **draw(st.dictionaries(keys, junk_values, max_size=6))}
    value = draw(VALID[system])
    for _ in range(1 if shape == "mutated" else 2):
        value = mutate(value, draw)
    return value
