"""Write docs/benchmarks.md and docs/images/bench-*.png from a run's results.

    python -m bench.report [bench/results/latest.json] [--doc docs/benchmarks.md]

Every number in the document comes from the results file of one run; the prose around them says how they
were measured and reads the profiles that came with them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.harness import ROOT
from bench.profile import TOP

DOC = ROOT / "docs" / "benchmarks.md"
IMAGES = ROOT / "docs" / "images"
CHANGES = Path(__file__).with_name("changes.md")  # the record of speed work, written by hand
# The last soak run's section, written by `python -m bench.soak --markdown bench/soak.md` (docs/hardening.md);
# a soak takes ten minutes, so the suite includes its recorded result rather than running one.
SOAK = Path(__file__).with_name("soak.md")
# The last cluster run's section, written by `python -m bench.cluster` (a NATS cluster and its own minutes).
CLUSTER = Path(__file__).with_name("cluster.md")
LABELS = {"relay": "tablerelay", "bare": "bare websockets", "socketio": "python-socketio"}
COLORS = {"relay": "#2b6cb0", "bare": "#718096", "socketio": "#dd6b20"}

# The goals, checked against each run.
GOAL_FANOUT_BARE = 0.8
GOAL_FANOUT_SOCKETIO = 7.0
GOAL_LATENCY_P99 = 1.5
GOAL_MEMORY_KIB = 20.0
GOAL_APPENDS = 5000.0
GOAL_SIGNING = 0.9  # signed ÷ unsigned, for acked rolls and for fan-out at N = 1,000
# How far the acked-roll windows' medians move between runs of the same code (about ±0.03 on a quiet day):
# a floor computed from one run's parts is "below the goal" only when it is further under than that.
SIGNING_NOISE = 0.03
# Issue 14, small tables: many 6-member rooms vs bare, 100 rooms × 1 roller, one roll at a time into 100.
GOAL_TABLES_BARE = 0.8
GOAL_TABLES_P99 = 1.5
GOAL_ROOMS_APPENDS = 5000.0
GOAL_SMALL_CHAIN_BARE = 0.8

FANOUT_HEADER = [
    "N members",
    "tablerelay /s",
    "bare websockets /s",
    "python-socketio /s",
    "relay ÷ bare",
    "relay ÷ socketio",
]
APPENDS_HEADER = [
    "shape",
    "acked rolls/s",
    "deliveries/s",
    "server busy",
    "server µs per roll",
    "rollers busy",
    "errors",
]
SERVER_LIBS = ("websockets", "msgpack", "python-socketio", "python-engineio", "aiohttp")
CLIENT_LIBS = ("ws (node)", "socket.io-client (node)", "@msgpack/msgpack (node)")
MEMORY_HEADER = [
    "server",
    "connections",
    "RSS before MiB",
    "RSS after MiB",
    "KiB per connection",
    "÷ bare",
    "seconds to connect",
]


# -- formatting --------------------------------------------------------------------------------------------


def n0(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def n1(x: float | None) -> str:
    return "–" if x is None else f"{x:,.1f}"


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "–"
    return f"{a / b:.2f}×"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str | None = None) -> str:
    align = align or "l" + "r" * (len(header) - 1)
    marks = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(marks) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else ("**met**" if ok else "**not met**")


def _find(rows: Iterable[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), None)


# -- plots -------------------------------------------------------------------------------------------------


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {"figure.dpi": 110, "font.size": 9, "axes.spines.top": False, "axes.spines.right": False}
    )
    return plt


def plot_fanout(rows: list[dict[str, Any]], path: Path) -> None:
    plt = _plt()
    sizes = sorted({r["members"] for r in rows})
    kinds = [k for k in LABELS if any(r["kind"] == k for r in rows)]
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.4), sharey=True)
    width = 0.8 / len(kinds)
    for ax, prefix, title in ((axes[0], "", "Bursts"), (axes[1], "chain_", "One roll at a time")):
        for i, kind in enumerate(kinds):
            xs, ys = [], []
            for j, n in enumerate(sizes):
                r = _find(rows, kind=kind, members=n)
                if r and r.get(f"{prefix}rate"):
                    xs.append(j + (i - (len(kinds) - 1) / 2) * width)
                    ys.append(r[f"{prefix}rate"])
            ax.bar(xs, ys, width, label=LABELS[kind], color=COLORS[kind])
        ax.set_xticks(range(len(sizes)), [f"N = {n:,}" for n in sizes])
        ax.set_yscale("log")
        ax.set_title(title)
    axes[0].set_ylabel("deliveries per second (log)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(kinds), frameon=False)
    fig.suptitle("Fan-out of roll events to one room of N members")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def plot_latency(rows: list[dict[str, Any]], path: Path) -> None:
    plt = _plt()
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


def plot_memory(rows: list[dict[str, Any]], path: Path) -> None:
    plt = _plt()
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


def plot_appends(data: dict[str, Any], path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    server = data["server"]
    names = [_shape(r) for r in server]
    bars = ax.bar(
        names, [r["rate"] for r in server], color=COLORS["relay"], label="tablerelay, acked rolls/s"
    )
    ax.bar_label(bars, labels=[n0(r["rate"]) for r in server], padding=2)
    storage = {s["writers"]: s["rate"] for s in data.get("storage", [])}
    for i, r in enumerate(server):
        ceiling = storage.get(r["rollers"])
        if ceiling:
            ax.plot([i - 0.4, i + 0.4], [ceiling, ceiling], color="#2f855a", linewidth=2)
    ax.plot([], [], color="#2f855a", linewidth=2, label="SqliteLog alone, same number of writers")
    ax.axhline(
        GOAL_APPENDS, color="#c53030", linestyle="--", linewidth=1, label="goal (100 rollers, one room)"
    )
    ax.set_yscale("log")
    ax.set_ylabel("per second (log)")
    ax.set_title("Durable appends (SQLite, synchronous=NORMAL)")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_growth(data: dict[str, Any], path: Path) -> None:
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.6, 3.2))
    kinds = [k for k in ("relay", "bare") if any(r["kind"] == k for r in data["members"])]
    for kind in kinds:
        pts = sorted((r["per_room"], r["rate"]) for r in data["members"] if r["kind"] == kind)
        if pts:
            left.plot(
                [p[0] for p in pts], [p[1] for p in pts], marker="o", label=LABELS[kind], color=COLORS[kind]
            )
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("members in the room (log)")
    left.set_ylabel("deliveries per second (log)")
    left.set_title("One room, growing")
    left.legend(frameon=False)
    shapes = []
    for r in data["rooms"]:
        key = (r["rooms"], r["per_room"])
        if key not in shapes:
            shapes.append(key)
    width = 0.8 / len(kinds)
    for i, kind in enumerate(kinds):
        ys = [(_find(data["rooms"], kind=kind, rooms=a, per_room=b) or {}).get("rate", 0) for a, b in shapes]
        right.bar(
            [j + (i - (len(kinds) - 1) / 2) * width for j in range(len(shapes))],
            ys,
            width,
            color=COLORS[kind],
            label=LABELS[kind],
        )
    right.set_xticks(range(len(shapes)), [f"{a} × {b}" for a, b in shapes])
    right.set_xlabel("rooms × members per room")
    right.set_title(f"{shapes[0][0] * shapes[0][1]:,} members in all" if shapes else "")
    right.set_yscale("log")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


#: The parts of a small table's roll the page names, by the function whose inclusive share measures each.
TABLES_PARTS = {
    "the socket writes": "SocketSink.write (relay/shell/server.py)",
    "the SQLite commit": "SqliteLog._hand_over (relay/storage/sqlite.py)",
    "reading, checking, resolving": "Relay._handle_frame (relay/shell/server.py)",
}
TABLES_REST = "the rest: signing, ack, fan-out, framing, loop"
TABLES_CHILD = "nonces (child process)"


def tables_split(relay: dict[str, Any] | None, profile: dict[str, Any] | None) -> dict[str, float] | None:
    """The relay's CPU per roll in the many-tables runs by what it was spent on (µs): ``TABLES_PARTS`` from
    the profile's inclusive shares of the server process, the rest of it, and the child's own figure;
    None without a profile."""
    inclusive = dict((profile or {}).get("inclusive") or [])
    split = (relay or {}).get("cpu_us_per_roll_by") or {}
    in_process = sum(us for name, us in split.items() if name != "child processes")
    shares = {name: inclusive.get(function) for name, function in TABLES_PARTS.items()}
    if not in_process or any(share is None for share in shares.values()):
        return None
    parts = {name: (share or 0.0) * in_process / 100 for name, share in shares.items()}
    parts[TABLES_REST] = in_process - sum(parts.values())
    parts[TABLES_CHILD] = split.get("child processes", 0.0)
    return parts


def plot_tables(rows: list[dict[str, Any]], parts: dict[str, float], path: Path) -> None:
    """Where a small table's roll goes: the relay's CPU per roll in parts beside the bare server's, with
    the budget the 0.8× goal leaves."""
    plt = _plt()
    bare = _find(rows, kind="bare")
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


def _shape(r: dict[str, Any]) -> str:
    if r["rooms"] == 1:
        return f"{r['rollers_per_room']} roller{'s' if r['rollers_per_room'] > 1 else ''}, 1 room"
    return f"{r['rooms']} rooms × {r['rollers_per_room']}"


# -- sections ----------------------------------------------------------------------------------------------


def _profile_block(profile: dict[str, Any] | None, what: str) -> str:
    if not profile or not profile.get("samples"):
        return f"_No profile of {what} in this run._\n"
    out = [
        f"py-spy sampled the relay during {what} ({profile['samples']:,} samples of threads that were "
        "running; an idle loop waiting in `select` is not sampled). Share of samples by layer "
        "(innermost frame, standard-library calls charged to the layer that made them), then by "
        "function (self time):",
        "",
        table(["layer", "samples"], [(name, f"{share:.1f} %") for name, share in profile["layers"]]),
        "",
        table(
            ["function (self time)", "samples"],
            [(f"`{name}`", f"{share:.1f} %") for name, share in profile["functions"]],
        ),
        "",
        *(
            [
                "The relay's and the rules core's own functions, inclusive (time in the function and "
                "everything it called):",
                "",
                table(
                    ["function (inclusive)", "samples"],
                    [(f"`{name}`", f"{share:.1f} %") for name, share in profile["inclusive"][:TOP]],
                ),
                "",
            ]
            if profile.get("inclusive")
            else []
        ),
        "By thread: " + ", ".join(f"{name} {share:.0f} %" for name, share in profile["threads"]) + ".",
        "",
    ]
    return "\n".join(out)


def _layer_share(profile: dict[str, Any] | None, prefix: str) -> float | None:
    if not profile or not profile.get("layers"):
        return None
    total: float = sum(share for name, share in profile["layers"] if name.startswith(prefix))
    return total


def _fanout_table(rows: list[dict[str, Any]], prefix: str) -> str:
    body = []
    for n in sorted({r["members"] for r in rows}):
        relay, bare, sio = (_find(rows, kind=k, members=n) for k in ("relay", "bare", "socketio"))

        def rate(r: dict[str, Any] | None) -> float | None:
            return r.get(f"{prefix}rate") if r else None

        body.append(
            (
                f"{n:,}",
                n0(rate(relay)),
                n0(rate(bare)),
                n0(rate(sio)),
                ratio(rate(relay), rate(bare)),
                ratio(rate(relay), rate(sio)),
            )
        )
    return table(FANOUT_HEADER, body)


def _cpu_table(rows: list[dict[str, Any]], prefix: str) -> str:
    body = []
    for n in sorted({r["members"] for r in rows}):
        row = [f"{n:,}"]
        for kind in ("relay", "bare", "socketio"):
            r = _find(rows, kind=kind, members=n)
            us = r.get(f"{prefix}server_cpu_us") if r else None
            busy = r.get(f"{prefix}server_busy") if r else None
            rbusy = r.get(f"{prefix}receiver_busy") if r else None
            row.append(f"{us:.2f}" if us is not None else "–")
            row.append(
                f"{100 * busy:.0f} % / {100 * rbusy:.0f} %" if busy is not None and rbusy is not None else "–"
            )
        body.append(row)
    header = ["N", "relay µs", "relay / receivers busy", "bare µs", "busy", "socketio µs", "busy"]
    return table(header, body)


def fanout_section(rows: list[dict[str, Any]], profiles: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    per_size = []
    for n in sorted({r["members"] for r in rows}):
        counts = ", ".join(
            f"{LABELS[r['kind']]} {r['events']} and {r.get('chain_events', '–')}"
            for r in rows
            if r["members"] == n
        )
        per_size.append(f"N = {n:,}: {counts}")
    goals: dict[str, Any] = {}
    small = [_find(rows, kind=k, members=100) for k in ("relay", "bare")]
    if small[0] and small[1] and small[0].get("chain_rate") and small[1].get("chain_rate"):
        goals["small_chain_bare"] = small[0]["chain_rate"] / small[1]["chain_rate"]
    relay, bare, sio = (_find(rows, kind=k, members=1000) for k in ("relay", "bare", "socketio"))
    for prefix in ("", "chain_"):
        if relay and bare and relay.get(f"{prefix}rate") and bare.get(f"{prefix}rate"):
            goals[f"{prefix}fanout_bare"] = relay[f"{prefix}rate"] / bare[f"{prefix}rate"]
        if relay and sio and relay.get(f"{prefix}rate") and sio.get(f"{prefix}rate"):
            goals[f"{prefix}fanout_socketio"] = relay[f"{prefix}rate"] / sio[f"{prefix}rate"]
    repeats = _repeats(rows)
    text = f"""## 1. Fan-out

Deliveries per second of public roll events to one room of N members, in two ways:

- **Burst**: the driver (the relay's GM; a plain client of each peer) sends E rolls as fast as its socket
  takes them. The relay commits rolls that arrive together in one SQLite transaction and writes all the
  events of a transaction to each socket in one system call; the bare server answers each roll with its
  own `broadcast()`, one frame and one `send()` per socket; python-socketio emits each on its own.
- **One at a time**: the driver, itself a member, sends the next roll only when it has received the
  previous one's event. No server has two rolls of a room to coalesce: this is the per-event cost, and
  the shape of a real table, where rolls come one by one.

The clock runs from the first roll sent to the last event received by the last member; deliveries per
second = rolls × members ÷ that time. Receivers: {_receivers_note()}. Each server gets a warm-up burst;
the relay and the bare server get {repeats} measured bursts and one more one-at-a-time run than that, and
keep the best of each (interference from other work only ever slows a run); python-socketio gets one
burst and two one-at-a-time runs. In every kept
run every member received every event exactly once (checked per connection). Rolls per burst and per
one-at-a-time run: {"; ".join(per_size)}.

Burst:

{_fanout_table(rows, "")}

One at a time:

{_fanout_table(rows, "chain_")}

![Fan-out](images/bench-fanout.png)

CPU the server used per delivery (µs, user + system, all threads) and how busy the server and the
receiver processes were (CPU seconds ÷ wall seconds; 100 % is one core, the machine has two). A server
well below 100 % was waiting: for the receivers, or for a core taken by other processes.

Burst:

{_cpu_table(rows, "")}

One at a time:

{_cpu_table(rows, "chain_")}

### What bounds it

{_fanout_bounds(rows, profiles)}

{_profile_block(profiles.get("fanout_burst"), "repeated bursts to 1,000 members")}
{_profile_block(profiles.get("fanout_chain"), "one-at-a-time rolls to 1,000 members")}"""
    return text, goals


def _receivers_note() -> str:
    return (
        "Node processes separate from the server (`ws` for the relay and the bare server, "
        "`socket.io-client` for python-socketio), one process up to 300 members, two up to 6,000; they "
        "count frames without decoding them"
    )


def _repeats(rows: list[dict[str, Any]]) -> str:
    counts = [len(r.get("runs", [])) for r in rows if r["kind"] == "relay"]
    return str(max(counts)) if counts else "several"


def _fanout_bounds(rows: list[dict[str, Any]], profiles: dict[str, Any]) -> str:
    lines = []
    relay, bare, sio = (_find(rows, kind=k, members=1000) for k in ("relay", "bare", "socketio"))
    if relay and bare:
        lines.append(
            f"- Bursts at N = 1,000: the relay spent {relay['server_cpu_us']:.2f} µs of CPU per delivery, "
            f"the bare server {bare['server_cpu_us']:.2f} µs, nearly all of it one loopback `send()` per "
            "event per socket: the bare server is bound by system calls, and the relay writes a whole "
            "transaction's events per call. The relay was "
            f"{100 * relay['server_busy']:.0f} % busy and its receivers "
            f"{100 * relay['receiver_busy']:.0f} %: "
            "when the receivers are the busier side, the relay's burst figure is bound by the receivers "
            "(and the machine's two cores), not by the relay."
        )
    if relay and bare and relay.get("chain_rate") and bare.get("chain_rate"):
        lines.append(
            f"- One at a time at N = 1,000: relay {relay['chain_server_cpu_us']:.2f} µs per delivery, bare "
            f"{bare['chain_server_cpu_us']:.2f} µs. Each event is one write per socket for both; the relay "
            "adds the roll's own path (parse, rules, commit, ack) once per event, which at 1,000 members is "
            "spread over 1,000 deliveries."
        )
    if sio:
        lines.append(
            f"- python-socketio spent {sio['server_cpu_us']:.1f} µs per delivery: for each emit to a room it "
            "encodes the packet once, then creates one asyncio task per member, each putting the packet on "
            "that member's engine.io queue, from which a per-client writer task sends it through aiohttp."
        )
    for mode, what in (("fanout_burst", "bursts"), ("fanout_chain", "one-at-a-time rolls")):
        profile = profiles.get(mode)
        if _layer_share(profile, "asyncio") is None:
            continue
        lines.append(
            f"- Profile of the relay during {what}: {_layer_share(profile, 'asyncio'):.0f} % of samples in "
            "asyncio's loop and transports (socket reads and writes), "
            f"{_layer_share(profile, 'relay') or 0:.0f} % in the relay's own code, "
            f"{_layer_share(profile, 'websockets') or 0:.0f} % websockets, "
            f"{_layer_share(profile, 'SQLite') or 0:.0f} % the SQLite log, "
            f"{_layer_share(profile, 'rules') or 0:.0f} % the rules core."
        )
    return "\n".join(lines)


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
    relay = _find(rows, kind="relay")
    bare = _find(rows, kind="bare")
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
    relay = _find(rows, kind="relay")
    bare = _find(rows, kind="bare")
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


def memory_section(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    rows = data["runs"]
    bare = _find(rows, kind="bare")
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
    relay = _find(rows, kind="relay")
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

A separate relay run under tracemalloc (`bench/relay_traced.py`, {traced["connections"]:,} connections; not
part of the figure above) counted {t["bytes_per_connection"]:,.0f} bytes of Python allocations per
connection. RSS adds what tracemalloc does not see: allocator slack and fragmentation, the interpreter's
free lists, and memory held by C libraries. By file, then by allocating line:

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


HISTORY_RETAINED = 8 * 1024  # bytes per connection from decoded log records: the welcome is being kept


def retained_history(trace: dict[str, Any] | None) -> float:
    """Bytes per idle connection allocated by decoding log records (relay/log), per the traced run."""
    if not trace:
        return 0.0
    held: float = sum(
        f["bytes_per_connection"] for f in trace.get("files", []) if f["where"].startswith("relay/log/")
    )
    return held


def _memory_reading(t: dict[str, Any], traced: dict[str, Any]) -> str:
    held = retained_history(t)
    visible = sum(f["bytes_per_connection"] for f in t["files"] if f["where"] == "relay/core/visibility.py")
    lines = []
    if held >= HISTORY_RETAINED:
        lines.append(
            f"**The welcome's history stays in memory for as long as the connection is open.** "
            f"{held / 1024:,.1f} KiB per connection were allocated by decoding log records "
            f"(`relay/storage/sqlite.py`) and {visible / 1024:,.1f} KiB by rendering them "
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


#: What the second profile of section 4 samples: each roll in its own room, paying its whole fixed cost.
ROOMS_PROFILED = "the run of 100 rooms × 1 roller (each roll its own room's, paying its whole fixed cost)"


def appends_section(
    data: dict[str, Any], profile: dict[str, Any] | None, rooms_profile: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    body = [
        (
            _shape(r),
            n0(r["rate"]),
            n0(r["deliveries_per_second"]),
            f"{100 * r['server_cpu']:.0f} %",
            f"{1e6 * r['server_cpu'] / r['rate']:,.0f}" if r["rate"] else "–",
            f"{100 * r.get('client_cpu', 0):.0f} %",
            ", ".join(f"{k}: {v}" for k, v in r["errors"].items()) or "none",
        )
        for r in data["server"]
    ]
    storage = [
        (str(s["writers"]), n0(s["rate"]), f"{s['appends_per_transaction']:.1f}")
        for s in data.get("storage", [])
    ]
    hundred = _find(data["server"], rooms=1, rollers_per_room=100)
    goals = {"appends": hundred["rate"]} if hundred else {}
    rooms = _find(data["server"], rooms=100, rollers_per_room=1)
    if rooms:
        goals["rooms_appends"] = rooms["rate"]
    text = f"""## 4. Durable appends

Acknowledged rolls per second. Each roller is a player socket that sends a roll, waits for its ack (sent
only once the roll is committed to SQLite in WAL mode with `synchronous=NORMAL`, the default) and sends the
next. After a short warm-up: {_windows(data["server"][0])}. In one room every roller is also a
member, so every acknowledged roll is delivered to all of them too (the "deliveries" column); across 100
rooms each roll reaches only its roller. The rollers are a load generator rather than a client under test:
they read only the headers of the event frames they receive and decode just the acks, since parsing half a
million deliveries a second in `ws` took two thirds of a core beside the server being measured. "Busy" is
the cores each side kept busy on average (CPU seconds ÷ wall seconds); "server µs per roll" is the
server's CPU time per acknowledged roll, deliveries included.

{table(APPENDS_HEADER, body)}

The storage layer alone (`relay.storage.sqlite.SqliteLog` in the bench process, no sockets, the same roll
records, each writer appending one record and waiting for its commit before the next):

{table(["writers", "appends/s", "appends per transaction"], storage)}

![Durable appends](images/bench-appends.png)

### What bounds it

{_appends_bounds(data, profile)}

{_profile_block(profile, "the 100-roller run")}
{_profile_block(rooms_profile, ROOMS_PROFILED)}"""
    return text, goals


def tables_section(rows: list[dict[str, Any]], profile: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    relay, bare = (_find(rows, kind=k) for k in ("relay", "bare"))
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
{_profile_block(profile, "the many-tables runs")}"""
    return text, goals


def _windows(r: dict[str, Any]) -> str:
    n = len(r.get("windows", [1]))
    if n == 1:
        return f"one window of {r['seconds']:g} s"
    return f"{n} windows of {r['seconds']:g} s each, the best kept"


def _appends_bounds(data: dict[str, Any], profile: dict[str, Any] | None) -> str:
    lines = []
    storage = {s["writers"]: s for s in data.get("storage", [])}
    for r in data["server"]:
        ceiling = storage.get(r["rollers"])
        if ceiling:
            lines.append(
                f"- {_shape(r)}: {n0(r['rate'])} acked rolls/s against {n0(ceiling['rate'])} appends/s "
                f"for SqliteLog alone with {r['rollers']} writer{'s' if r['rollers'] > 1 else ''} "
                f"({r['rate'] / ceiling['rate']:.0%} of it); "
                f"the server was {100 * r['server_cpu']:.0f} % busy."
            )
    storage_ok = all(
        storage.get(r["rollers"]) and r["rate"] < 0.5 * storage[r["rollers"]]["rate"] for r in data["server"]
    )
    if storage_ok and storage:
        lines.append(
            "- So storage is not what bounds the server: with as many writers, SQLite alone commits at "
            "least twice as fast (it batches every waiting append into one transaction). The bound is the "
            "event loop's work per roll (read and parse the frame, resolve with the rules core, build and "
            "encode the record, commit it, ack, broadcast), done on one core; in one room "
            "each roll is also written to every roller's socket. Where the server is near 100 % busy it is "
            "CPU-bound; where it is well below, the rollers' round trips (and the other processes on the "
            "machine) leave it waiting."
        )
    if profile and profile.get("layers"):
        lines.append(
            f"- Profile of the 100-roller run: {_layer_share(profile, 'asyncio') or 0:.0f} % asyncio "
            f"transports and loop, {_layer_share(profile, 'SQLite') or 0:.0f} % SQLite, "
            f"{_layer_share(profile, 'relay') or 0:.0f} % the relay's own code, "
            f"{_layer_share(profile, 'rules') or 0:.0f} % the rules core, "
            f"{_layer_share(profile, 'websockets') or 0:.0f} % websockets."
        )
    return "\n".join(lines)


def paired_ratio(on: list[dict[str, Any]], off: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Runs of two sides taken in turns (``rate`` each), summed up: each side's median rate and the median
    of the rounds' on ÷ off ratios, with their spread; None without a complete pair."""
    if not on or len(on) != len(off):
        return None
    ratios = sorted(a["rate"] / b["rate"] for a, b in zip(on, off, strict=True) if b["rate"])
    if not ratios:
        return None
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {
        "rounds": len(ratios),
        "on": statistics.median(r["rate"] for r in on),
        "off": statistics.median(r["rate"] for r in off),
        "ratio": statistics.median(ratios),
        "low": ratios[0],
        "high": ratios[-1],
        "quartiles": (quartiles[0], quartiles[2]),
    }


def spread(pair: dict[str, Any]) -> str:
    """How the rounds' ratios of ``paired_ratio`` spread, in words."""
    if pair["rounds"] >= 4:
        low, high = pair["quartiles"]
        return (
            f"half of the rounds between {low:.2f}× and {high:.2f}×, all between {pair['low']:.2f}× and "
            f"{pair['high']:.2f}×"
        )
    return f"the rounds {pair['low']:.2f}× and {pair['high']:.2f}×"


def signing_pairs(data: dict[str, Any]) -> dict[str, Any] | None:
    """The signing section's acked-roll windows, summed up (``paired_ratio``, the goal's figure) with the
    median CPU per roll by part."""
    paired = data.get("paired") or {}
    on, off = paired.get("on") or [], paired.get("off") or []
    pair = paired_ratio(on, off)
    if pair is None:
        return None
    return {
        **pair,
        "seconds": paired.get("seconds"),
        "lead": paired.get("lead"),
        "cpu_on": windows_cpu(on),
        "cpu_off": windows_cpu(off),
        "drift": (min(w["cpu_us_per_roll"] for w in off), max(w["cpu_us_per_roll"] for w in off)),
    }


def windows_cpu(windows: list[dict[str, Any]]) -> dict[str, float]:
    """CPU per acked roll (µs) over ``bench.appends`` windows, medians: the server by part (event loop,
    other threads, child processes), the server in all, the rollers, both, and the cores they kept busy."""
    parts = sorted({name for w in windows for name in w.get("cpu_us_per_roll_by", {})})
    out = {name: statistics.median(w["cpu_us_per_roll_by"].get(name, 0.0) for w in windows) for name in parts}
    out["server"] = statistics.median(w["cpu_us_per_roll"] for w in windows)
    out["rollers"] = statistics.median(1e6 * w["client_cpu"] / w["rate"] for w in windows if w["rate"])
    out["both"] = statistics.median(
        1e6 * (w["server_cpu"] + w["client_cpu"]) / w["rate"] for w in windows if w["rate"]
    )
    out["cores"] = statistics.median(w["server_cpu"] + w["client_cpu"] for w in windows)
    return out


def per_delivery_us(runs: list[dict[str, Any]], who: str = "server") -> float | None:
    """CPU per delivery (µs) of ``who`` (the server, or the receivers), the median of fan-out runs."""
    values = [1e6 * r["cpu"][who] / r["received"] for r in runs if r.get("received")]
    return statistics.median(values) if values else None


def signing_section(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Signing on against off, both relays up at once and taking turns: the medians of each side's runs and
    of the rounds' ratios, for acked rolls and for fan-out."""
    pairs = signing_pairs(data)
    fan = data.get("fanout_paired") or {}
    on_fan, off_fan = fan.get("on") or {}, fan.get("off") or {}
    rows, goals, spreads = [], {}, []

    def fan_pair(key: str) -> dict[str, Any] | None:
        return paired_ratio(on_fan.get(key) or [], off_fan.get(key) or [])

    measured = (
        ("acked rolls/s, 100 rollers in one room", "acked rolls", "signing_appends", pairs),
        ("fan-out at N = 1,000, bursts (deliveries/s)", "bursts", "signing_fanout", fan_pair("bursts")),
        (
            "fan-out at N = 1,000, one roll at a time (deliveries/s)",
            "one at a time",
            "signing_chain",
            fan_pair("chains"),
        ),
    )
    for name, label, goal, pair in measured:
        if pair is None:
            rows.append((name, "–", "–", "–"))
            continue
        rows.append((name, n0(pair["on"]), n0(pair["off"]), f"{pair['ratio']:.2f}×"))
        goals[goal] = pair["ratio"]
        spreads.append(f"{label}: {spread(pair)}")
    cpu_rows = []
    if pairs is not None:
        on_cpu, off_cpu = pairs["cpu_on"], pairs["cpu_off"]
        cpu_rows.append(("per acked roll", n1(on_cpu["server"]), n1(off_cpu["server"])))
        for part, name in (("event loop thread", "the event loop"), ("child processes", "the nonce process")):
            cpu_rows.append((f"of it, {name}", n1(on_cpu.get(part)), n1(off_cpu.get(part))))
        cpu_rows.append(("per acked roll, the 100 rollers", n1(on_cpu["rollers"]), n1(off_cpu["rollers"])))
    for name, key in (("per delivery, bursts", "bursts"), ("per delivery, one at a time", "chains")):
        on_us, off_us = per_delivery_us(on_fan.get(key) or []), per_delivery_us(off_fan.get(key) or [])
        cpu_rows.append(
            (name, "–" if on_us is None else f"{on_us:.2f}", "–" if off_us is None else f"{off_us:.2f}")
        )
    if pairs is not None:
        drift = pairs["drift"]
        acked = (
            "Acked rolls as in section 4 (100 rollers in one room, every roll signed once and delivered to "
            f"all 100): each relay has its own 100 rollers, which roll for {pairs['seconds']:g} s while the "
            f"other relay's wait, {pairs['rounds']} rounds. "
            + (
                f"Each window follows {pairs['lead']:g} s of rolling that is not measured, so a signing "
                "relay meets it as under sustained load: the nonce pairs its pool made while the other "
                "relay rolled are used up in the lead-in, and the pairs it makes up after its window, in "
                "the other relay's lead-in, not in its measured window. "
                if pairs.get("lead")
                else ""
            )
        )
        drifts = (
            f" (in this run the unsigned relay's acked-roll windows took from {drift[0]:.0f} to "
            f"{drift[1]:.0f} µs of server CPU per roll)"
        )
    else:
        acked, drifts = "Acked rolls were not measured in this run. ", ""
    bursts, chains = off_fan.get("bursts") or [], off_fan.get("chains") or []
    fanned = (
        "Fan-out as in section 1 (N = 1,000: each roll signed once for 1,000 deliveries): each relay has "
        f"its own 1,000 receivers and gets a burst ({bursts[0]['events']:,} rolls), then one roll at a time "
        f"({(chains or bursts)[0]['events']:,} rolls), in turns, {len(bursts)} rounds. "
        if bursts
        else "Fan-out was not measured in this run. "
    )
    text = f"""## 6. Signing

What signing every event costs (spec/signing.md: one Ed25519 signature per event and audience form,
over its canonical MessagePack): the same relay started with signing on, and with it off
(`TABLERELAY_SIGNING=off`, a setting that exists for this measurement only), both up at once and taking
turns, the order reversed every other round. {acked}{fanned}This machine's speed drifts from one second
to the next{drifts}, so two runs seconds apart are the fairest pair it offers: the table gives the median of
each side's runs and, as on ÷ off, the median of the rounds' ratios ({"; ".join(spreads) or "none"}).

{table(["measure", "signing on", "signing off", "on ÷ off"], rows)}

Server CPU (µs, all threads and the nonce process) in the same runs, medians:

{table(["", "signing on", "signing off"], cpu_rows)}

Each event and audience form is encoded once on the event loop, canonically, as the sockets get it, and
signed there in a few µs: the costly part of an Ed25519 signature, the nonce point r·B (the nonce process
row above: one point per roll), does not depend on the message, so a child process makes those points
ahead of time, on the other core, from random nonces (docs/verification.md, "How the server signs").
Nothing waits for a signature: the event leaves in the same write as its ack. The server CPU above counts
both processes. A signature is made once however many sockets receive the event, so fan-out barely
notices the signing; what it pays per delivery is the signed event's length, 89 bytes more on every
socket (a `kid` and a 64-byte `sig`), in the server's writes and the clients' reads alike. Acked rolls pay
the signature once per roll. Verifying is the clients' work.
"""
    return text, goals


def _rates_row(label: str, relay: dict[str, Any] | None, bare: dict[str, Any] | None) -> tuple[str, ...]:
    """A growth table's row: the relay's and bare's rates and their ratio ("–" where a run is missing)."""
    relay_rate = relay["rate"] if relay else None
    bare_rate = bare["rate"] if bare else None
    return label, n0(relay_rate), n0(bare_rate), ratio(relay_rate, bare_rate)


def growth_section(data: dict[str, Any]) -> str:
    members = sorted(data["members"], key=lambda r: (r["per_room"], r["kind"]))
    sizes = sorted({r["per_room"] for r in members})
    body = []
    for n in sizes:
        body.append(
            _rates_row(
                f"{n:,}", _find(members, kind="relay", per_room=n), _find(members, kind="bare", per_room=n)
            )
        )
    shapes = []
    for r in data["rooms"]:
        if (r["rooms"], r["per_room"]) not in shapes:
            shapes.append((r["rooms"], r["per_room"]))
    rooms_body = []
    for a, b in shapes:
        rooms_body.append(
            _rates_row(
                f"{a} × {b:,}",
                _find(data["rooms"], kind="relay", rooms=a, per_room=b),
                _find(data["rooms"], kind="bare", rooms=a, per_room=b),
            )
        )
    return f"""## 5. Growth

Fan-out (measured as in section 1) as one room grows, and as the same number of members is split into
more, smaller rooms (one driver socket per room sends the same number of rolls to each room; deliveries
counted over all rooms). Points of section 1 are reused, not measured twice.

{table(["members in one room", "tablerelay /s", "bare websockets /s", "relay ÷ bare"], body)}

{table(["rooms × members", "tablerelay /s", "bare websockets /s", "relay ÷ bare"], rooms_body)}

![Growth](images/bench-growth.png)

Small rooms cost more per delivery: each roll is one intent to read (and, for the relay,
to resolve and commit) for only a few deliveries, so the per-roll work dominates; in big rooms the
per-socket send dominates.
"""


def dice_section(data: dict[str, Any]) -> str:
    body = []
    for f in data["formulas"]:
        label = f"`{f['ours']}`" if f["ours"] == f["d20"] else f"`{f['ours']}` (d20: `{f['d20']}`)"
        body.append((label, n0(f["ours_rate"]), n0(f["d20_rate"]), ratio(f["ours_rate"], f["d20_rate"])))
    body.append(("**median over formulas**", "", "", f"**{data['formula_median']:.2f}×**"))
    for i in data["intents"]:
        body.append(
            (
                f"`{i['intent']['system']}` (d20: `{i['d20']}`)",
                n0(i["ours_rate"]),
                n0(i["d20_rate"]),
                ratio(i["ours_rate"], i["d20_rate"]),
            )
        )
    full = data.get("resolve_full")
    if full:
        body.append(
            (
                f"`dice` system, `{full['formula']}`, full result via `resolve`",
                n0(full["ours_rate"]),
                n0(full["d20_rate"]),
                ratio(full["ours_rate"], full["d20_rate"]),
            )
        )
    method = data.get("method") or "median of alternating batches"
    median = data["formula_median"]
    medians = [f"over the formulas {median:.2f}×"]
    if data.get("intent_median") is not None:
        medians.append(f"over the system intents {data['intent_median']:.2f}×")
    if data.get("suite_median") is not None:
        medians.append(f"over both {data['suite_median']:.2f}×")
    verdict_text = "met" if median >= 5 else "not met"
    return f"""## 7. Dice

The notation issue's benchmark, `bench/dice.py` (run alone: `.venv/bin/python -m bench.dice`; the suite
reads the same measurements through `bench.dice.results()`): each formula is rolled with tablerelay's
engine (`rules.dice.evaluate` with `SecureDice`, producing the total, the evaluated terms and the one-line
text) and with avrae's `d20.roll` (total, tree and result string) in alternating timed batches
({data.get("rounds", "?")} rounds of {data.get("batch_seconds", 0) * 1000:.0f} ms; {method}). System
intents go through `rules.resolve` and are compared with `d20` rolling the same dice. Machine:
{data.get("machine", "?")}.

{table(["formula", "ours/s", "d20/s", "ratio"], body)}

Median ratios: {", ".join(medians)}. The notation issue's target, a median of 5× over the formulas, is
{verdict_text} in this run. How the engine gets there (cached parsing, a flat fast path for sums of plain,
keep/drop and exploding dice, dice drawn in pools) is described with the dice engine in
[notation.md](notation.md).
"""


# -- the document ------------------------------------------------------------------------------------------


def machine_section(results: dict[str, Any]) -> str:
    m = results["machine"]
    pk = m["packages"]
    rows = [
        ("tablerelay revision", f"`{m.get('revision', 'unknown')}`"),
        ("CPU", f"{m['cpu']}, {m['cores']} cores"),
        ("memory", f"{m['memory_gib']} GiB"),
        ("kernel", m["kernel"]),
        ("Python", m["python"]),
        ("Node", m["node"]),
        ("descriptor limit (soft/hard)", m["nofile"]),
        (
            "server libraries",
            ", ".join(f"{name} {pk[name]}" for name in SERVER_LIBS),
        ),
        (
            "client libraries",
            ", ".join(f"{name.removesuffix(' (node)')} {pk[name]}" for name in CLIENT_LIBS),
        ),
        ("load average at start (1, 5, 15 min)", ", ".join(str(x) for x in m["load_at_start"])),
    ]
    load_rows = [
        (
            name,
            ", ".join(str(x) for x in v["before"]),
            ", ".join(str(x) for x in v["after"]),
            f"{results['timings'].get(name, 0):g} s",
            f"{v['python_ms']:g} ms" if "python_ms" in v else "–",
        )
        for name, v in results.get("load", {}).items()
    ]
    speeds = [v["python_ms"] for v in results.get("load", {}).values() if "python_ms" in v]
    varied = (
        f" In this run the reading went from {min(speeds):g} to {max(speeds):g} ms: the machine's speed"
        " changed while it ran, so absolute figures of different sections do not compare; ratios within"
        " a section do."
        if speeds and max(speeds) > 1.25 * min(speeds)
        else ""
    )
    peak = max([m["load_at_start"][0]] + [v["before"][0] for v in results.get("load", {}).values()])
    shared = (
        f" (in this run the one-minute load reached {peak:g} on {m['cores']} cores)" if peak > 3.5 else ""
    )
    return f"""## Machine

{table(["", ""], rows, "ll")}

The load average around each section is below. It counts the suite's own processes too: a server and
its receivers keep about two runnable processes busy, so a one-minute load well above 2–3 means other
work shared the machine{shared}. With more runnable processes than cores every process gets a slice, so
absolute figures drop and get noisier; the ratios compare servers measured minutes apart under similar
load, and the CPU-per-delivery figures (CPU time, not wall time) are the least affected.

The machines of this kind are not all equally fast, and a section measured again on another day may have
run on a slower or faster one: "Python speed" is how long a fixed piece of pure Python (300,000 loop
steps, `bench.machine.python_speed`) took just before the section. Absolute rates scale with it; every
ratio on this page compares servers measured in the same section, on the same machine ("–": measured
before this reading existed). It is a snapshot: on some days the machine's speed flips between about 13
and 22 ms from one second to the next (table of changes), and a section that read fast may still have run
slow.{varied}

{table(["section", "load before", "load after", "took", "Python speed"], load_rows)}
"""


def goals_section(goals: dict[str, Any], results: dict[str, Any]) -> str:
    def row(name: str, want: str, key: str, fmt: str, ok: Any) -> tuple[str, str, str, str]:
        value = goals.get(key)
        return (
            name,
            want,
            fmt.format(value) if value is not None else "–",
            verdict(None if value is None else ok(value)),
        )

    rows = [
        row(
            "fan-out at N = 1,000 (bursts) vs bare websockets",
            f"≥ {GOAL_FANOUT_BARE}×",
            "fanout_bare",
            "{:.2f}×",
            lambda v: v >= GOAL_FANOUT_BARE,
        ),
        row(
            "fan-out at N = 1,000 (bursts) vs python-socketio",
            f"≥ {GOAL_FANOUT_SOCKETIO:g}×",
            "fanout_socketio",
            "{:.2f}×",
            lambda v: v >= GOAL_FANOUT_SOCKETIO,
        ),
        row(
            "the same, one roll at a time: vs bare websockets",
            f"≥ {GOAL_FANOUT_BARE}×",
            "chain_fanout_bare",
            "{:.2f}×",
            lambda v: v >= GOAL_FANOUT_BARE,
        ),
        row(
            "the same, one roll at a time: vs python-socketio",
            f"≥ {GOAL_FANOUT_SOCKETIO:g}×",
            "chain_fanout_socketio",
            "{:.2f}×",
            lambda v: v >= GOAL_FANOUT_SOCKETIO,
        ),
        row(
            "latency p99 vs bare websockets, same delivery rate",
            f"≤ {GOAL_LATENCY_P99}×",
            "latency_p99",
            "{:.2f}×",
            lambda v: v <= GOAL_LATENCY_P99,
        ),
        row(
            "resident memory per idle connection",
            f"≤ {GOAL_MEMORY_KIB:g} KiB",
            "memory_kib",
            "{:.1f} KiB",
            lambda v: v <= GOAL_MEMORY_KIB,
        ),
        row(
            "acked rolls/s, 100 rollers in one room",
            f"≥ {GOAL_APPENDS:,.0f}/s",
            "appends",
            "{:,.0f}/s",
            lambda v: v >= GOAL_APPENDS,
        ),
        row(
            "acked rolls/s (100 rollers), signing on ÷ off",
            f"≥ {GOAL_SIGNING}×",
            "signing_appends",
            "{:.2f}×",
            lambda v: v >= GOAL_SIGNING,
        ),
        row(
            "fan-out at N = 1,000 (bursts), signing on ÷ off",
            f"≥ {GOAL_SIGNING}×",
            "signing_fanout",
            "{:.2f}×",
            lambda v: v >= GOAL_SIGNING,
        ),
    ]
    rows += [
        row(
            "many tables (1,000 rooms × 6): deliveries/s vs bare websockets",
            f"≥ {GOAL_TABLES_BARE}×",
            "tables_bare",
            "{:.2f}×",
            lambda v: v >= GOAL_TABLES_BARE,
        ),
        row(
            "many tables: p99 intent → last member vs bare websockets",
            f"≤ {GOAL_TABLES_P99}×",
            "tables_p99",
            "{:.2f}×",
            lambda v: v <= GOAL_TABLES_P99,
        ),
        row(
            "acked rolls/s, 100 rooms × 1 roller",
            f"≥ {GOAL_ROOMS_APPENDS:,.0f}/s",
            "rooms_appends",
            "{:,.0f}/s",
            lambda v: v >= GOAL_ROOMS_APPENDS,
        ),
        row(
            "one roll at a time into a room of 100 vs bare websockets",
            f"≥ {GOAL_SMALL_CHAIN_BARE}×",
            "small_chain_bare",
            "{:.2f}×",
            lambda v: v >= GOAL_SMALL_CHAIN_BARE,
        ),
    ]
    intro = (
        "The issue's goals for the relay, each checked against a peer measured in this same run "
        "(the sections below have the tables, the method and the profiles):"
    )
    text = "## Goals\n\n" + intro + "\n\n" + table(["goal", "target", "this run", ""], rows, "lrrl") + "\n"
    why = _why_not(goals, results)
    if why:
        text += "\nWhere a goal is not met, what bounds it:\n\n" + "\n".join(why) + "\n"
    return text


def _why_not(goals: dict[str, Any], results: dict[str, Any]) -> list[str]:
    sections = results["sections"]
    out = []
    fan = sections.get("fanout") or []
    relay, bare = _find(fan, kind="relay", members=1000), _find(fan, kind="bare", members=1000)
    for prefix, what in (("", "bursts"), ("chain_", "one roll at a time")):
        value = goals.get(f"{prefix}fanout_bare")
        if value is not None and value < GOAL_FANOUT_BARE and relay and bare:
            out.append(
                f"- Fan-out vs bare websockets ({what}): per delivery the relay used "
                f"{relay[f'{prefix}server_cpu_us']:.1f} µs of CPU and the bare server "
                f"{bare[f'{prefix}server_cpu_us']:.1f} µs; both are dominated by one `send()` per socket per "
                "write (section 1), the relay adding each roll's own path (rules, commit, ack). With one "
                "roll in flight, wall time also counts every hop a roll makes between processes and threads "
                "(driver, server, receivers, driver); the relay's commit adds no hop of its own (it runs on "
                "the event loop), but its fixed cost per roll is wall time there."
            )
        value = goals.get(f"{prefix}fanout_socketio")
        sio = _find(fan, kind="socketio", members=1000)
        if value is not None and value < GOAL_FANOUT_SOCKETIO and relay and sio:
            floor = ""
            if bare and sio.get(f"{prefix}rate"):
                # What a server doing nothing but the sends reaches against the same peer in the same run.
                floor = (
                    f" The bare websockets server, which does nothing but those sends, was "
                    f"{bare[f'{prefix}rate'] / sio[f'{prefix}rate']:.2f}× python-socketio in the same run."
                )
            out.append(
                f"- Fan-out vs python-socketio ({what}): {value:.2f}×. Per delivery the relay used "
                f"{relay[f'{prefix}server_cpu_us']:.1f} µs of CPU and python-socketio "
                f"{sio[f'{prefix}server_cpu_us']:.1f} µs. With one roll in flight the relay makes one "
                "`send()` per socket per event, which is nearly all of what the bare server spends per "
                "delivery, so the system call, not the relay's Python, sets its floor and caps the ratio "
                f"(section 1's profile: most samples are in the transport's `write`).{floor}"
            )
    value = goals.get("latency_p99")
    if value is not None and value > GOAL_LATENCY_P99:
        out.append(
            "- Latency p99: the relay's extra path per roll (rules, the SQLite commit, "
            "the ack) and scheduling on the shared machine (section 2)."
        )
    memory_data = sections.get("memory") or {}
    value = goals.get("memory_kib")
    if value is not None and value > GOAL_MEMORY_KIB:
        bare_run = _find(memory_data.get("runs", []), kind="bare")
        trace = (memory_data.get("traced") or {}).get("trace")
        held = retained_history(trace)
        reason = (
            f"each idle connection keeps the history of its welcome alive ({held / 1024:,.1f} KiB per "
            "connection of decoded records in the traced run), because `Relay._serve_socket` keeps its "
            "`welcome` local in scope for the life of the connection; releasing it after the send is the fix"
            if held >= HISTORY_RETAINED
            else "the per-connection objects of websockets and asyncio plus the relay's own"
        )
        floor_text = (
            f" The bare websockets server needs {bare_run['kib_per_connection']:.1f} KiB per connection "
            "by itself."
            if bare_run
            else ""
        )
        out.append(f"- Memory: {reason} (section 3).{floor_text}")
    value = goals.get("appends")
    apps = (sections.get("appends") or {}).get("server", [])
    hundred = _find(apps, rooms=1, rollers_per_room=100)
    if value is not None and value < GOAL_APPENDS and hundred:
        storage = {x["writers"]: x["rate"] for x in (sections.get("appends") or {}).get("storage", [])}
        ceiling = storage.get(100)
        out.append(
            f"- Acknowledged rolls: the server used {1e6 * hundred['server_cpu'] / hundred['rate']:,.0f} µs "
            f"of CPU per acknowledged roll ({100 * hundred['server_cpu']:.0f} % busy), including writing "
            "each roll to all 100 rollers' sockets; "
            + (f"SQLite alone took {ceiling:,.0f} appends/s with 100 writers, so " if ceiling else "")
            + "the bound is the event loop's per-roll work on one core, not storage (section 4)."
        )
    tab = sections.get("tables") or []
    t_relay, t_bare = _find(tab, kind="relay"), _find(tab, kind="bare")
    value = goals.get("tables_bare")
    if value is not None and value < GOAL_TABLES_BARE and t_relay and t_bare:
        floor = _tables_floor(t_relay, t_bare, (results.get("profiles") or {}).get("tables"))
        out.append(f"- Many tables: {value:.2f}× bare. {floor} (section 4b).")
    value = goals.get("tables_p99")
    if value is not None and value > GOAL_TABLES_P99 and t_relay and t_bare:
        out.append(_tables_p99(value, t_relay, t_bare))
    rooms = _find(apps, rooms=100, rollers_per_room=1)
    value = goals.get("rooms_appends")
    if value is not None and value < GOAL_ROOMS_APPENDS and rooms:
        out.append(
            f"- 100 rooms × 1 roller: {rooms['rate']:,.0f} acked rolls/s, the server "
            f"{100 * rooms['server_cpu']:.0f} % busy at {1e6 * rooms['server_cpu'] / rooms['rate']:,.0f} µs "
            "per roll (both processes). Each roller waits for its own ack, so the rate is 100 ÷ the round "
            "trip (frame in, the SQLite commit at the end of the loop iteration, the ack out); the rolls of "
            "an iteration share a commit, but each still costs its own read, resolve and write (ack and "
            "event together), so the loop's own work per roll is the floor here."
        )
    value = goals.get("small_chain_bare")
    small = [_find(fan, kind=k, members=100) for k in ("relay", "bare")]
    if value is not None and value < GOAL_SMALL_CHAIN_BARE and small[0] and small[1]:
        out.append(
            f"- One roll at a time into a room of 100: {value:.2f}× bare. Per delivery the relay used "
            f"{small[0]['chain_server_cpu_us']:.1f} µs of CPU and the bare server "
            f"{small[1]['chain_server_cpu_us']:.1f} µs; with 100 deliveries per roll the roll's fixed cost "
            "(reading and resolving it, the commit, the signature and the ack, about "
            f"{100 * (small[0]['chain_server_cpu_us'] - small[1]['chain_server_cpu_us']):.0f} µs) weighs a "
            "tenth of what it does at 1,000, and with one roll in flight it is all wall time. Two changes "
            "took wall time out of it (table of changes): committing on the event loop, and serving the "
            "roller first, so its next roll is on its way while the room is written to. What is left is "
            "spread thin (perf, on a slower day: 63 % of the fixed cost in the interpreter, about 440 calls "
            "per roll, none above a few percent; 21 % in the kernel, 19 system calls per roll against bare's "
            "4), and it is not the relay's own Python: compiled with mypyc (the server, the room, the "
            "protocol, fan-out, visibility, the SQLite log, the rules), the fixed cost went from 473 to 460 "
            "µs; uvloop and the compiled encoder are already in (table of changes). Nor is it storing and "
            "signing alone: with every variant and bare up at once, taking turns, a burst then one roll at a "
            "time each, round after round (`bench.ab --shape fanpairs100`, ten rounds, twice, on 2026-11-27 "
            "at a Python speed of 7.5–7.8 ms; table of changes), the relay read 0.64× and 0.63× bare (the "
            "medians of the rounds' ratios), signing off 0.69×, nothing stored 0.71×, and a relay that "
            "neither stores nor signs (an experiment) 0.78× and 0.79×, at 4.67–4.89 µs of CPU per delivery "
            "against bare's 4.00. On slower days (13–22 ms) the same pairs read 0.74–0.84× for the relay and "
            "0.88–0.96× for that experiment: on the faster machine the Python a roll runs before its 100 "
            "writes, reading the frame through websockets, checking, resolving, the room's record and fold, "
            "the ack, holds even a relay that keeps nothing under the goal, and the commit and the signature "
            "take it from there to this run's figure."
        )
    value = goals.get("signing_appends")
    pairs = signing_pairs(sections.get("signing") or {})
    if value is not None and value < GOAL_SIGNING and pairs is not None:
        on, off = pairs["cpu_on"], pairs["cpu_off"]
        loop_on, loop_off = on.get("event loop thread", 0.0), off.get("event loop thread", 0.0)
        child = on.get("child processes", 0.0)
        extra_loop, extra_rollers = loop_on - loop_off, on["rollers"] - off["rollers"]
        floor = off["both"] / (off["both"] + child + max(extra_rollers, 0.0))
        out.append(
            f"- Acked rolls, signing on ÷ off: {value:.2f}× (the median of {pairs['rounds']} rounds' "
            f"ratios; {spread(pairs)}). The server and its 100 rollers "
            f"kept {on['cores']:.1f} of this machine's 2 cores busy, so the rate follows what a roll costs "
            "all of them together. Per acked roll (medians of the windows), signed against unsigned: the "
            f"event loop {loop_on:.0f} against {loop_off:.0f} µs, the process making nonces {child:.0f} µs, "
            f"the rollers {on['rollers']:.0f} against {off['rollers']:.0f} µs (a signed event is 89 bytes "
            f"longer on each of their 100 sockets); in all {on['both']:.0f} against {off['both']:.0f} µs, "
            f"{off['both'] / on['both']:.2f}×. So signing adds {child:.0f} µs in the nonce process (the "
            "point r·B, libsodium's fixed-base multiplication, the fastest this machine offers: OpenSSL's "
            f"took longer, table of changes), {extra_loop:.0f} µs on the event loop (the signed form: its "
            "canonical encoding, the signature with that nonce, and 89 more bytes written to each of 100 "
            "sockets) and "
            f"{extra_rollers:.0f} µs in the load generator sharing the cores. The event loop's own CPU per "
            f"roll gives {loop_off / loop_on:.2f}×; the rest of the gap is CPU outside it, which on two "
            "cores the rate pays too (pinning the event loop to one core and the rollers and the nonce "
            "process to the other did not lift the ratio, table of changes). Of these parts only the nonce "
            "process's holds still from run to run (33–35 µs in three runs of variants taking turns with "
            "the real relay on a slower day: 64 zero bytes for a signature with and without the nonce "
            "process, RFC 8032's signatures on the loop; table of changes), and it alone is "
            f"{child / off['both'] * 100:.0f} % of what an unsigned roll costs here: a relay whose event "
            f"loop did no signing work at all would sit at {floor:.2f}× with this run's figures. "
            + (
                "So the goal is below the floor of the contract (spec/signing.md) on two shared cores: one "
                "fresh secret nonce per signed form and the signature's bytes on every socket cost more "
                "than the tenth of a roll it leaves, whatever the event loop does."
                if floor < GOAL_SIGNING - SIGNING_NOISE
                else "The goal is at the floor of one fresh secret nonce per signed form (the contract, "
                "spec/signing.md) on two shared cores, and the noise between runs decides which side of it "
                "a run reads."
            )
        )
    value = goals.get("signing_fanout")
    bursts = (sections.get("signing") or {}).get("fanout_paired") or {}
    on_runs, off_runs = ((bursts.get(side) or {}).get("bursts") or [] for side in ("on", "off"))
    if value is not None and value < GOAL_SIGNING and on_runs and off_runs:
        out.append(_signing_bursts_floor(value, on_runs, off_runs))
    return out


def _signing_bursts_floor(value: float, on: list[dict[str, Any]], off: list[dict[str, Any]]) -> str:
    server = [per_delivery_us(runs) or 0.0 for runs in (on, off)]
    receivers = [per_delivery_us(runs, "receivers") or 0.0 for runs in (on, off)]
    lasted = 1000 * statistics.median(r["elapsed"] for r in on + off)
    return (
        f"- Fan-out bursts at N = 1,000, signing on ÷ off: {value:.2f}×. A burst lasted about "
        f"{lasted:.0f} ms; per delivery the server spent {server[0]:.2f} against {server[1]:.2f} µs of CPU "
        f"and the two receiver processes {receivers[0]:.2f} against {receivers[1]:.2f} µs, so the "
        "receivers, sharing the two cores, set the rate. The signature is made once per event for 1,000 "
        "deliveries; what each delivery pays is the signed event's length, 89 bytes more (`kid` and a "
        "64-byte `sig`), in the server's writes and the receivers' reads. An unsigned relay whose frames "
        "carry a `kid` and 64 zero bytes as `sig`, the signed frame's size with no signing work (an "
        "experiment taking turns with both, eight rounds of 900-event bursts on 2026-11-27; table of "
        "changes), read 0.924× of the unsigned relay, as the signing relay did (0.924×), at 0.193 µs of "
        "server CPU per delivery against the signing relay's 0.197 and the unsigned one's 0.168. On "
        "slower days, when the server's Python work per write outweighed the bytes, this goal read "
        "1.00×; where the bytes are the cost, the contract's fields (spec/signing.md), not the "
        "signing, are its floor."
    )


def _tables_p99(value: float, relay: dict[str, Any], bare: dict[str, Any]) -> str:
    pairs = [
        f"{a['p99_ms']:.1f} against {b['p99_ms']:.1f} ms"
        for a, b in zip(relay.get("runs") or [], bare.get("runs") or [], strict=False)
    ]
    runs = f" Each run's p99, the relay's against bare's (taking turns): {', '.join(pairs)}." if pairs else ""
    rolls = relay["rolls"] * max(1, len(relay.get("runs") or []))
    return (
        f"- Many tables, p99: {value:.2f}×.{runs} With 32 rolls in flight a roll waits behind the others "
        "in the loop's queue, and each costs the relay "
        f"{relay['server_cpu_us_per_roll'] / bare['server_cpu_us_per_roll']:.1f} times what it costs the "
        f"bare server, so the median follows the CPU per roll (p50 {relay['p50_ms']:.1f} against "
        f"{bare['p50_ms']:.1f} ms). The 99th percentile is the slowest {rolls // 100:,} of {rolls:,} rolls, "
        "and it follows the shared machine's stalls on either side: on 2026-11-27, with three runs a side, "
        "eight readings of this ratio went from 0.53× to 1.94× (median 0.94×), bare's own p99 from 9.7 to "
        "50.8 ms between runs, and a relay that never checkpoints SQLite read no lower than the real one "
        "(table of changes); the section pools six runs a side since."
    )


def _tables_floor(relay: dict[str, Any], bare: dict[str, Any], profile: dict[str, Any] | None) -> str:
    split = relay.get("cpu_us_per_roll_by") or {}
    parts = ", ".join(f"{name} {us:.0f} µs" for name, us in split.items())
    text = (
        f"Server CPU per roll {relay['server_cpu_us_per_roll']:.0f} µs against the bare server's "
        f"{bare['server_cpu_us_per_roll']:.0f} µs ({parts}). The bare server's whole cost is one read and "
        "seven `send()`s; the relay makes the same seven writes (the roller's ack and event leave "
        "together), and its event loop also parses and resolves the roll, commits it to SQLite (one "
        "`INSERT` per loop iteration, a few rolls each at this rate, the rows at the table's end and an "
        "index entry in each room's part of the index), "
        "encodes the ack and the event form canonically and signs it (with a nonce made ahead by a child "
        "process)"
    )
    spent_on = tables_split(relay, profile)
    if spent_on is None:
        return text
    in_process = sum(us for name, us in spent_on.items() if name != TABLES_CHILD)
    writes, sqlite, frames = (spent_on[name] for name in TABLES_PARTS)
    floor = bare["server_cpu_us_per_roll"] / GOAL_TABLES_BARE
    spent = writes + sqlite + frames
    return (
        f"{text}. By the profile's shares of the server process's {in_process:.0f} µs: the socket writes "
        f"{writes:.0f} µs, the SQLite commit on the loop {sqlite:.0f} µs, reading, checking and resolving "
        f"the frame {frames:.0f} µs, the nonces {spent_on[TABLES_CHILD]:.0f} µs more in the child. "
        f"For {GOAL_TABLES_BARE}× the relay could spend {floor:.0f} µs per roll in all; the writes, the "
        f"commit and the frame's handling alone take {spent:.0f} µs (the writes are the bare server's own "
        "cost; the commit, in C, writes the WAL's pages, an index page for each room it touches), before "
        "the signature, "
        "the ack and the fan-out's bookkeeping: out of reach, on this stack, for a relay that stores and "
        "signs each roll before its ack. Nor is it the storing and signing that hold it there: a relay "
        "that did neither (an experiment, the `INSERT` skipped and signing off, taking turns with the "
        "real relay and bare, three rounds, on 2026-11-27; table of changes) spent 157–177 µs per roll "
        "against bare's 77–100 and delivered at best 32,062 against 50,514/s, 0.63× (0.62× on a slower "
        "day, at 447–480 against 247–263 µs): the per-roll path in Python that is left, "
        "reading the frame through websockets, checking, resolving, the room's record and fold, the ack "
        "and the fan-out, is itself below the goal. Nor does a newer interpreter bring it near: on Python "
        "3.13 the relay spent about a tenth less per roll, bare no less (table of changes). What moved "
        "it, and what was tried and did not (a writer process among them), is measured in the table of "
        "changes at the end"
    )


def method_section(results: dict[str, Any]) -> str:
    cal = results["calibration"]
    return f"""## Method

- **Three servers, one harness.** Each measurement starts a fresh server process: tablerelay
  (`tablerelay serve`, SQLite in a fresh data folder, default durability, info logs to a file, on uvloop,
  its default event loop), a bare `websockets` server on the same loop, so a ratio compares servers and
  not loops (`bench/peers/loop.py`; `BENCH_PEER_LOOP=asyncio` puts the peers on asyncio's own loop)
  (`bench/peers/bare_ws.py`: answers every message with one `broadcast()` of the
  relay's own roll event, {cal["frame_size"]} bytes as the relay sent it, only its seq patched in as a
  4-byte integer, so receivers that decode read the same map on both: no parsing, storage or dice; the
  floor of our stack) and python-socketio on aiohttp
  (`bench/peers/socketio_server.py`: `emit` to a room of the same roll event as a JSON object,
  {cal["json_size"]} bytes of JSON, the way Socket.IO ships objects; Socket.IO is the protocol a Foundry VTT
  server speaks to its clients). All clients are one Node program, `bench/receivers/harness.mjs`, in
  processes separate from the server: `ws` clients for the relay and the bare server, `socket.io-client`
  (WebSocket transport only) for python-socketio. Everything runs over loopback.
- **The roll.** `{json.dumps(cal["intent"])}`, labelled "{cal["label"]}", public: a Draw Steel power roll with
  Might 2 and an edge. Its event frame is {cal["frame_size"]} bytes of MessagePack; the relay's first run of
  each suite captures one and the peers broadcast it: its bytes (bare), its content as JSON
  (python-socketio).
- **Rooms and members.** Relay receivers join as one spectator participant per room with many sockets (a
  token with a fixed `sub`), so opening thousands of sockets does not also store and broadcast thousands of
  `join` events; every socket still receives every event. The driver is the room's GM; rollers are
  players, one participant each.
- **Limits lifted for the relay** (through its environment variables, nothing else changed): the
  per-socket rate limit (`TABLERELAY_RATE`, `TABLERELAY_BURST`: a driver sends hundreds of rolls per
  second on one socket), and the room and member caps (`TABLERELAY_MAX_ROOMS`, `TABLERELAY_MAX_MEMBERS`).
  Bursts stay below the relay's 1,024-frame send queue, so its slow-client guard never fires.
- **Ratios in the same run.** Every ratio compares servers measured in the same run of the suite, on the
  same machine, with the same client processes; absolute figures are printed beside them.
- **Every wait is bounded.** Each load loop stops after a fixed number of events or seconds; a run that
  does not finish in time fails with the process and log that stalled.
- **Profiles.** After the measured runs, py-spy samples the relay (out of process, `--nonblocking`) during
  an extra fan-out burst and an extra append run; a tracemalloc run of the relay shows where connection
  memory goes. These diagnostic runs are not part of any figure.
"""


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
        split = tables_split(_find(sections["tables"], kind="relay"), profiles.get("tables"))
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
