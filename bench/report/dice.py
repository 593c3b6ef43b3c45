"""Section 7 of the page, dice: tablerelay's dice engine against avrae's ``d20``."""

from __future__ import annotations

from typing import Any

from bench.report.common import n0, ratio, table


def dice_section(data: dict[str, Any]) -> str:
    body = []
    for f in data["formulas"]:
        label = f"`{f['ours']}`" if f["ours"] == f["d20"] else f"`{f['ours']}` (d20: `{f['d20']}`)"
        body.append((label, n0(f["ours_rate"]), n0(f["d20_rate"]), ratio(f["ours_rate"], f["d20_rate"])))
    body.append(("**median over formulas**", "", "", f"**{data['formula_median']:.2f}×**"))
    for i in data["intents"]:
        body.append(
            (
                f"`{i['intent']['system']}` (d20: `{i['d20']}`)",
                n0(i["ours_rate"]),
                n0(i["d20_rate"]),
                ratio(i["ours_rate"], i["d20_rate"]),
            )
        )
    full = data.get("resolve_full")
    if full:
        body.append(
            (
                f"`dice` system, `{full['formula']}`, full result via `resolve`",
                n0(full["ours_rate"]),
                n0(full["d20_rate"]),
                ratio(full["ours_rate"], full["d20_rate"]),
            )
        )
    method = data.get("method") or "median of alternating batches"
    median = data["formula_median"]
    medians = [f"over the formulas {median:.2f}×"]
    if data.get("intent_median") is not None:
        medians.append(f"over the system intents {data['intent_median']:.2f}×")
    if data.get("suite_median") is not None:
        medians.append(f"over both {data['suite_median']:.2f}×")
    verdict_text = "met" if median >= 5 else "not met"
    return f"""## 7. Dice

The notation issue's benchmark, `bench/sections/dice.py` (run alone:
`.venv/bin/python -m bench.sections.dice`; the suite reads the same measurements through
`bench.sections.dice.results()`): each formula is rolled with tablerelay's engine (`rules.dice.evaluate`
with `SecureDice`, producing the total, the evaluated terms and the one-line text) and with avrae's
`d20.roll` (total, tree and result string) in alternating timed batches
({data.get("rounds", "?")} rounds of {data.get("batch_seconds", 0) * 1000:.0f} ms; {method}). System
intents go through `rules.resolve` and are compared with `d20` rolling the same dice. Machine:
{data.get("machine", "?")}.

{table(["formula", "ours/s", "d20/s", "ratio"], body)}

Median ratios: {", ".join(medians)}. The notation issue's target, a median of 5× over the formulas, is
{verdict_text} in this run. How the engine gets there (cached parsing, a flat fast path for sums of plain,
keep/drop and exploding dice, dice drawn in pools) is described with the dice engine in
[notation.md](notation.md).
"""
