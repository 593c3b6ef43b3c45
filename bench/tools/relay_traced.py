"""``tablerelay serve`` with tracemalloc on: where the relay's memory per connection goes.

The memory benchmark's diagnostic run starts the relay through this module instead of the console script.
The first SIGUSR1 takes a baseline snapshot; the second writes, to ``$BENCH_TRACE_OUT`` as JSON, the
allocation lines and the files whose traced size grew most since the baseline. The relay
itself is unchanged: this only wraps its command line.

    python -m bench.tools.relay_traced serve --port 0 --data DIR
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

from relay.ops.cli import main

FRAMES = 1
_baseline: list[tracemalloc.Snapshot] = []


def _snapshot(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001 (signal handler signature)
    snap = tracemalloc.take_snapshot()
    if not _baseline:
        _baseline.append(snap)
        return
    # Grouping a snapshot walks every trace, which takes seconds: group once, by line, and sum files.
    lines: list[dict[str, object]] = []
    files: dict[str, list[int]] = {}
    total = 0
    for stat in snap.compare_to(_baseline[0], "lineno"):
        where = stat.traceback[0]
        name = _short(where.filename)
        total += stat.size_diff
        per_file = files.setdefault(name, [0, 0])
        per_file[0] += stat.size_diff
        per_file[1] += stat.count_diff
        if len(lines) < 25:
            lines.append(
                {
                    "size_diff": stat.size_diff,
                    "count_diff": stat.count_diff,
                    "where": f"{name}:{where.lineno}",
                }
            )
    ranked = sorted(files.items(), key=lambda item: -item[1][0])[:15]
    out = {
        "total_diff": total,
        "lineno": lines,
        "filename": [{"size_diff": v[0], "count_diff": v[1], "where": k} for k, v in ranked],
    }
    Path(os.environ["BENCH_TRACE_OUT"]).write_text(json.dumps(out))


def _short(filename: str) -> str:
    for marker in ("site-packages/", "lib/python3.11/", "/work/main/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


if __name__ == "__main__":
    tracemalloc.start(FRAMES)
    signal.signal(signal.SIGUSR1, _snapshot)
    sys.exit(main(sys.argv[1:]))
