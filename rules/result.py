"""Building results: the fields every result has, in one place (see docs/rules.md)."""

from __future__ import annotations

from typing import Any

Die = dict[str, Any]
Result = dict[str, Any]


def die(faces: int, value: int, kept: bool = True, **marks: Any) -> Die:
    """One die as results carry it: faces, value, kept, and the system's own marks."""
    entry: Die = {"faces": faces, "value": value, "kept": kept}
    entry.update(marks)
    return entry


def make_result(
    system: str,
    dice: list[Die],
    total: int | None,
    formula: str,
    text: str,
    *,
    effects: list[dict[str, Any]] | None = None,
    requires: dict[str, int] | None = None,
    **extra: Any,
) -> Result:
    """A result with the promised fields first; ``effects``/``requires`` only when the roll has them."""
    result: Result = {"system": system, "dice": dice, "total": total, "formula": formula, "text": text}
    result.update(extra)
    if effects:
        result["effects"] = effects
    if requires:
        result["requires"] = requires
    return result


def signed(n: int) -> str:
    """``+ 2`` / ``- 2`` for formulas; ``""`` for zero."""
    if n == 0:
        return ""
    return f" + {n}" if n > 0 else f" - {-n}"
