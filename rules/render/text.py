"""The one-line summary of a result, for logs, chat fallbacks and people."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def to_text(result: Mapping[str, Any]) -> str:
    """``result["text"]``: every resolver writes its own one-line summary.

    A result without one (built by hand, or by an older resolver) falls back to its formula and total.
    """
    text = result.get("text")
    if isinstance(text, str) and text:
        return text
    formula = result.get("formula") or result.get("system") or "roll"
    total = result.get("total")
    return f"{formula} = {total}" if total is not None else str(formula)
