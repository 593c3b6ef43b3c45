"""``tablerelay roll``: the installed console script, run as a person would run it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

import rules
from rules.rng import Scripted
from tests.console import tablerelay_bin

TABLERELAY = Path(tablerelay_bin())


def run(*args: str) -> subprocess.CompletedProcess[str]:
    assert TABLERELAY.exists(), f"the console script is not installed at {TABLERELAY}"
    return subprocess.run(
        [str(TABLERELAY), "roll", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_roll_prints_a_readable_result() -> None:
    done = run("honors_edge.roll", "pool=5k3", "tn=15")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"Honor's Edge 5k3 vs TN 15: \d+, (success|failure).*", lines[0])
    assert lines[1].startswith("  dice:    ")
    # Five dice, two of them shown in parentheses as not kept.
    assert len(re.findall(r"d10:[\d+=]+", lines[1])) == 5
    assert len(re.findall(r"\(d10:", lines[1])) == 2
    assert lines[2].startswith("  formula: 5k3: ")
    total = int(lines[3].removeprefix("  total:   "))
    assert total == sum(int(v) for v in lines[2].removeprefix("  formula: 5k3: ").split(" + "))


def test_json_output_is_the_result() -> None:
    done = run("honors_edge.skill", "attribute=2", "skill=1", "tn=15", "assist_ranks=[2]", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["system"] == "honors_edge.skill"
    assert (result["rolled"], result["kept"]) == (3, 2)
    assert len(result["dice"]) == 3
    for d in result["dice"]:
        assert {"faces", "value", "kept", "chain", "exploded"} <= set(d)
    kept = sum(d["value"] for d in result["dice"] if d["kept"])
    assert result["total"] == kept + 2
    assert isinstance(result["formula"], str)
    assert isinstance(result["text"], str)
    assert result["success"] is (result["total"] >= 15)


def test_json_valued_arguments() -> None:
    done = run(
        "drawsteel.ability",
        'characteristics={"M": 2, "A": 1}',
        'roll_with=["M", "A"]',
        'tiers=["2 damage", "5 + M damage; push 1", "7 + M or A fire damage"]',
        'targets=[{"name": "goblin", "edges": 1}, {"name": "ogre"}]',
        "--json",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["system"] == "drawsteel.ability"
    assert [t["name"] for t in result["targets"]] == ["goblin", "ogre"]


def test_effects_and_requirements_are_shown() -> None:
    done = run("daggerheart.attack", "modifier=3", "experience=2", "spend_fear=true")
    assert done.returncode == 0, done.stderr
    assert "  spends:  1 fear" in done.stdout.splitlines()
    assert "  effect:  fear -1" in done.stdout.splitlines()


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["honors_edge.roll", "pool=5k"], "bad_value"),
        (["honors_edge.roll", "pool=5k3", "tn=true"], "bad_type"),
        (["honors_edge.roll", "pool=5k3", "colour=red"], "unknown_argument"),
        (["honors_edge.roll"], "missing_argument"),
        (["no.such.system"], "unknown_system"),
        (["honors_edge.roll", "pool5k3"], "bad_intent"),
        (["honors_edge.roll", "system=dice", "pool=5k3"], "bad_intent"),
        (["honors_edge.roll", "pool=5k3", "pool=4k2"], "bad_intent"),
        (["drawstel.power", "characteristic=2"], "unknown_system"),  # shaped like a name: not a formula
        (["3d6+"], "bad_formula"),
        (["3d6", "formula=2d6"], "bad_intent"),
        (["1d20", "dialect=owlbear"], "bad_value"),
        (["drawsteel.power", "characteristic=" + "[" * 30_000 + "]" * 30_000], "bad_intent"),  # too deep
    ],
)
def test_a_bad_argument_prints_one_error_line_and_exits_2(args: list[str], code: str) -> None:
    done = run(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert re.fullmatch(rf"error \[{code}\]: [A-Za-z'].*[.!]", lines[0]), lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "formula", "dialect"),
    [
        (["3d6+2"], "3d6 + 2", "foundry"),
        (["2d20kh", "+", "7"], "2d20kh + 7", "foundry"),  # the words before the first key=value
        (["4d6cs>=5"], "4d6cs>=5", "foundry"),  # a formula's own "=" starts no argument
        (["1d20+5", "dialect=roll20"], "1d20 + 5", "roll20"),
        (["d20"], "1d20", "foundry"),
    ],
)
def test_a_first_word_that_names_no_system_is_a_dice_formula(
    args: list[str], formula: str, dialect: str
) -> None:
    # As the Foundry and Roll20 clients read "/tr 4d6kh3" and "!tr 1d20+5".
    done = run(*args, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["system"] == "dice"
    assert result["formula"] == formula
    assert result["dialect"] == dialect
    # The total is the formula's over the dice shown: the same dice again give the same result.
    again = rules.resolve(
        {"system": "dice", "formula": formula, "dialect": dialect},
        rng=Scripted([d["value"] for d in result["dice"]]),
    )
    assert again["total"] == result["total"]


def test_list_shows_every_system_with_its_description() -> None:
    done = run("list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(rules.systems())
    for line, (name, description) in zip(lines, rules.systems().items(), strict=True):
        assert line.split()[0] == name
        assert line.endswith(description)
    listed = json.loads(run("list", "--json").stdout)
    assert listed == rules.systems()


def test_a_value_that_is_not_json_is_a_string() -> None:
    done = run("nexus.test", "attribute_die=d12+1", "difficulty=hard", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["tn"] == 10
    assert result["dice"][0]["faces"] == 12


def test_a_closed_pipe_ends_the_command_quietly() -> None:
    # `tablerelay roll ... | head -1` must not print a BrokenPipeError traceback. The pipe's reading end is
    # closed before the command starts, so its very first write fails.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [str(TABLERELAY), "roll", "list"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr == "", done.stderr
