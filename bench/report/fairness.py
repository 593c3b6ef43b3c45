"""Section 10 of the page, fair dice: the relay with fair dice on against off for acked player rolls, and a
GM's roll with witnesses against the same roll unwitnessed, each pair of relays taking turns
(``bench.sections.fairness``)."""

from __future__ import annotations

import statistics
from typing import Any

from bench.report.common import GOAL_FAIR, n0, n1, table, verdict
from bench.report.signing import paired_ratio, spread, windows_cpu

HOW_TO_RUN = "`.venv/bin/python -m bench --only fairness`"


def shape_name(shape: dict[str, Any]) -> str:
    rooms, per_room = shape["rooms"], shape["rollers_per_room"]
    if rooms == 1:
        return f"one room of {per_room} rollers"
    return f"{rooms} rooms × {per_room} roller" + ("s" if per_room > 1 else "")


def goal_key(shape: dict[str, Any]) -> str:
    return f"fair_appends_{shape['rooms']}x{shape['rollers_per_room']}"


def fair_pairs(data: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each acked-roll shape with its on ÷ off summary (``paired_ratio``), shapes without a pair left out."""
    out = []
    for shape in data.get("acked") or []:
        pair = paired_ratio(shape.get("on") or [], shape.get("off") or [])
        if pair is not None:
            out.append((shape, pair))
    return out


def witness_ratios(data: dict[str, Any]) -> dict[str, Any] | None:
    """The witnessed GM roll against the unwitnessed one: pooled p50 and p99 of each and their ratios, and
    the spread of the rounds' p50 ratios."""
    w = data.get("witnesses") or {}
    on, off = w.get("witnessed"), w.get("unwitnessed")
    if not on or not off or not off.get("p50_ms") or not off.get("p99_ms"):
        return None
    rounds = [
        a["p50_ms"] / b["p50_ms"]
        for a, b in zip(on.get("rounds") or [], off.get("rounds") or [], strict=True)
        if b["p50_ms"]
    ]
    return {
        "players": w.get("players"),
        "witnessed": on,
        "unwitnessed": off,
        "p50": on["p50_ms"] / off["p50_ms"],
        "p99": on["p99_ms"] / off["p99_ms"],
        "rounds": sorted(rounds),
    }


def fairness_goals(data: dict[str, Any] | None) -> dict[str, Any]:
    """The Goals table's figures: on ÷ off per acked-roll shape, and the witnessed roll's ratios."""
    goals: dict[str, Any] = {}
    if not data:
        return goals
    for shape, pair in fair_pairs(data):
        goals[goal_key(shape)] = pair["ratio"]
        goals.setdefault("fair_shapes", []).append((shape_name(shape), goal_key(shape)))
    ratios = witness_ratios(data)
    if ratios is not None:
        goals["fair_witness_p50"] = ratios["p50"]
        goals["fair_witness_p99"] = ratios["p99"]
        goals["fair_witness_players"] = ratios["players"]
    return goals


def fairness_goal_rows(goals: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Rows of the Goals table; before the section's first recorded run, its goal as not measured."""
    shapes = goals.get("fair_shapes") or [("one room of 100 rollers", "fair_appends_1x100")]
    rows = []
    for name, key in shapes:
        value = goals.get(key)
        rows.append(
            (
                f"acked player rolls/s ({name}), fair dice on ÷ off",
                f"≥ {GOAL_FAIR}×",
                "–" if value is None else f"{value:.2f}×",
                verdict(None if value is None else value >= GOAL_FAIR),
            )
        )
    p50, p99 = goals.get("fair_witness_p50"), goals.get("fair_witness_p99")
    players = goals.get("fair_witness_players") or 5
    rows.append(
        (
            f"a GM's roll with {players} witnesses vs unwitnessed: p50, p99",
            "reported",
            "–" if p50 is None or p99 is None else f"{p50:.2f}×, {p99:.2f}×",
            "not measured" if p50 is None else "reported",
        )
    )
    return rows


def fairness_section(data: dict[str, Any] | None) -> str:
    goal = f"""The goal (issue #36): with fair dice on, acked public player rolls per second at least
{GOAL_FAIR}× of the same relay with fair dice off, measured in the same run, in every shape measured. The
witnessed GM roll's latency is reported against the unwitnessed one, with no target."""
    method = f"""What the fair dice of spec/fairness.md cost (`bench/sections/fairness.py`; run alone:
{HOW_TO_RUN}). Acked player rolls as in section 4: the same relay started with fair dice on and off
(`TABLERELAY_FAIR_DICE`), each with its own rollers, both up at once and taking turns, the order reversed
every other round; every roll is a public player roll carrying a 16-byte roller seed on both sides, as the
JS client sends it (the relay with fair dice off reads and ignores it). With fair dice on, each roll's dice
come from the room's open seed through an HMAC key over the roll's canonical transcript, its event carries
the `fair` map (seed number, roller seed, draws), and every 250 rolls (`seed_rolls`) the seed is revealed
and the next one committed and stored: all of it inside the on side's windows. Each window follows a
lead-in of rolling that is not measured. The table gives the median of each side's windows and, as
on ÷ off, the median of the rounds' ratios.

A GM's witnessed roll: two relays with fair dice on, each with a room of a GM and the same number of
players; on one the players said `"witness": true` in their hello and answer every `pending` event that
asks them at once with 16 random bytes, on the other they did not, so the GM's rolls there are made at
once, unwitnessed. Both rooms have the same sockets, so each roll reaches as many; what differs is the
pending event and the witnesses' round trip. The GM makes public rolls one at a time; the latency is
from the roll frame leaving the GM's socket to its ack arriving (the ack follows the stored roll). The
clients are Python `websockets` clients in the suite's own process, the same code for both sides, and
the two relays take turns, round by round."""
    if not data:
        return f"""## 10. Fair dice

{method}

{goal}

_Not measured in the run this page was written from: {HOW_TO_RUN} measures it and rewrites this section._
"""
    rows, cpu_rows, spreads = [], [], []
    for shape, pair in fair_pairs(data):
        name = shape_name(shape)
        ok = verdict(pair["ratio"] >= GOAL_FAIR)
        rows.append((name, n0(pair["on"]), n0(pair["off"]), f"{pair['ratio']:.2f}×", ok))
        spreads.append(f"{name}: {spread(pair)}, {pair['rounds']} rounds of {shape['seconds']:g} s")
        on_cpu, off_cpu = windows_cpu(shape["on"]), windows_cpu(shape["off"])
        cpu_rows.append((f"{name}: the server, per acked roll", n1(on_cpu["server"]), n1(off_cpu["server"])))
        cpu_rows.append(
            (
                "of it, the event loop thread",
                n1(on_cpu.get("event loop thread")),
                n1(off_cpu.get("event loop thread")),
            )
        )
        cpu_rows.append(("the rollers, per acked roll", n1(on_cpu["rollers"]), n1(off_cpu["rollers"])))
    acked = (
        table(["acked public player rolls/s", "fair dice on", "fair dice off", "on ÷ off", "goal"], rows)
        if rows
        else "_Acked rolls were not measured in this run._"
    )
    cpu = (
        "Server and roller CPU (µs per acked roll, all the server's threads and its nonce process; medians "
        "of the windows):\n\n" + table(["", "fair dice on", "fair dice off"], cpu_rows) + "\n"
        if cpu_rows
        else ""
    )
    ratios = witness_ratios(data)
    if ratios is not None:
        on, off = ratios["witnessed"], ratios["unwitnessed"]

        def side(name: str, r: dict[str, Any]) -> tuple[str, ...]:
            values = f"{r['witness_values']:,} ({r['witness_values'] / max(1, r['rolls']):.1f} a roll)"
            return (
                name,
                f"{r['p50_ms']:.2f}",
                f"{r['p99_ms']:.2f}",
                f"{r['max_ms']:.2f}",
                f"{r['rolls']:,}",
                values,
            )

        lat_rows = [
            side(f"with {ratios['players']} witnesses", on),
            side("unwitnessed", off),
            ("witnessed ÷ unwitnessed", f"{ratios['p50']:.2f}×", f"{ratios['p99']:.2f}×", "", "", ""),
        ]
        per_round = ratios["rounds"]
        rounds_text = (
            f" The rounds' p50 ratios ran from {per_round[0]:.2f}× to {per_round[-1]:.2f}× "
            f"(median {statistics.median(per_round):.2f}×, {len(per_round)} rounds of "
            f"{data['witnesses'].get('rolls_per_round', 0):,} rolls each side)."
            if per_round
            else ""
        )
        witnessed = (
            "A GM's public roll, intent → ack (ms), each side's rolls of all rounds pooled:\n\n"
            + table(["GM roll", "p50", "p99", "max", "rolls", "witness values in its events"], lat_rows)
            + "\n\n"
            + rounds_text.strip()
            + "\n"
        )
    else:
        witnessed = "_The witnessed GM roll was not measured in this run._\n"
    return f"""## 10. Fair dice

{method}

{goal}

{acked}

Spread of the rounds' on ÷ off ratios: {"; ".join(spreads) or "none"}.

{cpu}
{witnessed}"""
