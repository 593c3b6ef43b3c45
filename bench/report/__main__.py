"""Write docs/benchmarks.md and docs/images/bench-*.png from a run's results.

    python -m bench.report [bench/results/latest.json] [--doc docs/benchmarks.md]

Every number in the document comes from the results file of one run; the prose around them says how they
were measured and reads the profiles that came with them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.report.page import DOC, write
from bench.tools.harness import ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.split("\n")[0])
    latest = ROOT / "bench" / "results" / "latest.json"
    parser.add_argument("results", nargs="?", type=Path, default=latest, help="a run's JSON")
    parser.add_argument(
        "--doc",
        type=Path,
        default=DOC,
        help="the page to write (its plots go to images/ beside it): a run can be read without replacing "
        "the recorded page",
    )
    args = parser.parse_args(argv)
    try:
        results = json.loads(args.results.read_text())
    except (OSError, ValueError) as exc:
        parser.error(f"cannot read the results {args.results}: {exc}")
    for out in write(results, doc=args.doc, images=args.doc.parent / "images"):
        print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
