"""``tablerelay serve`` with tracemalloc on: where the relay's memory per connection goes.

The memory benchmark's diagnostic run starts the relay through this module instead of the console script.
The first SIGUSR1 takes a baseline snapshot; the second writes, to ``$BENCH_TRACE_OUT`` as JSON, the
allocation sites (file:line, with their callers) whose traced size grew most since the baseline. The relay
itself is unchanged: this only wraps its command line.

    python -m bench.relay_traced serve --port 0 --data DIR
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

from relay.cli import main

FRAMES = 6
_baseline: list[tracemalloc.Snapshot] = []


def _snapshot(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001 (signal handler signature)
    snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    if not _baseline:
        _baseline.append(snap)
        return
    stats = snap.compare_to(_baseline[0], "traceback")
    rows = []
    for stat in stats[:40]:
        where = [f"{Path(f.filename).name}:{f.lineno}" for f in stat.traceback]
        rows.append({"size_diff": stat.size_diff, "count_diff": stat.count_diff, "where": where})
    total = sum(s.size_diff for s in stats)
    Path(os.environ["BENCH_TRACE_OUT"]).write_text(json.dumps({"total_diff": total, "top": rows}))


if __name__ == "__main__":
    tracemalloc.start(FRAMES)
    signal.signal(signal.SIGUSR1, _snapshot)
    sys.exit(main(sys.argv[1:]))
