"""What every part of the benchmark page shares: the issue's goals, number formats, Markdown tables, the
servers' labels and colours, matplotlib, and the profiles' tables."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bench.tools.profile import TOP

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
# Issue 36, fair dice: acked public player rolls with fair dice on ÷ off, in the same run.
GOAL_FAIR = 0.95


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


def find(rows: Iterable[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), None)


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {"figure.dpi": 110, "font.size": 9, "axes.spines.top": False, "axes.spines.right": False}
    )
    return plt


def profile_block(profile: dict[str, Any] | None, what: str) -> str:
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


def layer_share(profile: dict[str, Any] | None, prefix: str) -> float | None:
    if not profile or not profile.get("layers"):
        return None
    total: float = sum(share for name, share in profile["layers"] if name.startswith(prefix))
    return total
