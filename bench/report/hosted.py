"""Section 9 of the page, a hosted relay's day: thousands of tables of six, a restart under them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.report.common import COLORS, LABELS, n0, n1, pyplot, ratio, table


def plot_hosted(data: dict[str, Any], path: Path) -> None:
    """Latency (p99 each second, intent → last member) and RSS over time, the relay and bare."""
    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.6, 4.8), sharex=True)
    for kind in ("relay", "bare"):
        points = data.get(kind, {}).get("series") or []
        xs = [p["s"] for p in points]
        # Seconds with no roll completed (the restart) are gaps, not lines drawn across them.
        top.plot(xs, [p.get("p99", math.nan) for p in points], label=LABELS[kind], color=COLORS[kind], lw=1)
        bottom.plot(xs, [p.get("rss_mib", math.nan) for p in points], color=COLORS[kind], lw=1.2)
    restart = data.get("relay", {}).get("restart")
    if restart:
        at = data.get("seconds", 0)
        for ax in (top, bottom):
            ax.axvline(at, color="#c53030", lw=0.8, ls="--")
        top.annotate(
            "SIGTERM, start; rolls made while down complete after it",
            (at, 1),
            xytext=(4, 4),
            textcoords="offset points",
            fontsize=8,
        )
    top.set_yscale("log")
    top.set_ylabel("p99 each second (ms, log)")
    top.set_title(f"{data['tables']:,} tables of {data['members']}: intent → last member")
    top.legend(frameon=False, fontsize=8)
    bottom.set_ylabel("server RSS (MiB)")
    bottom.set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _ms(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f} ms"


def hosted_goals(data: dict[str, Any]) -> dict[str, Any]:
    """The issue's goals for this section (the page's goals table reads them)."""
    relay, bare = data["relay"], data["bare"]
    r, b = relay["steady"], bare["steady"]
    check, restart = relay.get("check") or {}, relay.get("restart") or {}
    goals: dict[str, Any] = {"hosted_tables": data["tables"]}
    goals["hosted_p99_ms"] = r["p99_ms"]
    if r["p99_ms"] is not None and b["p99_ms"]:
        goals["hosted_p99_bare"] = r["p99_ms"] / b["p99_ms"]
    goals["hosted_rss_mib"] = r["rss_mib"]
    goals["hosted_back_s"] = restart.get("back_seconds")
    if check:
        goals["hosted_lost"] = check["lost"] + check["duplicates"]
    return goals


def hosted_section(data: dict[str, Any], load: dict[str, Any] | None = None) -> str:
    relay, bare = data["relay"], data["bare"]
    r, b = relay["steady"], bare["steady"]
    clients = data["tables"] * data["members"]
    rows = [
        (
            "rolls per second (completed to every member)",
            n0(r["rolls_per_second"]),
            n0(b["rolls_per_second"]),
            "",
        ),
        ("intent → last member p50", _ms(r["p50_ms"]), _ms(b["p50_ms"]), ratio(r["p50_ms"], b["p50_ms"])),
        ("intent → last member p99", _ms(r["p99_ms"]), _ms(b["p99_ms"]), ratio(r["p99_ms"], b["p99_ms"])),
        ("intent → last member max", _ms(r["max_ms"]), _ms(b["max_ms"]), ""),
        ("server CPU (share of one core, mean)", _pct(r["cpu_share"]), _pct(b["cpu_share"]), ""),
        ("server RSS (MiB, most)", n1(r["rss_mib"]), n1(b["rss_mib"]), ratio(r["rss_mib"], b["rss_mib"])),
        ("descriptors (most)", n0(r["fds"]), n0(b["fds"]), ""),
        ("event-loop lag p99 / max, last minute (/healthz)", _lag(r), "–", ""),
    ]
    restart = relay.get("restart") or {}
    check = relay.get("check") or {}
    storm = [
        ("SIGTERM → old process gone (drain)", _s(restart.get("drain_seconds"))),
        ("SIGTERM → new process listening", _s(restart.get("down_seconds"))),
        ("listening → every client welcomed and caught up", _s(restart.get("back_seconds"))),
        ("clients back", f"{n0(restart.get('clients'))} of {clients:,}"),
        ("events lost (every client's seqs against the log)", n0(check.get("lost"))),
        ("events delivered twice", n0(check.get("duplicates"))),
        ("rolls in flight at the close, sent again with their id", n0(check.get("inflight_retried"))),
        ("… of them acknowledged", n0(check.get("inflight_acked"))),
        (
            "rolls stored beyond those acknowledged (a retry stored twice)",
            n0(check.get("rolls_stored_beyond_acked")),
        ),
        ("rolls acknowledged and not stored", n0(check.get("rolls_acked_not_stored"))),
        ("joins and leaves in the log (the tables opened with one join per member)", _comings(check)),
        ("peak server CPU in the storm (share of one core)", _pct(restart.get("cpu_peak"))),
        ("peak server RSS in the storm (MiB)", n1(restart.get("rss_peak_mib"))),
        ("accept-queue overflows in the storm (TcpExt, whole machine)", n0(restart.get("listen_overflows"))),
    ]
    errors = check.get("errors") or {}
    refused = ", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "none"
    loads = ""
    if load:
        loads = (
            f" The machine's load average was {load.get('before')} before the section and "
            f"{load.get('after')} after it."
        )
    tables, members, mean_s, seconds = data["tables"], data["members"], data["mean_s"], data["seconds"]
    return f"""## 9. A hosted relay's day

{tables:,} tables of {members} (a GM, four players, a spectator): {clients:,} WebSockets on one
relay process on its embedded default (SQLite), every member a real `TableRelay` of `clients/js` in
Node (`bench/receivers/hosted.mjs`, signature checks off in the clients), split over Node processes,
each socket bound to a source address of its own in 127.0.0.0/8. Each table acts on its own schedule,
on average once every {mean_s:g} s: rolls of the four seed systems and both dice dialects, public and
GM-only (sealed for the others), the GM's reveals, Fear gains and spends; keepalive on at both ends.
{seconds:g} s of it (the first 5 s left out of the figures), then the same tables and schedule against the
bare `websockets` per-room broadcast (`bench/peers/bare_ws.py`; its rolls from the GM's socket, so a
room's numbering is the order they were sent).{loads}

{table(["", "tablerelay", "bare websockets", "relay ÷ bare"], rows, "lrrr")}

![Latency and RSS over time](images/bench-hosted.png)

**The restart.** With every socket connected and tables rolling, the relay got SIGTERM and was started
again on the same port and data folder, as a deploy does. Every client reconnected with the JS client's
own backoff (a ceiling of 250 ms doubling per attempt up to 10 s, the delay drawn between half the ceiling
and the ceiling) and resumed. Then the rolling stopped, every request was answered, and every client's
seqs were compared with its room's log.

{table(["", "this run"], storm, "lr")}

Requests refused during the run: {refused} (`disconnected` is a reveal or a Fear change sent before the
close and not answered: the client rejects those rather than risk doing them twice; rolls are sent again).
The stop stores no leaves, and a member who comes back within `rejoin_grace` (60 s from its room's
load) stores no join: the joins and leaves above beyond one join per member are those who came back later
(a leave when the grace ended, a join when they came). The time back is the clients' backoff (a client that
tried while the old process drained and the new one started is a few attempts up its ladder, and waits up
to the ceiling it reached) and the relay's one core: each handshake the accept queue dropped is retried by
the client's TCP a second or more later.
"""


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f} %"


def _s(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f} s"


def _lag(r: dict[str, Any]) -> str:
    p99, top = r.get("loop_lag_p99_ms"), r.get("loop_lag_max_ms")
    return "–" if p99 is None else f"{p99:.0f} / {top or 0:.0f} ms"


def _comings(check: dict[str, Any]) -> str:
    if "joins" not in check:
        return "–"
    return f"{n0(check.get('joins'))} joins, {n0(check.get('leaves'))} leaves"
