"""Roll20's dice: how a die term with modifiers, and a grouped roll, roll and count.

Roll20 applies modifiers in a fixed order whatever order they are written in (Dice Reference, "Order of
Operations for Modifiers", https://wiki.roll20.net/Dice_Reference): exploding, compounding, penetrating and
rerolls happen while each die is still rolling; keep/drop, successes, failures and sorting after all dice
have settled. Critical marks (``cs``/``cf``) only change how a die is shown.
"""

from __future__ import annotations

from typing import Any

from rules.dice.arith import Number, norm
from rules.dice.common import Result, compare, keep_or_drop, kept_after
from rules.dice.foundry import dice_entries
from rules.dice.limits import MAX_CHAIN
from rules.dice.nodes import (
    Ctx,
    DiceNode,
    GroupNode,
    Out,
    Target,
    chain_limit,
    emit_pool,
    roll_subs,
    target_value,
    unkeep_dropped,
)

CompareRule = tuple[str, Target]


class Spec:
    """The parsed modifiers of one Roll20 die term or group."""

    __slots__ = (
        "crit_failure", "crit_success", "explode", "failure", "keeps", "once", "rerolls", "sort", "success",
    )  # fmt: skip

    def __init__(self) -> None:
        self.explode: tuple[str, CompareRule | None] | None = None  # ("!" | "!!" | "!p", rule)
        self.rerolls: list[CompareRule] = []
        self.once = True  # every reroll modifier was ``ro``
        self.keeps: list[tuple[bool, bool, int]] = []  # (keep, highest, count), in written order
        self.success: CompareRule | None = None
        self.failure: CompareRule | None = None
        self.crit_success: list[CompareRule] = []
        self.crit_failure: list[CompareRule] = []
        self.sort: str | None = None  # "a" | "d"


def value_of(r: Result) -> Number:
    """What a result adds: a penetrating die counts one less than its face."""
    value: Number = r["result"]
    return value - 1 if r.get("penetrated") else value


def _matches(value: Number, rules: list[tuple[str, Number]]) -> bool:
    return any(compare(value, op, target) for op, target in rules)


def roll_die(ctx: Ctx, node: DiceNode, out: Out) -> Number:
    """A Roll20 die term (``NdX`` or ``NdF``) with its modifiers."""
    spec: Spec = node.spec
    n = node.number
    faces = node.faces
    fate = node.kind == "fate"
    high = 1 if fate else faces
    rng = ctx.rng
    rerolls = [(op, target_value(ctx, t)) for op, t in spec.rerolls]
    explode_mode = None
    explode_rule: tuple[str, Number] = ("=", high)
    if spec.explode is not None:
        explode_mode, rule = spec.explode
        if rule is not None:
            explode_rule = (rule[0], target_value(ctx, rule[1]))
    results: list[Result] = []
    ctx.spend(n)

    def face() -> int:
        return rng.roll(3) - 2 if fate else rng.roll(faces)

    def settle(first: int, chain: int) -> tuple[int, int]:
        # Roll20 rerolls a matching die until it no longer matches (``ro``: once); the old faces
        # are kept as inactive ``rerolled`` results so the roll can be audited.
        value = first
        while rerolls and _matches(value, rerolls):
            results.append({"result": value, "active": False, "rerolled": True})
            chain += 1
            if chain > MAX_CHAIN:
                chain_limit()
            ctx.spend(1)
            value = face()
            if spec.once:
                break
        return value, chain

    for _ in range(n):
        value, chain = settle(face(), 0)
        if explode_mode is None:
            results.append({"result": value, "active": True})
            continue
        op, target = explode_rule
        if explode_mode == "!!":
            parts = [value]
            while compare(value, op, target):
                chain += 1
                if chain > MAX_CHAIN:
                    chain_limit()
                ctx.spend(1)
                value, chain = settle(face(), chain)
                parts.append(value)
            r: Result = {"result": sum(parts), "active": True}
            if len(parts) > 1:
                r["compounded"] = parts
            results.append(r)
            continue
        r = {"result": value, "active": True}
        results.append(r)
        while compare(value, op, target):
            r["exploded"] = True
            chain += 1
            if chain > MAX_CHAIN:
                chain_limit()
            ctx.spend(1)
            value, chain = settle(face(), chain)
            r = {"result": value, "active": True}
            if explode_mode == "!p":
                r["penetrated"] = True
            results.append(r)

    kept = n
    for keep, highest, count in spec.keeps:
        keep_or_drop(results, count, keep=keep, highest=highest, value=value_of)
        kept = kept_after(kept, count, keep=keep)
    total: Number = 0
    if spec.success is not None:
        s_op, s_target = spec.success[0], target_value(ctx, spec.success[1])
        f_rule = None if spec.failure is None else (spec.failure[0], target_value(ctx, spec.failure[1]))
        for r in results:
            if not r["active"]:
                continue
            counted = value_of(r)
            hit = compare(counted, s_op, s_target)
            miss = f_rule is not None and compare(counted, f_rule[0], f_rule[1])
            if hit:
                r["success"] = True
            if miss:
                r["failure"] = True
            r["count"] = (1 if hit else 0) - (1 if miss else 0)
            total += r["count"]
    else:
        for r in results:
            if r["active"]:
                total += value_of(r)
    if spec.crit_success or spec.crit_failure:
        _mark_criticals(ctx, spec, results)
    rolled = results
    if spec.sort is not None:
        # Sorting changes how the results are listed, not the order the dice were rolled in.
        results = sorted(results, key=value_of, reverse=spec.sort == "d")
    entries = dice_entries(rolled, 3 if fate else faces, node.kind)
    term: dict[str, Any] = {
        "type": "die",
        "number": n,
        "faces": 3 if fate else faces,
        "kind": node.kind,
        "modifiers": list(node.mod_texts),
        "results": results,
        "total": total,
        "expression": node.expression,
    }
    if node.flavor is not None:
        term["flavor"] = node.flavor
    out.append(term)
    ctx.dice += entries
    ctx.dice_max += kept * high
    if ctx.track is not None:
        ctx.track.extend((r, e, term) for r, e in zip(rolled, entries, strict=True))
    return total


def _mark_criticals(ctx: Ctx, spec: Spec, results: list[Result]) -> None:
    # Only the rules written with cs/cf mark dice. Roll20 also highlights a die's highest and lowest
    # faces when no rule is given; that default is display only and follows from the faces, so the
    # renderers draw it rather than every plain die carrying a mark.
    cs = [(op, target_value(ctx, t)) for op, t in spec.crit_success]
    cf = [(op, target_value(ctx, t)) for op, t in spec.crit_failure]
    for r in results:
        if r.get("rerolled"):
            continue
        value = r["result"]
        if cs and _matches(value, cs):
            r["critical"] = "success"
        elif cf and _matches(value, cf):
            r["critical"] = "failure"


def _count_group(ctx: Ctx, spec: Spec, results: list[Result]) -> Number:
    """Successes minus failures over the active results of a group."""
    assert spec.success is not None
    s_op, s_target = spec.success[0], target_value(ctx, spec.success[1])
    f_rule = None if spec.failure is None else (spec.failure[0], target_value(ctx, spec.failure[1]))
    total: Number = 0
    for r in results:
        if not r["active"]:
            continue
        hit = compare(r["result"], s_op, s_target)
        miss = f_rule is not None and compare(r["result"], f_rule[0], f_rule[1])
        if hit:
            r["success"] = True
        if miss:
            r["failure"] = True
        r["count"] = (1 if hit else 0) - (1 if miss else 0)
        total += r["count"]
    return total


def roll_group(ctx: Ctx, node: GroupNode, out: Out) -> Number:
    """A Roll20 grouped roll.

    With several expressions (``{4d6, 3d8}kh1``) the modifiers act on each expression's total. With one
    expression and modifiers (``{4d6+3d8}kh1``, ``{3d20+5}>21``) they act on every die of it, each die
    carrying the expression's numbers with it (Dice Reference, "Grouped Roll Modifiers": "Roll 3 d20's,
    for each roll add 5 and then count a success for each result of 21 or more").
    """
    spec: Spec = node.spec
    if len(node.subs) == 1 and (spec.keeps or spec.success is not None):
        return _roll_single(ctx, node, out)
    rolls, results, spans = roll_subs(ctx, node)
    for keep, highest, count in spec.keeps:
        keep_or_drop(results, count, keep=keep, highest=highest)
    total = _group_total(ctx, spec, results)
    unkeep_dropped(ctx, results, spans)
    return emit_pool(node, out, rolls, results, total)


def _group_total(ctx: Ctx, spec: Spec, results: list[Result]) -> Number:
    """A group's total: its successes when it has a target, else the sum of its kept results."""
    if spec.success is not None:
        return _count_group(ctx, spec, results)
    total: Number = 0
    for r in results:
        if r["active"]:
            total += r["result"]
    return total


def _roll_single(ctx: Ctx, node: GroupNode, out: Out) -> Number:
    spec: Spec = node.spec
    sub = node.subs[0]
    outer = ctx.track
    ctx.track = []
    terms: Out = []
    try:
        sub.ev(ctx, terms)
        tracked = ctx.track
    finally:
        ctx.track = outer
    # The parser allows only dice and numbers joined by + and - here, so the terms are flat: the
    # numbers make one offset and each die term has a sign.
    sign = 1
    offset: Number = 0
    signs: dict[int, int] = {}
    for term in terms:
        kind = term["type"]
        if kind == "operator":
            if term["op"] == "-":
                sign = -sign
            continue
        if kind == "die":
            signs[id(term)] = sign
        else:
            offset += sign * (term["total"] if "total" in term else term["value"])
        sign = 1
    members = [(r, e, t) for r, e, t in tracked if r["active"]]
    results: list[Result] = [
        {"result": norm(signs[id(t)] * value_of(r) + offset), "active": True} for r, e, t in members
    ]
    for keep, highest, count in spec.keeps:
        keep_or_drop(results, count, keep=keep, highest=highest)
    touched = []
    for pooled, (r, e, t) in zip(results, members, strict=True):
        if not pooled["active"]:
            r["active"] = False
            r["discarded"] = True
            e["kept"] = False
            e["discarded"] = True
            touched.append(t)
    for t in touched:
        t["total"] = sum(value_of(r) for r in t["results"] if r["active"])
    total = _group_total(ctx, spec, results)
    sub_total: Number = offset
    for term in terms:
        if term["type"] == "die":
            sub_total += signs[id(term)] * term["total"]
    rolls = [{"terms": terms, "total": norm(sub_total), "formula": sub.text}]
    return emit_pool(node, out, rolls, results, total)
