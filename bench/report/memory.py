"""Section 3 of the page, memory per idle connection, with its plot and the traced run's reading."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report.common import COLORS, GOAL_MEMORY_KIB, LABELS, find, pyplot, ratio, table

MEMORY_HEADER = [
    "server",
    "connections",
    "RSS before MiB",
    "RSS after MiB",
    "KiB per connection",
    "÷ bare",
    "seconds to connect",
]


def plot_memory(rows: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    names = [LABELS[r["kind"]] for r in rows]
    values = [r["kib_per_connection"] for r in rows]
    bars = ax.barh(names, values, color=[COLORS[r["kind"]] for r in rows])
    ax.bar_label(bars, labels=[f"{v:.1f} KiB" for v in values], padding=3)
    ax.axvline(GOAL_MEMORY_KIB, color="#c53030", linestyle="--", linewidth=1)
    ax.text(GOAL_MEMORY_KIB, -0.6, " goal", color="#c53030", va="bottom")
    ax.invert_yaxis()
    ax.set_xlabel(f"resident memory per idle connection at {rows[0]['connections']:,} connections (KiB)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def memory_section(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    rows = data["runs"]
    bare = find(rows, kind="bare")
    body = [
        (
            LABELS[r["kind"]],
            f"{r['connections']:,}",
            f"{r['rss_before_kib'] / 1024:,.1f}",
            f"{r['rss_after_kib'] / 1024:,.1f}",
            f"{r['kib_per_connection']:.1f}",
            ratio(r["kib_per_connection"], bare["kib_per_connection"] if bare else None),
            f"{r['connect_seconds']:.1f}",
        )
        for r in rows
    ]
    relay = find(rows, kind="relay")
    goals = {"memory_kib": relay["kib_per_connection"]} if relay else {}
    traced = data.get("traced")
    trace_text = ""
    if traced and traced.get("trace"):
        t = traced["trace"]

        def rows_of(key: str, limit: int) -> list[tuple[str, str, str]]:
            return [
                (f"`{s['where']}`", f"{s['bytes_per_connection']:,.0f}", f"{s['blocks_per_connection']:.1f}")
                for s in t[key][:limit]
            ]

        trace_text = f"""### Where it goes

A separate relay run under tracemalloc (`bench/tools/relay_traced.py`, {traced["connections"]:,} connections;
not part of the figure above) counted {t["bytes_per_connection"]:,.0f} bytes of Python allocations per
connection. RSS adds what tracemalloc does not see: allocator slack and fragmentation, the interpreter's free
lists, and memory held by C libraries. By file, then by allocating line:

{table(["file", "bytes/conn", "blocks/conn"], rows_of("files", 10))}

{table(["line", "bytes/conn", "blocks/conn"], rows_of("lines", 15))}

{_memory_reading(t, traced)}
"""
    text = f"""## 3. Memory

Resident memory (VmRSS of the server process) per idle connection. Each server first gets
{rows[0].get("history", 0)} rolls in each of ten rooms (a table in play has a history, and the relay's
welcome carries up to its last 100 events), then one connection in each room (rooms loaded, code paths
warm); then {rows[0]["connections"]:,} more connections,
spread over the ten rooms and over several receiver processes, open and stay idle (relay: each has said
hello and received its welcome). The figure is (RSS after − RSS before) ÷ connections, read one second
after the last connection opened.

{table(MEMORY_HEADER, body)}

![Memory](images/bench-memory.png)

{trace_text}"""
    return text, goals


#: Where decoding log records was traced: today's folder and the one recorded runs name.
STORAGE = ("relay/storage/", "relay/log/")
#: Where rendering for an audience was traced: today's path and the one recorded runs name.
VISIBILITY = ("relay/core/visibility.py", "relay/visibility.py")
HISTORY_RETAINED = 8 * 1024  # bytes per connection from decoded log records: the welcome is being kept


def retained_history(trace: dict[str, Any] | None) -> float:
    """Bytes per idle connection allocated by decoding log records (relay/storage, relay/log before it), per
    the traced run."""
    if not trace:
        return 0.0
    held: float = sum(
        f["bytes_per_connection"]
        for f in trace.get("files", [])
        if f["where"].startswith(("relay/storage/", "relay/log/"))
    )
    return held


def _memory_reading(t: dict[str, Any], traced: dict[str, Any]) -> str:
    held = retained_history(t)
    visible = sum(f["bytes_per_connection"] for f in t["files"] if f["where"] in VISIBILITY)
    lines = []
    if held >= HISTORY_RETAINED:
        lines.append(
            f"**The welcome's history stays in memory for as long as the connection is open.** "
            f"{held / 1024:,.1f} KiB per connection were allocated by decoding log records "
            f"(`relay/storage/codec.py`) and {visible / 1024:,.1f} KiB by rendering them "
            "(`relay/core/visibility.py`), "
            f"and are still referenced by idle connections, with {traced['history']} events of history per "
            "room. `Relay._serve_socket` (`relay/shell/server.py`) keeps its `welcome` local in scope after "
            "sending it, through the whole `async for message in ws` loop, and the rendered history frames "
            "share the decoded records' nested dicts; so each idle socket holds its own copy of the history "
            "it was welcomed with, and the cost grows with the history (up to 100 events: several hundred "
            "KiB per connection). Dropping the reference once the welcome is sent (`del welcome` before the "
            "loop, or building and sending it in a helper that returns only its seq) removes this."
        )
    lines.append(
        "The rest is the cost of a `websockets` connection in asyncio, which the bare server pays too: the "
        "handshake's request and response headers kept on the connection (`websockets/datastructures.py`, "
        "`http11.py`), the connection and its protocol objects, the asyncio transport, futures and locks; "
        "the relay adds its `Connection`, outbox and a second task per socket (the writer)."
    )
    return "\n\n".join(lines)
