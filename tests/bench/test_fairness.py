"""The fair dice section of the benchmark suite (bench.sections.fairness) end to end at a tiny size: real
relays with fair dice on and off, the Node rollers and the Python GM and witnesses, then the page written
from its result. It checks counts and the report's keys, never a time or a ratio (speed is bench/'s)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.report.fairness import fairness_goal_rows, fairness_goals, fairness_section
from bench.sections import fairness
from bench.tools import servers
from bench.tools.harness import ROOT

pytestmark = pytest.mark.slow
PLAYERS = 5
ROLLS = 4  # per round, each side


async def test_the_section_rolls_on_both_sides_uses_every_witness_and_reports_its_figures(
    tmp_path: Path,
) -> None:
    assert shutil.which("node"), "node (20+) is needed for the benchmark's client harness"
    assert (ROOT / "bench" / "receivers" / "node_modules").exists(), "npm ci --prefix bench/receivers"
    calibration = await servers.calibrate(tmp_path)
    data = await fairness.measure(
        tmp_path,
        calibration,
        shapes=((1, 3),),
        rounds=2,
        seconds=0.3,
        lead=0.1,
        players=PLAYERS,
        latency_rolls=ROLLS,
        latency_rounds=2,
        # A loaded test machine must not let a witness miss the wait: the counts below need every value.
        witness_wait_ms=10_000,
        say=lambda _text: None,
    )

    (shape,) = data["acked"]
    assert (shape["rooms"], shape["rollers_per_room"]) == (1, 3)
    for side in ("on", "off"):
        assert len(shape[side]) == 2, "one window a round"
        for window in shape[side]:
            assert window["acks"] > 0
            assert window["errors"] == {}

    gm = data["witnesses"]
    rolls = 2 * ROLLS
    with_witnesses, alone = gm["witnessed"], gm["unwitnessed"]
    assert with_witnesses["rolls"] == alone["rolls"] == rolls
    assert with_witnesses["witnessed"] == rolls, "every GM roll named its pending event"
    assert with_witnesses["witness_values"] == PLAYERS * rolls, "each roll carries every witness's value"
    assert with_witnesses["answers"] >= PLAYERS * rolls
    assert alone["witnessed"] == alone["witness_values"] == alone["answers"] == 0
    for side in (with_witnesses, alone):
        assert {"p50_ms", "p99_ms", "max_ms"} <= set(side)
        assert len(side["rounds"]) == 2

    goals = fairness_goals(data)
    assert {"fair_appends_1x3", "fair_witness_p50", "fair_witness_p99"} <= set(goals)

    # The page's section and goal rows from this result as it comes back from the results file (the whole
    # page also draws every section's plots, which needs the bench extra's matplotlib; the tests do not).
    data = json.loads(json.dumps(data))
    section = fairness_section(data)
    rows = fairness_goal_rows(fairness_goals(data))
    text = section + "\n" + "\n".join("| " + " | ".join(row) + " |" for row in rows)
    assert "## 10. Fair dice" in text
    assert "| one room of 3 rollers |" in text
    assert "acked player rolls/s (one room of 3 rollers), fair dice on ÷ off | ≥ 0.95× |" in text
    assert f"| with {PLAYERS} witnesses |" in text
    assert "| witnessed ÷ unwitnessed |" in text
    assert "Not measured" not in text.split("## 10. Fair dice")[1].split("\n## ")[0]
