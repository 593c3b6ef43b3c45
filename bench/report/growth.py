"""Section 5 of the page, growth: fan-out as one room grows and as members split into more rooms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report.common import COLORS, LABELS, find, n0, pyplot, ratio, table


def plot_growth(data: dict[str, Any], path: Path) -> None:
    plt = pyplot()
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
        ys = [(find(data["rooms"], kind=kind, rooms=a, per_room=b) or {}).get("rate", 0) for a, b in shapes]
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
                f"{n:,}", find(members, kind="relay", per_room=n), find(members, kind="bare", per_room=n)
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
                find(data["rooms"], kind="relay", rooms=a, per_room=b),
                find(data["rooms"], kind="bare", rooms=a, per_room=b),
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
