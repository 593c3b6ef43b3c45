"""Dice-term modifiers in Foundry VTT and Roll20 notation, read into one neutral form and written back out.

The two notations name the same mechanics differently and sometimes read the same text differently:
Roll20's ``3d6>4`` counts successes at 4 *or more* where Foundry writes ``3d6cs>=4``, and Roll20's
``cs20`` only colours a critical where Foundry's ``cs20`` counts successes. A renderer must therefore
never copy a modifier from one notation into the other; it reads it (``parse``) and writes it
(``foundry_text``, ``roll20_text``, ``roll20_mods``). Mechanics one side lacks are left out of that side's
text (the evaluated results still carry their effect: a dropped die stays dropped).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from rules.dice.foundry import explicit

Dialect = Literal["foundry", "roll20"]
Kind = Literal[
    "explode", "keep", "drop", "reroll", "success", "failure", "crit", "fumble", "sort", "match", "other"
]


@dataclass(frozen=True)
class Mod:
    """One modifier, whatever notation it was written in.

    ``comp``/``point`` is the condition (``">="`` and 5 for "5 or more"); ``point`` None means the die's
    default (its maximum for explosions and successes, 1 for rerolls and failures). ``variant`` refines
    the kind: explode ``x`` (recursive), ``xo`` (once), ``compound``, ``penetrate``; reroll ``recursive`` or
    ``once``; failure ``count``, ``deduct`` or ``subtract``; keep/drop and sort carry ``h``/``l`` and
    ``a``/``d`` in ``end``. ``other`` is a mechanic only its own notation has, kept as written in ``raw``.
    """

    kind: Kind
    raw: str
    variant: str = ""
    comp: str | None = None
    point: int | None = None
    count: int | None = None
    end: str = ""


_FOUNDRY = re.compile(
    r"(?P<cmd>xo|x|rr|r|kh|kl|k|dh|dl|df|d|min|max|even|odd|cs|cf|sf|ms|c)"
    r"(?P<a>\d+)?(?P<comp><=|>=|<|>|=)?(?P<b>\d+)?",
    re.IGNORECASE,
)
_ROLL20 = re.compile(
    r"(?P<cmd>!!|!p|!|ro|r|kh|kl|k|dh|dl|d|cs|cf|f|sa|sd|s|mt|m|)"
    r"(?P<comp><=|>=|<|>|=)?(?P<b>\d+)?",
    re.IGNORECASE,
)


def parse(modifiers: list[str], dialect: Dialect) -> list[Mod]:
    """Read modifiers as written in ``dialect``; text that is no modifier is kept as ``other``."""
    text = "".join(modifiers)
    return _parse_foundry(text) if dialect == "foundry" else _parse_roll20(text)


def _parse_foundry(text: str) -> list[Mod]:
    mods: list[Mod] = []
    pos = 0
    while pos < len(text):
        match = _FOUNDRY.match(text, pos)
        if match is None or match.end() == pos:
            mods.append(Mod("other", text[pos:]))
            break
        pos = match.end()
        raw = match[0].lower()
        cmd = match["cmd"].lower()
        a = int(match["a"]) if match["a"] else None
        comp = match["comp"]
        b = int(match["b"]) if match["b"] else None
        if cmd in ("x", "xo", "r", "rr"):
            # Foundry: "x6" and "r1" name the target; "xo2>=5" is at most 2 explosions on 5 or more.
            count, point = (a, b) if comp or b is not None else (None, a)
            kind: Kind = "explode" if cmd.startswith("x") else "reroll"
            variant = {"x": "x", "xo": "xo", "r": "once", "rr": "recursive"}[cmd]
            mods.append(Mod(kind, raw, variant, comp or ("=" if point is not None else None), point, count))
        elif cmd in ("k", "kh", "kl", "d", "dh", "dl"):
            end = cmd[1] if len(cmd) == 2 else ("h" if cmd == "k" else "l")
            mods.append(Mod("keep" if cmd[0] == "k" else "drop", raw, count=a or 1, end=end))
        elif cmd in ("cs", "cf", "df", "sf"):
            point = b if b is not None else a
            kind = "success" if cmd == "cs" else "failure"
            variant = {"cs": "", "cf": "count", "df": "deduct", "sf": "subtract"}[cmd]
            mods.append(Mod(kind, raw, variant, comp or ("=" if point is not None else None), point))
        else:
            mods.append(Mod("other", raw))
    return mods


def _roll20_comp(comp: str | None) -> str:
    # In Roll20 a bare ">" or "<" includes the point itself.
    return {">": ">=", "<": "<=", None: "="}.get(comp, comp or "=")


def _parse_roll20(text: str) -> list[Mod]:
    mods: list[Mod] = []
    pos = 0
    while pos < len(text):
        match = _ROLL20.match(text, pos)
        if match is None or match.end() == pos:
            mods.append(Mod("other", text[pos:]))
            break
        pos = match.end()
        raw = match[0]
        cmd = match["cmd"].lower()
        comp = match["comp"]
        b = int(match["b"]) if match["b"] else None
        cond = (_roll20_comp(comp), b) if b is not None else (None, None)
        if cmd in ("!", "!!", "!p"):
            variant = {"!": "x", "!!": "compound", "!p": "penetrate"}[cmd]
            mods.append(Mod("explode", raw, variant, *cond))
        elif cmd in ("r", "ro"):
            mods.append(Mod("reroll", raw, "once" if cmd == "ro" else "recursive", *cond))
        elif cmd in ("k", "kh", "kl", "d", "dh", "dl"):
            end = cmd[1] if len(cmd) == 2 else ("h" if cmd == "k" else "l")
            mods.append(Mod("keep" if cmd[0] == "k" else "drop", raw, count=b or 1, end=end))
        elif cmd in ("cs", "cf"):
            mods.append(Mod("crit" if cmd == "cs" else "fumble", raw, "", *cond))
        elif cmd == "f":
            mods.append(Mod("failure", raw, "deduct", *cond))
        elif cmd in ("s", "sa", "sd"):
            mods.append(Mod("sort", raw, end="d" if cmd == "sd" else "a"))
        elif cmd in ("m", "mt"):
            mods.append(Mod("match", raw, "total" if cmd == "mt" else "", count=b))
        elif cmd == "" and b is not None:
            mods.append(Mod("success", raw, "", *cond))
        else:
            mods.append(Mod("other", raw))
    return mods


def _cond_foundry(mod: Mod) -> str:
    if mod.point is None:
        return ""
    if mod.comp in (None, "="):
        return str(mod.point)
    return f"{mod.comp}{mod.point}"


def foundry_text(mod: Mod, source: Dialect) -> str | None:
    """The modifier in Foundry notation, or None where Foundry has no such mechanic."""
    if source == "foundry":
        return mod.raw
    if mod.kind == "explode":
        head = "xo" if mod.variant == "xo" else "x"
        if mod.count is not None:
            return f"{head}{mod.count}{mod.comp or '='}{mod.point}"
        return head + _cond_foundry(mod)
    if mod.kind in ("keep", "drop"):
        return f"{mod.kind[0]}{mod.end}{mod.count}"
    if mod.kind == "reroll":
        head = "r" if mod.variant == "once" else "rr"
        if mod.count is not None:
            return f"{head}{mod.count}{mod.comp or '='}{mod.point}"
        return head + _cond_foundry(mod)
    if mod.kind in ("success", "failure"):
        head = {"": "cs", "count": "cf", "deduct": "df", "subtract": "sf"}[mod.variant]
        if mod.point is None:
            return head
        return f"{head}{mod.comp or '='}{mod.point}"
    return None


def foundry_texts(mods: list[Mod], source: Dialect, faces: int | None) -> list[str]:
    """The modifiers in Foundry notation, each written so that Foundry reads it back on its own.

    Foundry runs the letters of consecutive modifiers together and splits them without their numbers
    (``xkh3`` is ``x`` then ``kh``, the 3 lost; see ``rules.dice.parser``), so a bare modifier followed
    by another is written with the number Foundry assumes for it: ``x`` and ``kh3`` on a d10 become
    ``x10kh3``.
    """
    texts = [text for mod in mods if (text := foundry_text(mod, source))]
    return [
        (explicit(text, faces) or text) if i + 1 < len(texts) and text.isalpha() else text
        for i, text in enumerate(texts)
    ]


def _strict(comp: str | None, point: int) -> tuple[str, int]:
    """Whole-number dice: ``> 4`` is ``>= 5``; Roll20 writes only inclusive comparisons."""
    if comp == ">":
        return ">=", point + 1
    if comp == "<":
        return "<=", point - 1
    return (comp or "="), point


def _cond_roll20(mod: Mod) -> str:
    if mod.point is None:
        return ""
    comp, point = _strict(mod.comp, mod.point)
    return {">=": ">", "<=": "<", "=": ""}.get(comp, "") + str(point)


def roll20_text(mod: Mod, faces: int) -> str | None:
    """The modifier in Roll20 notation, or None where Roll20 has no such mechanic."""
    if mod.kind == "explode":
        head = {"compound": "!!", "penetrate": "!p"}.get(mod.variant, "!")
        return head + _cond_roll20(mod)
    if mod.kind in ("keep", "drop"):
        return f"{mod.kind[0]}{mod.end}{mod.count}"
    if mod.kind == "reroll":
        head = "ro" if mod.variant == "once" else "r"
        return head + (_cond_roll20(mod) or "1")
    if mod.kind == "success":
        cond = _cond_roll20(mod) or str(faces)
        return cond if cond[0] in "<>" else "=" + cond
    if mod.kind == "failure" and mod.variant == "count":
        # Foundry's cf counts failures as the total; Roll20 writes that as a success condition.
        cond = _cond_roll20(mod) or "1"
        return cond if cond[0] in "<>" else "=" + cond
    if mod.kind == "failure" and mod.variant == "deduct":
        return "f" + (_cond_roll20(mod) or "1")
    if mod.kind in ("crit", "fumble"):
        return ("cs" if mod.kind == "crit" else "cf") + _cond_roll20(mod)
    if mod.kind == "sort":
        return "s" + mod.end
    if mod.kind == "match":
        return "mt" if mod.variant == "total" else "m"
    return None


def _condition(mod: Mod, default: int) -> dict[str, Any]:
    comp, point = _strict(mod.comp, mod.point if mod.point is not None else default)
    return {"comp": "==" if comp == "=" else comp, "point": point}


def roll20_mods(mods: list[Mod], faces: int) -> dict[str, Any]:
    """The ``mods`` object of a Roll20 roll-result ``R`` (or ``G``) entry."""
    out: dict[str, Any] = {}
    for mod in mods:
        if mod.kind in ("keep", "drop"):
            out[mod.kind] = {"end": mod.end, "count": mod.count}
        elif mod.kind == "explode":
            key = {"compound": "compounding", "penetrate": "penetrating"}.get(mod.variant, "exploding")
            out[key] = _condition(mod, faces)
        elif mod.kind == "success":
            out["success"] = _condition(mod, faces)
        elif mod.kind == "failure" and mod.variant == "count":
            out["success"] = _condition(mod, 1)
        elif mod.kind == "failure" and mod.variant == "deduct":
            out["failure"] = _condition(mod, 1)
        elif mod.kind == "reroll":
            entry = _condition(mod, 1)
            if mod.variant == "once":
                entry["maxrerolls"] = 1
            out.setdefault("reroll", []).append(entry)
        elif mod.kind in ("crit", "fumble"):
            key = "customCrit" if mod.kind == "crit" else "customFumble"
            out.setdefault(key, []).append(_condition(mod, faces if mod.kind == "crit" else 1))
        elif mod.kind == "sort":
            out["sorting"] = mod.end
        elif mod.kind == "match":
            out["match"] = {"total": mod.variant == "total", "min": mod.count or 2}
    return out


def counts_successes(mods: list[Mod]) -> bool:
    """Whether the term totals successes rather than faces (Roll20's resultType "success")."""
    return any(m.kind == "success" or (m.kind == "failure" and m.variant != "subtract") for m in mods)
