"""The fuzz targets in the suite: every seed replays clean in-process, and each target runs briefly under
atheris (coverage-guided, a couple of seconds each, the three at once) without a crash, a hang or an OOM.

The long runs are documented in docs/hardening.md; a crash they find becomes a seed under ``corpus/`` (so
every later short run replays it first) and a named regression test beside the code it broke.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).with_name("corpus")
#: Inputs each target runs in the suite beyond its corpus: a count, not a time, so a loaded machine runs
#: as many as an idle one (a time box ran only 47 inputs of one target on a loaded machine).
NEW_RUNS = 200


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_seed_replays_clean(target: str) -> None:
    seeds = sorted(CORPUS.joinpath(target).iterdir())
    assert len(seeds) >= 10, f"the {target} corpus lost its seeds"
    for seed in seeds:
        TARGETS[target](seed.read_bytes())


@pytest.mark.slow
def test_a_short_coverage_guided_run_of_each_target_finds_nothing(tmp_path: Path) -> None:
    runs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    for target in sorted(TARGETS):
        scratch = tmp_path / target
        (scratch / "new").mkdir(parents=True)
        runs_wanted = len(list(CORPUS.joinpath(target).iterdir())) + NEW_RUNS
        command = [
            sys.executable, "-m", "tests.fuzz", target,
            f"-runs={runs_wanted}", "-timeout=20", "-rss_limit_mb=2048",
            f"-artifact_prefix={scratch}/", str(scratch / "new"), str(CORPUS / target),
        ]  # fmt: skip
        log = scratch / "log"
        with log.open("wb") as out:
            runs[target] = (subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT), log)
    for target, (proc, log) in runs.items():
        code = proc.wait(timeout=120)
        text = log.read_text(errors="replace")
        artifacts = [
            p.name for p in log.parent.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-"))
        ]
        assert code == 0, f"{target}: atheris exited with {code}; {artifacts}\n{text[-3000:]}"
        assert not artifacts, artifacts
        done = re.search(r"Done (\d+) runs", text)
        assert done is not None, text[-3000:]
        seeds = len(list(CORPUS.joinpath(target).iterdir()))
        assert int(done.group(1)) >= seeds + NEW_RUNS, f"{target} ran only {done.group(1)} inputs"
        assert "INITED cov:" in text, "libFuzzer saw no coverage: the code was not instrumented"
