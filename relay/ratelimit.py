"""A token bucket per connection: ``rate`` frames per second on average, bursts up to ``burst``."""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.clock = clock
        self.stamp = clock()
        self.refused = 0  # frames refused since the last one allowed

    def allow(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            self.refused = 0
            return True
        self.refused += 1
        return False

    @property
    def abusive(self) -> bool:
        """Still sending after a whole bucket's worth of refusals: the client is not backing off."""
        return self.refused > max(10.0, self.burst)
