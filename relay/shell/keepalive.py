"""Keepalive pings for every socket from one timer, instead of a task per socket.

websockets' own keepalive gives each connection a task that sleeps ``ping_interval``, pings, and waits for
the pong under a timeout: every ping wakes that task twice and builds a timeout context, about 200 µs of
the event loop here, so ten thousand mostly idle sockets (a hosted relay's usual crowd) cost a tenth of a
core in pings alone, and each idle socket holds the task's frame. Here one timer walks two queues in time
order: sockets whose next ping is due, and pings whose pong is due. The pings themselves are websockets'
own (``ping()``, which settles its future when the pong arrives), so only the scheduling is ours.

Same behaviour as websockets' keepalive: a ping every ``interval`` seconds per socket, and a socket whose
pong has not come ``timeout`` seconds after its ping is closed with 1011 "keepalive ping timeout". A socket
whose writes are still queued in its transport is not pinged in that round (a ping would wait for them to
drain, as websockets' own would); it is tried again a round later.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import weakref
from collections import deque

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

#: How often the timer runs: the pings due meanwhile go out together, a few at a time rather than a
#: second's worth in one long loop iteration.
TICK = 0.2


class Keepalive:
    """Pings ``add``-ed sockets every ``interval`` seconds and closes those whose pong is late."""

    def __init__(self, interval: float, timeout: float) -> None:
        self.interval = interval
        self.timeout = timeout
        # (when its next ping is due, a tie-breaker, the socket): a heap, since a socket comes back after
        # a pong check at another offset than a new one. The socket is held weakly: a closed one is
        # freed when its handler ends, not an interval later when its turn comes up here.
        self._pings: list[tuple[float, int, weakref.ref[ServerConnection]]] = []
        # (when the pong is due, socket, the ping's future): in order, since every ping waits as long.
        self._pongs: deque[tuple[float, ServerConnection, asyncio.Future[float]]] = deque()
        self._order = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self.sent = 0
        self.timed_out = 0

    def add(self, ws: ServerConnection) -> None:
        loop = asyncio.get_running_loop()
        self._due(loop.time() + self.interval, ws)
        if self._task is None:
            self._task = loop.create_task(self._run())

    def _due(self, when: float, ws: ServerConnection) -> None:
        heapq.heappush(self._pings, (when, next(self._order), weakref.ref(ws)))

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(TICK)
            now = loop.time()
            self._check_pongs(now)
            await self._send_pings(now)

    async def _send_pings(self, now: float) -> None:
        pings = self._pings
        while pings and pings[0][0] <= now:
            _, _, held = heapq.heappop(pings)
            ws = held()
            if ws is None or ws.protocol.state is not State.OPEN:
                continue  # closed: forgotten here
            transport = ws.transport
            if transport.get_write_buffer_size() or transport.is_closing():
                self._due(now + TICK, ws)  # still writing: ``ping()`` would wait for the drain
                continue
            try:
                # Returns without waiting: the socket is open and nothing is queued in its transport, so
                # the ping is written at once and there is nothing to drain.
                pong = asyncio.ensure_future(await ws.ping())  # it is a future already
            except ConnectionClosed:
                continue
            self.sent += 1
            self._pongs.append((now + self.timeout, ws, pong))

    def _check_pongs(self, now: float) -> None:
        pongs = self._pongs
        while pongs and pongs[0][0] <= now:
            _, ws, pong = pongs.popleft()
            if pong.done():
                if not pong.cancelled() and pong.exception() is not None:
                    continue  # the socket closed meanwhile (the exception taken: nothing logs it later)
                self._due(now + max(0.0, self.interval - self.timeout), ws)
                continue
            pong.cancel()
            if ws.protocol.state is State.OPEN:
                self.timed_out += 1
                closing = asyncio.get_running_loop().create_task(ws.close(1011, "keepalive ping timeout"))
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)
