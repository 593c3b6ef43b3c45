"""Foundry VTT's dice: how a die term with modifiers, and a pool, roll and count.

Foundry applies a term's modifiers one after another in the order they are written, each to the whole
list of results so far (https://foundryvtt.com/article/dice-modifiers/ and the ``Die`` API page,
https://foundryvtt.com/api/v12/classes/foundry.dice.terms.Die.html). New dice from rerolls and explosions
join the end of the list. The meanings here follow those pages; see docs/notation.md for the table.
"""

from __future__ import annotations

from typing import Any

from rules.dice.arith import Number
from rules.dice.common import Result, compare, keep_or_drop, kept_after
from rules.dice.limits import MAX_CHAIN
from rules.dice.nodes import Ctx, DiceNode, GroupNode, Out, chain_limit, emit_pool, roll_subs, unkeep_dropped
from rules.rng import roll_many

#: The modifiers each kind of Foundry term takes, longest first so ``kh`` wins over ``k``.
DIE_MODIFIERS = (
    "even", "min", "max", "odd", "rr", "xo", "kh", "kl", "dh", "dl", "cs", "cf", "df", "sf", "ms",
    "r", "x", "k", "d",
)  # fmt: skip
FATE_MODIFIERS = ("rr", "kh", "kl", "dh", "dl", "r", "k", "d")
COIN_MODIFIERS = ("c",)
POOL_MODIFIERS = ("kh", "kl", "dh", "dl", "cs", "cf", "k", "d")

#: keep/drop modifier -> (keep, highest)
KEEPS = {
    "k": (True, True),
    "kh": (True, True),
    "kl": (True, False),
    "d": (False, False),
    "dl": (False, False),
    "dh": (False, True),
}


def explicit(name: str, faces: int | None) -> str | None:
    """A bare modifier written with the number Foundry assumes for it (``x`` on a d10 is ``x10``, ``r`` is
    ``r1``, ``kh`` is ``kh1``), or None when it has no such form (or the faces are not known yet).

    Written so, a modifier cannot run together with the letters of the next one (see the parser's
    ``foundry_modifiers``); ``Die#explode``, ``Die#reroll``, ``Die#keep`` and ``Die#drop`` read both
    forms the same.
    """
    if name in ("x", "xo"):
        return None if faces is None else f"{name}{faces}"
    if name in ("r", "rr"):
        return f"{name}1"
    if name in KEEPS:
        return f"{name[0]}{'h' if name == 'k' else 'l' if name == 'd' else name[1]}1"
    return None


class Mod:
    """One parsed Foundry modifier: ``name``, an optional count, comparison and target, and its text."""

    __slots__ = ("count", "name", "op", "target", "text")

    def __init__(self, name: str, count: int | None, op: str | None, target: int | None, text: str) -> None:
        self.name = name
        self.count = count
        self.op = op
        self.target = target
        self.text = text


def _face(ctx: Ctx, kind: str, faces: int) -> Result:
    if kind == "standard":
        return {"result": ctx.rng.roll(faces), "active": True}
    if kind == "fate":
        # A Fate die behaves like 1d3-2; Foundry marks its -1 a failure and its +1 a success.
        value = ctx.rng.roll(3) - 2
        if value == 1:
            return {"result": 1, "active": True, "success": True}
        if value == -1:
            return {"result": -1, "active": True, "failure": True}
        return {"result": 0, "active": True}
    return {"result": ctx.rng.roll(2) - 1, "active": True}  # a coin: 1 heads, 0 tails


class _Term:
    """The results of one die term while its modifiers run, with each result's place in its chain."""

    __slots__ = ("ctx", "depth", "faces", "kind", "results")

    def __init__(self, ctx: Ctx, kind: str, faces: int, results: list[Result]) -> None:
        self.ctx = ctx
        self.kind = kind
        self.faces = faces
        self.results = results
        self.depth = [0] * len(results)

    def add(self, parent: int) -> None:
        depth = self.depth[parent] + 1
        if depth > MAX_CHAIN:
            chain_limit()
        self.ctx.spend(1)
        self.results.append(_face(self.ctx, self.kind, self.faces))
        self.depth.append(depth)


def _reroll(t: _Term, mod: Mod, *, recursive: bool) -> None:
    # r rerolls each matching result once (only the results present before it ran); rr also rerolls
    # the new results while they match. A count (r1=1) caps how many rerolls happen.
    _add_dice(t, mod, 1 if mod.target is None else mod.target, "rerolled", recursive=recursive)


def _explode(t: _Term, mod: Mod, *, recursive: bool) -> None:
    # x rolls one more die for every matching result, new dice included; xo only for the first ones.
    _add_dice(t, mod, t.faces if mod.target is None else mod.target, "exploded", recursive=recursive)


def _add_dice(t: _Term, mod: Mod, target: Number, mark: str, *, recursive: bool) -> None:
    """Roll one more die for each active result that matches, marking it; a reroll also retires it.

    A count caps how many dice are added. Non-recursive modifiers stop where Foundry's loops
    (``Die#reroll``, ``Die#explode``) stop: the check runs only after an *active* result, ``r`` once
    it has looked at the last original result or any later one, ``xo`` only at exactly that result.
    So when the last original result is inactive (dropped, rerolled), ``r`` also looks at the first
    active new die and ``xo`` goes on exploding new dice, as in Foundry.
    """
    op = mod.op or "="
    budget = mod.count
    results = t.results
    initial = len(results)
    reroll = mark == "rerolled"
    checked = 0
    while checked < len(results):
        i = checked
        r = results[i]
        checked += 1
        if not r["active"]:
            continue
        if budget is not None and budget <= 0:
            break
        if compare(r["result"], op, target):
            r[mark] = True
            if reroll:
                r["active"] = False
            t.add(i)
            if budget is not None:
                budget -= 1
        if not recursive and (checked >= initial if reroll else checked == initial):
            break


def _count(results: list[Result], op: str, target: Number, *, success: bool) -> None:
    # Every result (dropped ones too, as Foundry does) is marked and re-cast to a count of 1 or 0.
    for r in results:
        hit = compare(r["result"], op, target)
        if success:
            r["success"] = hit
            if hit:
                r.pop("failure", None)
        else:
            r["failure"] = hit
            if hit:
                r.pop("success", None)
        r["count"] = 1 if hit else 0


def _deduct(results: list[Result], mod: Mod, *, subtract_value: bool) -> None:
    # df: each failure counts -1; sf: each failure subtracts its face. With a comparison or a target
    # ("df1" is "df=1", as in Die#deductFailures) the failures are the results it matches; with
    # neither, the results an earlier cs marked as not successful.
    for r in results:
        if mod.op is not None or mod.target is not None:
            if compare(r["result"], mod.op or "=", 1 if mod.target is None else mod.target):
                r["failure"] = True
                r.pop("success", None)
        elif r.get("success") is False:
            r["failure"] = True
            del r["success"]
        if r.get("failure"):
            r["count"] = -r["result"] if subtract_value else -1


def roll_die(ctx: Ctx, node: DiceNode, out: Out) -> Number:
    """A Foundry die term with modifiers (or a Fate die or a coin)."""
    n = node.number
    faces = node.faces
    kind = node.kind
    ctx.spend(n)
    if kind == "standard":
        results: list[Result] = [{"result": v, "active": True} for v in roll_many(ctx.rng, faces, n)]
    else:
        results = [_face(ctx, kind, faces) for _ in range(n)]
    t = _Term(ctx, kind, faces, results)
    kept = n
    margins: dict[str, int] = {}
    mod: Mod
    for mod in node.spec:
        name = mod.name
        if name in KEEPS:
            count = mod.count or 1  # Foundry reads a missing (or zero) count as 1
            if _keep_or_drop(results, name, count):
                kept = kept_after(kept, count, keep=KEEPS[name][0])
        elif name == "r" or name == "rr":
            _reroll(t, mod, recursive=name == "rr")
        elif name == "x" or name == "xo":
            _explode(t, mod, recursive=name == "x")
        elif name == "cs":
            _count(results, mod.op or "=", faces if mod.target is None else mod.target, success=True)
        elif name == "cf":
            _count(results, mod.op or "=", 1 if mod.target is None else mod.target, success=False)
        elif name == "df" or name == "sf":
            _deduct(results, mod, subtract_value=name == "sf")
        elif name == "ms":
            assert mod.target is not None
            margins["failure" if mod.op in ("<", "<=") else "success"] = mod.target
        elif name == "min" or name == "max":
            # The die keeps its face; it counts as the bound (Foundry also flags it ``rerolled``).
            assert mod.target is not None
            bound = mod.target
            for r in results:
                if (r["result"] < bound) if name == "min" else (r["result"] > bound):
                    r["count"] = bound
                    r["rerolled"] = True
        elif name == "even" or name == "odd":
            want = 0 if name == "even" else 1
            for r in results:
                r["success"] = r["result"] % 2 == want
                r["count"] = 1 if r["success"] else 0
        else:  # "c": call a coin
            for r in results:
                r["success"] = r["result"] == mod.target
                r["count"] = 1 if r["success"] else 0
    total: Number = 0
    for r in results:
        if r["active"]:
            total += r["count"] if "count" in r else r["result"]
    total = _margin_total(total, margins)
    term: dict[str, Any] = {
        "type": "die",
        "number": n,
        "faces": faces,
        "kind": kind,
        "modifiers": list(node.mod_texts),
        "results": results,
        "total": total,
        "expression": node.expression,
    }
    if node.flavor is not None:
        term["flavor"] = node.flavor
    out.append(term)
    ctx.dice += dice_entries(results, faces, kind)
    ctx.dice_max += kept * (faces if kind == "standard" else 1)
    return total


def _keep_or_drop(results: list[Result], name: str, count: int) -> bool:
    """Keep or drop as Foundry does; whether anything could be discarded.

    Dropping as many results as are active, or more, drops none in Foundry: ``DiceTerm._keepOrDrop``
    cuts the sorted values at the index of the first value to keep, which then lies past the end, and
    no result compares with a missing value.
    """
    keep, highest = KEEPS[name]
    if not keep and count >= sum(1 for r in results if r["active"]):
        return False
    keep_or_drop(results, count, keep=keep, highest=highest)
    return True


def _margin_total(total: Number, margins: dict[str, int]) -> Number:
    """``ms``: ``Die#total`` subtracts a success margin, or a failure margin takes the total away from
    its target. Both are kept in the term's options; a target of 0 counts as none there (JavaScript
    reads 0 as false), and a success margin wins when both are set."""
    if margins.get("success"):
        return total - margins["success"]
    if margins.get("failure"):
        return margins["failure"] - total
    return total


def dice_entries(results: list[Result], faces: int, kind: str) -> list[dict[str, Any]]:
    """``rules.result.die`` entries for a term's results: value, kept, and the result's own marks."""
    entries = []
    for r in results:
        entry = {"faces": faces, "value": r["result"], "kept": r["active"]}
        for key, value in r.items():
            if key != "result" and key != "active":
                entry[key] = value
        if kind != "standard":
            entry["kind"] = kind
        entries.append(entry)
    return entries


def roll_pool(ctx: Ctx, node: GroupNode, out: Out) -> Number:
    """A Foundry pool ``{a, b, ...}``: each expression is rolled, then the modifiers act on their totals."""
    rolls, results, spans = roll_subs(ctx, node)
    mod: Mod
    for mod in node.spec:
        if mod.name in KEEPS:
            _keep_or_drop(results, mod.name, mod.count or 1)
        else:
            assert mod.op is not None
            assert mod.target is not None
            _count(results, mod.op, mod.target, success=mod.name == "cs")
    total: Number = 0
    for r in results:
        if r["active"]:
            total += r["count"] if "count" in r else r["result"]
    unkeep_dropped(ctx, results, spans)
    return emit_pool(node, out, rolls, results, total)
