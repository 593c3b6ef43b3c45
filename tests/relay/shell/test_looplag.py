"""The event-loop lag monitor: a blocked loop shows up in its summary, an idle one does not."""

from __future__ import annotations

import asyncio
import time

from relay.shell.observe.looplag import LoopLag


async def test_a_blocking_callback_shows_up_as_lag_and_an_idle_loop_does_not() -> None:
    seen: list[float] = []
    lag = LoopLag(interval=0.01, window=50, observe=seen.append)
    task = asyncio.create_task(lag.run())
    # Three samples, however long a starved machine takes to give them (100 ms is enough when it is idle).
    for _ in range(500):
        await asyncio.sleep(0.01)
        if lag.summary()["samples"] >= 3:
            break
    idle = lag.summary()
    time.sleep(0.2)  # a callback that holds the loop for 200 ms
    await asyncio.sleep(0.05)
    task.cancel()
    busy = lag.summary()
    assert idle["samples"] >= 3
    assert idle["p50_ms"] < 50
    assert busy["max_ms"] >= 150, busy
    assert max(seen) >= 0.15
    assert busy["samples"] == len(seen) <= 50


def test_the_summary_of_no_samples_is_zero_and_quantiles_are_nearest_rank() -> None:
    lag = LoopLag(window=100)
    assert lag.summary() == {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0, "samples": 0}
    lag.samples.extend(i / 1000 for i in range(1, 101))  # 1 … 100 ms
    assert lag.summary() == {"p50_ms": 50.0, "p99_ms": 99.0, "max_ms": 100.0, "samples": 100}
