"""Section 6 of the page, signing: the signed and the unsigned relay taking turns, summed up as medians of
the rounds' ratios (``paired_ratio``, which ``bench.studies.ab`` uses too)."""

from __future__ import annotations

import statistics
from typing import Any

from bench.report.common import n0, n1, table


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
    """CPU per acked roll (µs) over ``bench.sections.appends`` windows, medians: the server by part (event
    loop, other threads, child processes), the server in all, the rollers, both, and the cores they kept
    busy."""
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
