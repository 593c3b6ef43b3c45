"""A soak's results as a plot (RSS, descriptors, loop lag, acks and errors over time) and as Markdown."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any


def plot(results: dict[str, Any], path: Path) -> bool:
    """Write the plot; False when matplotlib is not installed (it comes with the ``bench`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    # Samples at the deadline and after it show the clients closing their sockets, not the run.
    deadline = results["options"]["minutes"] * 60
    samples = [s for s in results["samples"] if s["t"] < deadline - 0.5]
    minutes = [s["t"] / 60 for s in samples]
    warm = results["warmup_seconds"] / 60
    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5), sharex=True)
    panels = [
        (axes[0][0], [None if s["rss"] is None else s["rss"] / 2**20 for s in samples], "server RSS (MiB)"),
        (axes[0][1], [s["fds"] for s in samples], "server open file descriptors"),
        (axes[1][0], [s["lag_p99_ms"] for s in samples], "event-loop lag p99, last minute (ms)"),
    ]
    for ax, values, title in panels:
        ax.plot(minutes, values, color="#2b6cb0")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.axvspan(0, warm, color="#e2e8f0", label="warm-up")
    ax = axes[1][1]
    rates, errors = [], []
    for before, after in itertools.pairwise(samples):
        span = max(1e-9, after["t"] - before["t"])
        rates.append((after["acks"] - before["acks"]) / span)
        errors.append(after["errors"] - before["errors"])
    ax.plot(minutes[1:], rates, color="#2b6cb0", label="acks/s")
    ax.set_title("acknowledged requests per second; errors", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.axvspan(0, warm, color="#e2e8f0")
    twin = ax.twinx()
    twin.bar(minutes[1:], errors, width=0.05, color="#c53030", label="errors")
    twin.set_ylim(bottom=0, top=max(1, *errors))
    for ax in axes[1]:
        ax.set_xlabel("minutes")
    options = results["options"]
    fig.suptitle(
        f"soak (python -m bench.soak): {options['clients']:,} clients in {options['rooms']} rooms, "
        f"{options['minutes']:g} min",
        fontsize=11,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _mib(value: float | None) -> str:
    return "?" if value is None else f"{value / 2**20:.1f} MiB"


def _count(value: float | None) -> str:
    return "?" if value is None else f"{value:,.0f}"


def _ms(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f} ms"


def markdown(results: dict[str, Any], image: str | None) -> str:
    """The "Soak" section of docs/benchmarks.md for these results."""
    options, checks, counts = results["options"], results["checks"], results["counts"]
    rss, fds = checks["RSS flat after warm-up"], checks["open descriptors flat after warm-up"]
    lost = checks["no lost acknowledged event"]
    loads = [s["load"] for s in results["samples"] if s.get("load") is not None]
    load = f"{min(loads):.1f} to {max(loads):.1f}" if loads else ""
    cores = os.cpu_count() or "?"
    lines = [
        "## Soak",
        "",
        f"`python -m bench.soak --minutes {options['minutes']:g} --clients {options['clients']} --rooms "
        f"{options['rooms']}`, run on {results['started']} UTC against a server it started on 127.0.0.1 "
        "with a temporary data folder: GMs, players and a spectator per room rolling with every visibility, "
        "revealing, spending Fear and Hope, reconnecting with resume, stopping reading for 5 to 15 s, and "
        "sending malformed and oversize frames. It is a pass or fail check of the server over time, not a "
        "speed figure (docs/hardening.md describes it).",
        "",
        "| check | result |",
        "| --- | --- |",
    ]
    for name, check in checks.items():
        verdict = {True: "**pass**", False: "**FAIL**", None: "not measured"}[check["ok"]]
        lines.append(f"| {name} | {verdict} |")
    change = {k: f"{c['change'] * 100:+.1f} %" if c.get("change") is not None else "?" for k, c in
              (("rss", rss), ("fds", fds))}  # fmt: skip
    lines += [
        "",
        "| figure | value |",
        "| --- | ---: |",
        f"| warm-up (docs/hardening.md) | {results['warmup_seconds'] / 60:.1f} min: "
        f"{results.get('warmup_basis', '?')} |",
        f"| server RSS after warm-up → end | {_mib(rss.get('after_warmup'))} → {_mib(rss.get('end'))} "
        f"({change['rss']}) |",
        f"| open descriptors after warm-up → end | {_count(fds.get('after_warmup'))} → "
        f"{_count(fds.get('end'))} ({change['fds']}) |",
        f"| event-loop lag p99, worst minute after warm-up | {_ms(results['lag_p99_ms_max_after_warmup'])} |",
        *([f"| machine load average (1 min) during the run, on {cores} cores | {load} |"] if loads else []),
        f"| acknowledged requests (all found in the log) | {lost['acked']:,} |",
        f"| events stored | {lost['events_stored']:,} |",
        f"| lost acknowledged events | {lost['lost']} |",
        f"| internal errors | {checks['no internal error']['server_error_lines']} |",
        f"| protocol errors seen by clients | {sum(results['errors'].values())} |",
    ]
    lines += ["", "| what the clients did | count |", "| --- | ---: |"]
    for name in sorted(counts):
        lines.append(f"| {name} | {counts[name]:,} |")
    if image:
        lines += ["", f"![Soak: RSS, descriptors, loop lag, acks over time]({image})"]
    return "\n".join(lines) + "\n"
