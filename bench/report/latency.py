"""Section 2 of the page, latency: a roll's intent to the last member's receipt, with its plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report.common import COLORS, LABELS, find, n1, pyplot, ratio, table


def plot_latency(rows: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for r in rows:
        xs = sorted(r["samples_ms"])
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.step(
            xs,
            ys,
            where="post",
            label=f"{LABELS[r['kind']]} (p99 {r['p99_ms']:.1f} ms)",
            color=COLORS[r["kind"]],
        )
    ax.set_xscale("log")
    ax.set_xlabel("roll intent → last member's receipt (ms, log)")
    ax.set_ylabel("fraction of rolls")
    first = rows[0]
    ax.set_title(f"Latency at {first['rate']:g} rolls/s into a room of {first['members']:,}")
    ax.legend(frameon=False, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def latency_section(rows: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    body = [
        (
            LABELS[r["kind"]],
            f"{r['rate']:g}",
            f"{r['members']:,}",
            str(r["events"]),
            n1(r["p50_ms"]),
            n1(r["p90_ms"]),
            n1(r["p99_ms"]),
            n1(r["max_ms"]),
        )
        for r in rows
    ]
    relay = find(rows, kind="relay")
    bare = find(rows, kind="bare")
    goals: dict[str, Any] = {}
    extra = ""
    if relay and bare:
        goals["latency_p99"] = relay["p99_ms"] / bare["p99_ms"]
        extra = (
            f"Relay ÷ bare: p50 {ratio(relay['p50_ms'], bare['p50_ms'])}, "
            f"p99 {ratio(relay['p99_ms'], bare['p99_ms'])}."
        )
    rate = rows[0]["rate"] * rows[0]["members"] if rows else 0
    text = f"""## 2. Latency

From the moment the driver sends a roll to the moment the *last* member of the room has its event, at a
steady {rows[0]["rate"]:g} rolls per second into a room of {rows[0]["members"]:,} ({rate:,.0f} deliveries per
second). {_latency_runs(rows[0])} Receivers decode every frame (the seq is
inside) and note, per event, when the last of their connections got it; driver and receivers read the same
monotonic clock. The relay's rolls are matched to events through their acks; the bare server numbers
events in the order rolls arrive, as the driver does. Both at the same delivery rate, same receivers.

{table(["server", "rolls/s", "members", "rolls", "p50 ms", "p90 ms", "p99 ms", "max ms"], body)}

{extra}

![Latency](images/bench-latency.png)

### What bounds it

{_latency_bounds(rows)}
"""
    return text, goals


def _latency_runs(row: dict[str, Any]) -> str:
    runs = int(row.get("runs", 1))
    each = row["seconds"] / runs
    if runs == 1:
        return f"One run of {each:g} s after a one-second warm-up."
    return (
        f"Each server ran {runs} times for {each:g} s (after a one-second warm-up each), the two taking "
        "turns, and each server's rolls are pooled: p99 over a few hundred rolls is the third or fourth "
        "slowest rather than the single slowest of one short run."
    )


def _latency_bounds(rows: list[dict[str, Any]]) -> str:
    relay = find(rows, kind="relay")
    bare = find(rows, kind="bare")
    if not relay or not bare:
        return "Not enough data in this run."
    gap = relay["p50_ms"] - bare["p50_ms"]
    if gap > 0:
        median = (
            f"the relay's median is {gap:.1f} ms later: its intent path (parse, rules, build the record) "
            "and the commit it waits for before broadcasting."
        )
    else:
        median = (
            f"here the relay's median was even {-gap:.1f} ms earlier, which is within the run-to-run noise "
            "of a shared machine: its intent path and commit cost well under a millisecond."
        )
    return (
        "A relay roll goes through the rules core, one SQLite commit at the end of the loop iteration (the "
        "broadcast waits for it) and the fan-out; the bare server only broadcasts. Spreading an event to "
        f"{relay['members']:,} sockets takes {relay['members']:,} `send()` calls for either server, so the "
        f"last member's receipt is mostly the time to walk the room; {median} The tail (p99 over "
        f"{relay['events']} rolls is {_nth_slowest(relay['events'], 99)}) follows scheduling on the "
        "machine: a process that loses its core for a few milliseconds adds them to every event in flight, "
        "so p99 moves from run to run far more than p50."
    )


def _nth_slowest(count: int, q: float) -> str:
    """ "the slowest", "the second slowest", … : where percentile ``q`` (nearest rank) of ``count`` lies."""
    rank = max(1, min(count, round(q / 100 * count + 0.5)))
    nth = count - rank + 1
    words = {1: "the slowest", 2: "the second slowest", 3: "the third slowest"}
    return words.get(nth, f"the {nth}th slowest")
