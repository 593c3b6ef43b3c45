"""The evaluated-term format: what ``rules.dice`` produces and ``rules.render`` consumes.

A formula result carries ``result["terms"]``: a flat list of terms in formula order, operators as their
own terms (the way Foundry VTT's ``Roll.terms`` lists them). Everything is plain data so results stay
MessagePack- and JSON-safe. This module is the contract between the two packages; change both together.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

Number = int | float


class DieResult(TypedDict):
    """One face rolled by a die term (or one sub-roll total in a pool)."""

    result: Number  # the face (dF: -1/0/1); for a compounded Roll20 die, the combined value
    active: bool  # counts toward the total
    discarded: NotRequired[bool]  # dropped by keep/drop
    exploded: NotRequired[bool]  # this die exploded and caused another
    rerolled: NotRequired[bool]  # replaced by a reroll
    success: NotRequired[bool]  # met a success target (cs in Foundry, >N in Roll20)
    failure: NotRequired[bool]  # met a failure target (cf/df in Foundry, fN in Roll20)
    count: NotRequired[Number]  # what this die adds when the term counts successes (1, 0 or -1)
    critical: NotRequired[Literal["success", "failure"]]  # Roll20 cs/cf marks (display only)
    penetrated: NotRequired[bool]  # Roll20 !p: this die was rolled by a penetration, counts face - 1
    compounded: NotRequired[list[int]]  # Roll20 !!: the faces that were added into ``result``


class SubRoll(TypedDict):
    terms: list[Term]
    total: Number
    formula: str


class DieTerm(TypedDict):
    type: Literal["die"]
    number: int  # how many dice were asked for
    faces: int  # 2 for coins, 3 for Fate dice (faces -1, 0, 1)
    kind: Literal["standard", "fate", "coin"]
    modifiers: list[str]  # as written, e.g. ["kh3"], ["x", "cs>=5"]
    results: list[DieResult]
    total: Number
    expression: str  # e.g. "4d6kh3", "(1d4)d6"
    flavor: NotRequired[str]  # "[fire]" in Foundry, a label in Roll20
    # Foundry's computed dice, "(1d4)d6" / "1d(2*3)": the parenthetical rolled for the number of dice or
    # faces (its terms are one paren term; its total is ``number`` or ``faces``)
    number_roll: NotRequired[SubRoll]
    faces_roll: NotRequired[SubRoll]


class NumberTerm(TypedDict):
    type: Literal["number"]
    value: Number
    flavor: NotRequired[str]


class OperatorTerm(TypedDict):
    type: Literal["operator"]
    op: Literal["+", "-", "*", "/", "%"]


class ParenTerm(TypedDict):
    type: Literal["paren"]
    terms: list[Term]
    total: Number
    inline: NotRequired[bool]  # a Roll20 [[ ]] inline roll
    flavor: NotRequired[str]


class FunctionTerm(TypedDict):
    type: Literal["function"]
    name: str  # floor ceil round abs min max ...
    args: list[list[Term]]
    total: Number
    flavor: NotRequired[str]  # a label written after the call: "floor(1d6 / 2)[fire]"


class PoolTerm(TypedDict):
    """``{a, b}kh`` (Foundry) or a Roll20 group ``{4d6+3d8}kh1`` / ``{4d6, 3d8}kh1``."""

    type: Literal["pool"]
    rolls: list[SubRoll]
    modifiers: list[str]
    results: list[DieResult]  # one per sub-roll (or, for a one-expression Roll20 group, per die)
    total: Number
    flavor: NotRequired[str]


Term = DieTerm | NumberTerm | OperatorTerm | ParenTerm | FunctionTerm | PoolTerm
