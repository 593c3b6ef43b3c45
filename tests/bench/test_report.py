"""The benchmark page's figures (bench.report): the signing section's ratios are the medians of paired
rounds, and the page says when each section it shows was measured."""

from __future__ import annotations

from typing import Any

from bench.report.common import GOAL_SIGNING
from bench.report.goals import _tables_p99, _why_not
from bench.report.page import latest_updates
from bench.report.signing import signing_pairs, signing_section


def window(rate: float, loop: float, child: float = 0.0, rollers_cores: float = 0.5) -> dict[str, Any]:
    by = {"event loop thread": loop, **({"child processes": child} if child else {})}
    server = loop + child
    return {
        "rate": rate,
        "cpu_us_per_roll": server,
        "cpu_us_per_roll_by": by,
        "server_cpu": server * rate / 1e6,
        "client_cpu": rollers_cores,
    }


def paired(on: list[float], off: list[float]) -> dict[str, Any]:
    return {
        "paired": {
            "seconds": 1.0,
            "on": [window(r, 300.0, 30.0) for r in on],
            "off": [window(r, 270.0) for r in off],
        },
        "fanout": [],
    }


def test_the_ratio_is_the_median_of_each_rounds_ratio_not_of_the_medians() -> None:
    # Rounds 0.5, 0.9, 1.0 (medians of the sides would give 2,700 / 3,000 = 0.90).
    data = paired([1_000, 2_700, 3_100], [2_000, 3_000, 3_100])
    pairs = signing_pairs(data)
    assert pairs is not None
    assert pairs["ratio"] == 0.9
    assert (pairs["low"], pairs["high"]) == (0.5, 1.0)
    assert pairs["on"] == 2_700
    assert pairs["off"] == 3_000


def test_the_cpu_split_has_the_loop_the_nonce_process_and_the_rollers_per_roll() -> None:
    pairs = signing_pairs(paired([2_000, 2_000], [2_500, 2_500]))
    assert pairs is not None
    assert pairs["cpu_on"]["event loop thread"] == 300.0
    assert pairs["cpu_on"]["child processes"] == 30.0
    assert "child processes" not in pairs["cpu_off"]
    assert round(pairs["cpu_on"]["rollers"]) == 250  # 0.5 cores over 2,000 rolls/s
    assert round(pairs["cpu_off"]["rollers"]) == 200


def test_the_section_states_the_goal_figure_and_the_method() -> None:
    text, goals = signing_section(paired([2_500, 2_800, 3_000, 2_000], [3_000, 3_000, 3_000, 3_000]))
    assert goals["signing_appends"] == (2_500 / 3_000 + 2_800 / 3_000) / 2
    assert goals["signing_appends"] < GOAL_SIGNING
    assert "| acked rolls/s, 100 rollers in one room | 2,650 | 3,000 | 0.88× |" in text
    assert "the order reversed every other round" in text
    assert "roll for 1 s while the other relay's wait, 4 rounds" in text
    assert "acked rolls: half of the rounds between" in text
    assert "all between 0.67× and 1.00×" in text
    assert "Fan-out was not measured in this run." in text


def burst(rate: float, server_cpu: float, events: int = 100, receivers: float = 0.3) -> dict[str, Any]:
    return {
        "rate": rate,
        "events": events,
        "received": 100_000,
        "elapsed": 100_000 / rate,
        "cpu": {"server": server_cpu, "receivers": receivers},
    }


def test_fan_out_ratios_are_the_rounds_medians_too() -> None:
    data = paired([3_000], [3_000])
    data["fanout_paired"] = {
        "on": {"bursts": [burst(400_000, 0.15), burst(100_000, 0.13)], "chains": [burst(50_000, 2.0, 25)]},
        "off": {"bursts": [burst(500_000, 0.12), burst(100_000, 0.14)], "chains": [burst(40_000, 1.8, 25)]},
    }
    text, goals = signing_section(data)
    assert goals["signing_fanout"] == (0.8 + 1.0) / 2
    assert goals["signing_chain"] == 1.25
    assert "| fan-out at N = 1,000, bursts (deliveries/s) | 250,000 | 300,000 | 0.90× |" in text
    assert "| per delivery, bursts | 1.40 | 1.30 |" in text  # µs: 0.14 s over 100,000 deliveries
    assert "bursts: the rounds 0.80× and 1.00×" in text
    assert "gets a burst (100 rolls), then one roll at a time (25 rolls), in turns, 2 rounds" in text


def signed_against(on: dict[str, Any]) -> dict[str, Any]:
    """Four rounds of the signed window ``on`` against an unsigned one of 2,000 rolls/s, 270 µs on the loop
    and 250 µs in the rollers per roll."""
    return {"paired": {"seconds": 1.0, "on": [on] * 4, "off": [window(2_000, 270.0)] * 4}}


def why_not_signing(data: dict[str, Any]) -> list[str]:
    _, goals = signing_section(data)
    return _why_not(goals, {"sections": {"signing": data}})


def test_acked_rolls_below_the_goal_by_more_than_the_noise_are_called_below_the_contracts_floor() -> None:
    # Unsigned: 270 µs on the loop and 250 in the rollers per roll (0.5 cores at 2,000/s); signed: 30 µs
    # of nonces more, and the rollers 0.55 cores at 1,700/s (324 µs), 74 more: the floor is 520 ÷ 624.
    (bullet,) = why_not_signing(signed_against(window(1_700, 300.0, 30.0, rollers_cores=0.55)))
    assert bullet.startswith("- Acked rolls, signing on ÷ off: 0.85×")
    assert "would sit at 0.83× with this run's figures" in bullet
    assert "So the goal is below the floor of the contract" in bullet


def test_acked_rolls_whose_floor_is_within_the_noise_of_the_goal_are_called_at_it() -> None:
    (bullet,) = why_not_signing(signed_against(window(1_750, 290.0, 20.0, rollers_cores=0.51)))
    assert "would sit at 0.89× with this run's figures" in bullet
    assert "the noise between runs decides which side of it a run reads" in bullet


def test_fan_out_bursts_under_the_goal_say_what_each_side_spent_per_delivery() -> None:
    data: dict[str, Any] = {
        "fanout_paired": {
            "on": {"bursts": [burst(800_000, 0.02, 120, receivers=0.11)] * 3, "chains": []},
            "off": {"bursts": [burst(1_000_000, 0.015, 120, receivers=0.1)] * 3, "chains": []},
        }
    }
    (bullet,) = why_not_signing(data)
    assert bullet.startswith(
        "- Fan-out bursts at N = 1,000, signing on ÷ off: 0.80×. A burst lasted about 112 ms;"
    )
    assert "the server spent 0.20 against 0.15 µs of CPU" in bullet
    assert "the two receiver processes 1.10 against 1.00 µs" in bullet
    assert "89 bytes more" in bullet


def test_a_run_without_paired_windows_reports_none_and_no_goal() -> None:
    assert signing_pairs({"fanout": []}) is None
    assert signing_pairs({"paired": {"on": [window(1, 1.0)], "off": []}}) is None
    text, goals = signing_section({"fanout": []})
    assert "signing_appends" not in goals
    assert "Acked rolls were not measured in this run." in text


def test_the_page_names_each_section_measured_again_under_its_latest_run_only() -> None:
    updates = [
        {"sections": ["signing"], "started": "1"},
        {"sections": ["dice", "fanout", "signing"], "started": "2"},
        {"sections": ["signing"], "started": "3"},
    ]
    assert latest_updates(updates) == [
        {"sections": ["dice", "fanout"], "started": "2"},
        {"sections": ["signing"], "started": "3"},
    ]
    assert latest_updates([]) == []


def test_the_many_tables_p99_shows_each_run_of_both_servers() -> None:
    def row(p50: float, p99s: list[float], cpu: float) -> dict[str, Any]:
        runs = [{"p99_ms": p} for p in p99s]
        return {"rolls": 6000, "runs": runs, "p50_ms": p50, "server_cpu_us_per_roll": cpu}

    text = _tables_p99(1.73, row(6.7, [16.4, 24.5, 46.0], 200.0), row(4.3, [9.6, 23.8, 10.7], 80.0))
    assert text.startswith(
        "- Many tables, p99: 1.73×. Each run's p99, the relay's against bare's (taking turns):"
    )
    assert "16.4 against 9.6 ms, 24.5 against 23.8 ms, 46.0 against 10.7 ms." in text
    assert "each costs the relay 2.5 times what it costs the bare server" in text
    assert "the slowest 180 of 18,000 rolls" in text
