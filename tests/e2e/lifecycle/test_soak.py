"""``python -m bench.soak`` as a person runs it, shortened: it starts its own server on loopback, drives 50
clients through every kind of traffic it has, and passes its own checks (no lost acknowledged event, no
internal error, no protocol error, flat RSS and descriptors). The full run is documented in
docs/hardening.md; its result is in docs/benchmarks.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SECONDS = 15
ROOT = Path(__file__).resolve().parents[3]  # bench/ is run from the checkout


@pytest.mark.slow
def test_a_short_soak_passes_its_checks(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    done = subprocess.run(
        [
            sys.executable, "-m", "bench.soak", "--minutes", str(SECONDS / 60),
            "--clients", "50", "--rooms", "10",
            "--report-every", "5", "--seed", "1", "--json", str(out), "--markdown", str(tmp_path / "soak.md"),
        ],
        capture_output=True,
        text=True,
        timeout=SECONDS + 120,
        check=False,
        cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "soak passed" in done.stdout
    assert "loop lag p99" in done.stdout, "an interval line was printed"
    results = json.loads(out.read_text())
    assert results["ok"] is True
    checks = results["checks"]
    assert all(check["ok"] is True for check in checks.values()), checks
    lost = checks["no lost acknowledged event"]
    assert lost["acked"] > 20, "the clients made requests that were acknowledged and then checked"
    assert lost["events_stored"] >= lost["acked"]
    counts = results["counts"]
    assert counts["events received"] > lost["acked"], "events reached other clients"
    assert counts.get("reconnects", 0) + counts.get("malformed frames", 0) > 0, counts
    samples = results["samples"]
    assert all(s["rss"] and s["fds"] for s in samples), "RSS and descriptors were read from /proc"
    assert all(s["lag_p99_ms"] is not None for s in samples), "the loop lag was read from /healthz"
    assert "## Soak" in (tmp_path / "soak.md").read_text()
