"""Latency: from a roll's intent leaving the driver to the last member of the room receiving its event.

The driver sends rolls at a steady rate (20 per second into a room of 1,000 by default: 20,000 deliveries
a second) and notes when each left; every receiver process notes, per event, when the last of its
connections got it; the latest of those, minus the send time, is the event's latency. Both clocks are
CLOCK_MONOTONIC on the same machine. The relay's events are matched to rolls through the acks (which carry
the seq); a peer numbers the events of a room in the order the rolls arrive, as the driver does.

Receivers decode every frame here (the seq is inside), as a real client does; the relay and the bare server
are measured at the same delivery rate, with the same receivers.

The two servers take turns (relay, bare, relay, bare, …) and each one's samples are pooled: p99 over a few
hundred rolls is the third or fourth slowest, where one run of a hundred would make it the slowest alone,
and taking turns spreads a noisy minute on the shared machine over both servers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.sections.fanout import open_room_clients
from bench.tools import servers
from bench.tools.harness import BenchError, close_all, gather_expect
from bench.tools.servers import Calibration


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..100) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


async def measure(
    kind: str,
    run_dir: Path,
    calibration: Calibration,
    *,
    members: int,
    rate: float,
    seconds: float,
    warmup: float = 1.0,
) -> dict[str, Any]:
    server = await servers.start(kind, run_dir, calibration, f"latency-{members}")
    try:
        driver, receivers = await open_room_clients(server, run_dir, f"latency-{kind}", 1, members)
        try:
            results = []
            for phase, length in (("warmup", warmup), ("measure", seconds)):
                events = max(1, round(rate * length))
                for group in receivers:
                    group.send(cmd="go", expect=events, track=True, timeout=length + 60)
                await gather_expect(receivers, "armed", 30)
                driver.send(cmd="paced", n=events, rate=rate, timeout=length + 60)
                sent = await driver.expect("paced", length + 90)
                done = await gather_expect(receivers, "done", length + 90)
                if phase == "measure":
                    results = _latencies(sent, done)
        finally:
            await close_all([driver, *receivers])
    finally:
        await server.stop()
    if not results:
        raise BenchError(f"latency {kind}: no event reached every receiver")
    return {
        "kind": kind,
        "members": members,
        "rate": rate,
        "seconds": seconds,
        "events": len(results),
        "p50_ms": percentile(results, 50),
        "p90_ms": percentile(results, 90),
        "p99_ms": percentile(results, 99),
        "max_ms": max(results),
        "samples_ms": [round(x, 3) for x in results],
    }


def pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from several runs of the same server: their samples together, percentiles over all."""
    samples = [x for r in runs for x in r["samples_ms"]]
    return {
        **runs[0],
        "runs": len(runs),
        "seconds": sum(r["seconds"] for r in runs),
        "events": len(samples),
        "p50_ms": percentile(samples, 50),
        "p90_ms": percentile(samples, 90),
        "p99_ms": percentile(samples, 99),
        "max_ms": max(samples),
        "samples_ms": samples,
    }


def _latencies(sent: dict[str, Any], done: list[dict[str, Any]]) -> list[float]:
    """Per event: the latest receipt over all receiver processes minus the send time (ms)."""
    last: dict[tuple[int, int], float] = {}
    seen: dict[tuple[int, int], int] = {}
    for report in done:
        for target, pairs in enumerate(report["seqs"]):
            for seq, at in pairs:
                key = (target, int(seq))
                last[key] = max(last.get(key, 0.0), at)
                seen[key] = seen.get(key, 0) + 1
    out: list[float] = []
    for target, seq, at in sent["sends"]:
        if seq is None:
            continue
        key = (target, int(seq))
        if seen.get(key) == len(done):
            out.append(last[key] - at)
    return out
