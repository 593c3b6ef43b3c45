"""Sample results for the bridge's node tests: every system and the dice formulas, resolved by the rules
core with the scripted RNG (tests/rules/render/samples.py), plus random rolls, each with the relay's Roll20
chat line (``to_roll20``) without and with a label."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rules.render import to_roll20
from tests.rules.render.samples import formula_results, random_results, scripted_results

#: A label with every character Roll20 could act on.
LABEL = "Ana's [[1d20]] {{x=y}} | @{hp} %{a} ?{q} #macro &{template:t} $[[0]] = ! * ~ ` ^ \\ < > \" é ✓"


def sample(name: str, result: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "system": result["system"],
        "total": result["total"],
        "text": result["text"],
        "chat": to_roll20(result)["chat"],
        "label": LABEL,
        "chat_labelled": to_roll20(result, label=LABEL)["chat"],
    }


def all_samples(random_rounds: int = 2) -> list[dict[str, Any]]:
    out = [sample(n, r) for n, r in scripted_results()]
    out += [sample(n, r) for n, r in formula_results()]
    out += [sample(f"random {i}: {r['system']}", r) for i, r in enumerate(random_results(random_rounds))]
    return out


def write_samples(path: Path, random_rounds: int = 2) -> int:
    samples = all_samples(random_rounds)
    path.write_text(json.dumps(samples, ensure_ascii=False))
    return len(samples)
