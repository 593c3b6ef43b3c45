"""Section 4b of the page, many tables: 1,000 small rooms against the bare server, and where a roll's CPU
goes (the picture is drawn only when the run's profile names every part)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report.common import COLORS, GOAL_TABLES_BARE, LABELS, find, n0, profile_block, pyplot, table

#: The parts of a small table's roll the page names, by the function whose inclusive share measures each.
#: Looked up by name alone: a profile names each with the file it was in when it was recorded.
TABLES_PARTS = {
    "the socket writes": "SocketSink.write (relay/shell/connection.py)",
    "the SQLite commit": "SqliteLog._hand_over (relay/storage/sqlite/log.py)",
    "reading, checking, resolving": "Relay._handle_frame (relay/shell/server.py)",
}
TABLES_REST = "the rest: signing, ack, fan-out, framing, loop"
TABLES_CHILD = "nonces (child process)"


def tables_split(relay: dict[str, Any] | None, profile: dict[str, Any] | None) -> dict[str, float] | None:
    """The relay's CPU per roll in the many-tables runs by what it was spent on (µs): ``TABLES_PARTS`` from
    the profile's inclusive shares of the server process, the rest of it, and the child's own figure;
    None without a profile."""
    # "Qualified.name (path/to/file.py)" -> its share, by the name.
    inclusive = {key.split(" (")[0]: share for key, share in (profile or {}).get("inclusive") or []}
    split = (relay or {}).get("cpu_us_per_roll_by") or {}
    in_process = sum(us for name, us in split.items() if name != "child processes")
    shares = {name: inclusive.get(function.split(" (")[0]) for name, function in TABLES_PARTS.items()}
    if not in_process or any(share is None for share in shares.values()):
        return None
    parts = {name: (share or 0.0) * in_process / 100 for name, share in shares.items()}
    parts[TABLES_REST] = in_process - sum(parts.values())
    parts[TABLES_CHILD] = split.get("child processes", 0.0)
    return parts


def plot_tables(rows: list[dict[str, Any]], parts: dict[str, float], path: Path) -> None:
    """Where a small table's roll goes: the relay's CPU per roll in parts beside the bare server's, with
    the budget the 0.8× goal leaves."""
    plt = pyplot()
    bare = find(rows, kind="bare")
    fig, ax = plt.subplots(figsize=(8.4, 3.0))
    colors = ["#2b6cb0", "#4299e1", "#90cdf4", "#bee3f8", "#cbd5e0"]
    left = 0.0
    for (name, us), color in zip(parts.items(), colors, strict=False):
        ax.barh(1, us, left=left, color=color, label=f"{name} ({us:.0f} µs)")
        left += us
    if bare:
        cost = bare["server_cpu_us_per_roll"]
        ax.barh(
            0, cost, color=COLORS["bare"], label=f"bare websockets: one read, the same writes ({cost:.0f} µs)"
        )
        budget = cost / GOAL_TABLES_BARE
        ax.axvline(budget, color="#c53030", linestyle="--", linewidth=1)
        ax.text(
            budget, 1.45, f" the relay's budget for {GOAL_TABLES_BARE}× ({budget:.0f} µs)", color="#c53030"
        )
    ax.set_yticks([0, 1], ["bare websockets", "tablerelay"])
    ax.set_ylim(-0.6, 1.7)
    ax.set_xlabel("server CPU per roll (µs), 1,000 rooms × 6 members")
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False, fontsize=8)
    fig.tight_layout(rect=(0, 0.3, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def tables_section(rows: list[dict[str, Any]], profile: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    relay, bare = (find(rows, kind=k) for k in ("relay", "bare"))
    goals: dict[str, Any] = {}
    if relay and bare:
        goals["tables_bare"] = relay["rate"] / bare["rate"]
        goals["tables_p99"] = relay["p99_ms"] / bare["p99_ms"]
    body = [
        (
            LABELS[r["kind"]],
            n0(r["rate"]),
            n0(r["rolls_per_second"]),
            f"{r['p50_ms']:.1f}",
            f"{r['p99_ms']:.1f}",
            f"{r['server_cpu_us_per_roll']:.0f}",
            f"{100 * r['server_busy']:.0f} %",
            ", ".join(f"{run['rate']:,.0f}" for run in r["runs"]),
        )
        for r in rows
    ]
    header = [
        "server",
        "deliveries/s",
        "rolls/s",
        "p50 ms",
        "p99 ms",
        "server µs per roll",
        "server busy",
        "each run's deliveries/s",
    ]
    first = rows[0]
    ratio_line = ""
    if relay and bare:
        ratio_line = (
            f"Relay ÷ bare: deliveries/s {relay['rate'] / bare['rate']:.2f}×, p99 "
            f"{relay['p99_ms'] / bare['p99_ms']:.2f}×, server CPU per roll "
            f"{relay['server_cpu_us_per_roll'] / bare['server_cpu_us_per_roll']:.2f}× "
            f"(the relay's: both its processes, the server and its signing child)."
        )
    if relay and relay.get("cpu_us_per_roll_by"):
        ratio_line += (
            "\n\nThe relay's CPU per roll by where it ran (best run): "
            + ", ".join(f"{name} {us:.0f} µs" for name, us in relay["cpu_us_per_roll_by"].items())
            + "."
        )
    picture = ""
    if tables_split(relay, profile) is not None:
        picture = (
            "\n![Where a small table's roll goes: the relay's CPU per roll in parts, the bare server's, and"
            " the budget the 0.8× goal leaves](images/bench-tables.png)\n\nThe parts are the profile's"
            " inclusive shares of the server process (below), the nonces the child's own CPU.\n"
        )
    text = f"""## 4b. Many tables

A hosted relay's usual load: {first["rooms"]:,} rooms of {first["per_room"]} members (spectator sockets, in
two receiver processes that decode every frame, on both servers) and one roller socket per room (the
driver; the relay's GM). Every roll goes to a room drawn at random (a fixed seed, the same rooms for both
servers); {first["window"]} rolls are in flight at once, and the next leaves whenever an event reaches the
driver. The bare `websockets` peer does the same per-room `broadcast()`, of the relay's own roll event,
so the receivers decode the same map from both. {first["rolls"]:,} rolls per run; both servers stay up
and take turns, run by run; the best run's rates are kept, the latencies (intent leaving the driver → the
last member of its room receiving the event) are pooled over all runs. The two receiver processes share
the machine's two cores with the server, so what they spend decoding counts against both servers alike.

{table(header, body)}

{ratio_line}
{picture}
{profile_block(profile, "the many-tables runs")}"""
    return text, goals
