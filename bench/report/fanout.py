"""Section 1 of the page, fan-out: bursts and one roll at a time to one room of N members, with its plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report.common import COLORS, LABELS, find, layer_share, n0, profile_block, pyplot, ratio, table

FANOUT_HEADER = [
    "N members",
    "tablerelay /s",
    "bare websockets /s",
    "python-socketio /s",
    "relay ÷ bare",
    "relay ÷ socketio",
]


def plot_fanout(rows: list[dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    sizes = sorted({r["members"] for r in rows})
    kinds = [k for k in LABELS if any(r["kind"] == k for r in rows)]
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.4), sharey=True)
    width = 0.8 / len(kinds)
    for ax, prefix, title in ((axes[0], "", "Bursts"), (axes[1], "chain_", "One roll at a time")):
        for i, kind in enumerate(kinds):
            xs, ys = [], []
            for j, n in enumerate(sizes):
                r = find(rows, kind=kind, members=n)
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


def _fanout_table(rows: list[dict[str, Any]], prefix: str) -> str:
    body = []
    for n in sorted({r["members"] for r in rows}):
        relay, bare, sio = (find(rows, kind=k, members=n) for k in ("relay", "bare", "socketio"))

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
            r = find(rows, kind=kind, members=n)
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
    small = [find(rows, kind=k, members=100) for k in ("relay", "bare")]
    if small[0] and small[1] and small[0].get("chain_rate") and small[1].get("chain_rate"):
        goals["small_chain_bare"] = small[0]["chain_rate"] / small[1]["chain_rate"]
    relay, bare, sio = (find(rows, kind=k, members=1000) for k in ("relay", "bare", "socketio"))
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

{profile_block(profiles.get("fanout_burst"), "repeated bursts to 1,000 members")}
{profile_block(profiles.get("fanout_chain"), "one-at-a-time rolls to 1,000 members")}"""
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
    relay, bare, sio = (find(rows, kind=k, members=1000) for k in ("relay", "bare", "socketio"))
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
        if layer_share(profile, "asyncio") is None:
            continue
        lines.append(
            f"- Profile of the relay during {what}: {layer_share(profile, 'asyncio'):.0f} % of samples in "
            "asyncio's loop and transports (socket reads and writes), "
            f"{layer_share(profile, 'relay') or 0:.0f} % in the relay's own code, "
            f"{layer_share(profile, 'websockets') or 0:.0f} % websockets, "
            f"{layer_share(profile, 'SQLite') or 0:.0f} % the SQLite log, "
            f"{layer_share(profile, 'rules') or 0:.0f} % the rules core."
        )
    return "\n".join(lines)
