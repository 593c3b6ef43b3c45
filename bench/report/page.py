"""The whole benchmark page: its head, the sections of one run's results in order, the recorded cluster and
soak sections and the table of changes, written to docs/benchmarks.md with the plots beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report.appends import appends_section, plot_appends
from bench.report.common import find
from bench.report.dice import dice_section
from bench.report.fairness import fairness_goals, fairness_section
from bench.report.fanout import fanout_section, plot_fanout
from bench.report.goals import goals_section
from bench.report.growth import growth_section, plot_growth
from bench.report.hosted import hosted_goals, hosted_section, plot_hosted
from bench.report.latency import latency_section, plot_latency
from bench.report.machine import machine_section, method_section
from bench.report.memory import memory_section, plot_memory
from bench.report.signing import signing_section
from bench.report.tables import plot_tables, tables_section, tables_split
from bench.tools.harness import ROOT

DOC = ROOT / "docs" / "benchmarks.md"
IMAGES = ROOT / "docs" / "images"
CHANGES = ROOT / "bench" / "changes.md"  # the record of speed work, written by hand
# The last soak run's section, written by `python -m bench.soak --markdown bench/soak.md` (docs/hardening.md);
# a soak takes ten minutes, so the suite includes its recorded result rather than running one.
SOAK = ROOT / "bench" / "soak.md"
# The last cluster run's section, written by `python -m bench.sections.cluster` (a NATS cluster and its own
# minutes).
CLUSTER = ROOT / "bench" / "cluster.md"


def latest_updates(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The partial runs whose sections the page still shows: each section under its latest run only, the
    runs in the order they were made (a section measured again replaces what its earlier run wrote)."""
    seen: set[str] = set()
    kept: list[dict[str, Any]] = []
    for update in reversed(updates):
        fresh = [section for section in update["sections"] if section not in seen]
        seen.update(fresh)
        if fresh:
            kept.append({**update, "sections": fresh})
    return kept[::-1]


def write(results: dict[str, Any], doc: Path = DOC, images: Path = IMAGES) -> list[Path]:
    """Write the page and its plots; ``doc``'s images are referenced as ``images/…`` beside it."""
    images.mkdir(parents=True, exist_ok=True)
    sections = results["sections"]
    profiles = results.get("profiles", {})
    goals: dict[str, Any] = {}
    parts: list[str] = []
    written: list[Path] = []
    if "fanout" in sections:
        text, g = fanout_section(sections["fanout"], profiles)
        goals.update(g)
        parts.append(text)
        plot_fanout(sections["fanout"], images / "bench-fanout.png")
        written.append(images / "bench-fanout.png")
    if "latency" in sections:
        text, g = latency_section(sections["latency"])
        goals.update(g)
        parts.append(text)
        plot_latency(sections["latency"], images / "bench-latency.png")
        written.append(images / "bench-latency.png")
    if "memory" in sections:
        text, g = memory_section(sections["memory"])
        goals.update(g)
        parts.append(text)
        plot_memory(sections["memory"]["runs"], images / "bench-memory.png")
        written.append(images / "bench-memory.png")
    if "appends" in sections:
        text, g = appends_section(sections["appends"], profiles.get("appends"), profiles.get("appends_rooms"))
        goals.update(g)
        parts.append(text)
        plot_appends(sections["appends"], images / "bench-appends.png")
        written.append(images / "bench-appends.png")
    if "tables" in sections:
        text, g = tables_section(sections["tables"], profiles.get("tables"))
        goals.update(g)
        parts.append(text)
        split = tables_split(find(sections["tables"], kind="relay"), profiles.get("tables"))
        if split is not None:
            plot_tables(sections["tables"], split, images / "bench-tables.png")
            written.append(images / "bench-tables.png")
    if "growth" in sections:
        parts.append(growth_section(sections["growth"]))
        plot_growth(sections["growth"], images / "bench-growth.png")
        written.append(images / "bench-growth.png")
    if "signing" in sections:
        text, g = signing_section(sections["signing"])
        goals.update(g)
        parts.append(text)
    if "dice" in sections:
        parts.append(dice_section(sections["dice"]))
    if "hosted" in sections:
        goals.update(hosted_goals(sections["hosted"]))
        parts.append(hosted_section(sections["hosted"], (results.get("load") or {}).get("hosted")))
        plot_hosted(sections["hosted"], images / "bench-hosted.png")
        written.append(images / "bench-hosted.png")
    # Always written: before its first recorded run the section states its goal and how to measure it.
    goals.update(fairness_goals(sections.get("fairness")))
    parts.append(fairness_section(sections.get("fairness")))
    errors = dict(results.get("errors") or {})
    for i, problem in enumerate(results.get("problems") or [], 1):
        errors[f"measurement {i}"] = problem
    failed = ""
    if errors:
        failed = (
            "## Sections that failed in this run\n\n"
            + "\n".join(f"- {k}: `{v}`" for k, v in errors.items())
            + "\n"
        )
    minutes = results.get("duration", 0) / 60
    updates = latest_updates(results.get("updated") or [])
    updated = (
        " Since then, some sections were measured again, each shown here from its latest run: "
        + "; ".join(f"{', '.join(u['sections'])} ({u['started']} UTC)" for u in updates)
        + "."
        if updates
        else ""
    )
    head = f"""# Benchmarks

tablerelay against its peers: a bare `websockets` server (the floor of the stack it is built on) and
python-socketio (the Socket.IO stack), measured in the same run, on the same machine, with the same client
harness. Everything on this page was written by the suite from one run ({results.get("mode", "full")} mode,
started {results["started"]} UTC, {minutes:.1f} minutes).{updated}

```sh
./scripts/bench            # installs what it needs, runs everything, rewrites this page and its plots
./scripts/bench --quick    # smaller sizes, about a minute
.venv/bin/python -m bench --only fanout,latency   # some sections; the others keep their last results
.venv/bin/python -m bench.report                  # rewrite this page from bench/results/latest.json
./scripts/bench --no-report --results /tmp/run.json   # a run to read, the page left as it is
.venv/bin/python -m bench.report /tmp/run.json --doc /tmp/page/benchmarks.md   # its page, elsewhere
```

The suite needs Node 20+ (the client harness) and the `bench` extra (`d20`, `matplotlib`,
`python-socketio`, `aiohttp`); `./scripts/bench` installs the extra, `py-spy` for the profiles and the
harness's locked npm packages. It is not part of the test suite and makes no timed assertions.
"""
    page = "\n".join(
        [
            head,
            goals_section(goals, results),
            machine_section(results),
            method_section(results),
            *parts,
            *([CLUSTER.read_text().rstrip() + "\n"] if CLUSTER.exists() else []),
            *([SOAK.read_text().rstrip() + "\n"] if SOAK.exists() else []),
            CHANGES.read_text().rstrip() + "\n",
            failed,
        ]
    )
    doc.write_text(page.rstrip() + "\n")
    written.insert(0, doc)
    return written
