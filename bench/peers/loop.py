"""The event loop a peer server runs on: the relay's own default (uvloop), so a ratio compares servers,
not loops. ``BENCH_PEER_LOOP=asyncio`` runs a peer on asyncio's loop instead (what the peer's library does
out of the box), to show what the loop alone is worth."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any


def run_on_peer_loop(main: Coroutine[Any, Any, None]) -> None:
    factory = None
    if os.environ.get("BENCH_PEER_LOOP", "uvloop") == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main)
