"""Event-loop lag: how late a timer due every ``interval`` seconds fires, measured inside the server.

Everything the relay does runs on one event loop, so a callback that runs long (a huge fan-out, a slow
render, a garbage collection) delays every socket at once; this is the number that shows it. The last
``window`` samples (a minute at the default interval) give /healthz its p50, p99 and max, and each sample
also goes to the Prometheus histogram for longer views.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable

INTERVAL = 0.1  # seconds between samples: 10 a second costs nothing measurable
WINDOW = 600  # samples kept for /healthz: the last minute


class LoopLag:
    def __init__(
        self,
        interval: float = INTERVAL,
        window: int = WINDOW,
        observe: Callable[[float], None] | None = None,
    ) -> None:
        self.interval = interval
        self.samples: deque[float] = deque(maxlen=window)
        self._observe = observe

    async def run(self) -> None:
        """Sample until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.interval
            await asyncio.sleep(self.interval)
            lag = max(0.0, loop.time() - due)
            self.samples.append(lag)
            if self._observe is not None:
                self._observe(lag)

    def summary(self) -> dict[str, float | int]:
        """The recent window in milliseconds: ``p50``, ``p99``, ``max`` and how many samples it holds."""
        ordered = sorted(self.samples)
        if not ordered:
            return {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0, "samples": 0}

        def quantile(q: float) -> float:
            # Nearest rank: the smallest sample with at least q of the samples at or below it.
            return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)] * 1000, 3)

        return {
            "p50_ms": quantile(0.50),
            "p99_ms": quantile(0.99),
            "max_ms": round(ordered[-1] * 1000, 3),
            "samples": len(ordered),
        }
