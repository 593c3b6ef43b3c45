"""A token bucket per connection: ``rate`` frames per second on average, bursts up to ``burst``.

Refused frames fill a second, leaky "abuse" score that drains at ``rate`` per second; a client that
keeps sending far past its allowance (score above ``ABUSE_FACTOR × burst``) is closed, while one that
overshoots a burst and then backs off is only answered with ``rate_limited``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

ABUSE_FACTOR = 10


class TokenBucket:
    __slots__ = ("abuse", "burst", "clock", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.abuse = 0.0
        self.clock = clock
        self.stamp = clock()

    def allow(self) -> bool:
        now = self.clock()
        elapsed = max(0.0, now - self.stamp)
        self.stamp = now
        self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
        self.abuse = max(0.0, self.abuse - elapsed * self.rate)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        self.abuse += 1.0
        return False

    @property
    def abusive(self) -> bool:
        return self.abuse > ABUSE_FACTOR * max(self.burst, 1.0)
