"""One soak client: a GM, player or spectator that rolls, reveals, changes resources, reconnects with resume,
stops reading for a while, and sends malformed frames, checking every frame it gets against the protocol.

What it counts goes into a shared ``Tally``; anything the protocol does not allow is an error with a short
reason (a gap or duplicate seq, a hidden field outside the audience, an unexpected error code, an ack that
never came, an unexpected close). Every loop here is bounded by the run's deadline.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import msgpack
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

ACTION_MEAN = 6.0  # seconds between a roller's requests, on average (a busy table)
RECONNECT_MEAN = 150.0  # seconds between a client's deliberate reconnects, on average
SLOW_CHANCE = 0.02  # chance per action that a client stops reading instead
SLOW_SECONDS = (5.0, 15.0)  # how long it stops (under the server's 20 s ping interval plus timeout)
MALFORMED_CHANCE = 0.04  # chance per action of a malformed frame instead of a request
OVERSIZE_CHANCE = 0.004  # chance per action of a frame over the 64 KiB limit (the server closes with 1009)
ACK_TIMEOUT = 30.0  # seconds a request may wait for its answer
HIDDEN_FIELDS = ("label", "intent", "result", "foundry", "roll20", "nonce", "blob")
VISIBILITIES = ["public"] * 11 + ["gm"] * 4 + ["blind"] * 2 + ["self"] * 3
# Codes a request of each kind may get back without anything being wrong.
EXPECTED_CODES = {
    "roll": {"insufficient"},
    "resource": {"insufficient"},
    "reveal": set(),
    "junk": {"bad_frame"},
}
# Closes that are the server doing its job: a slow consumer (4008), an oversize frame (1009), a slow
# consumer's missed pings (1011 keepalive), and shutdown (1001).
EXPECTED_CLOSES = {4008, 1009, 1011, 1001}


@dataclass
class Tally:
    """Counters shared by all clients (one event loop, so plain ints are safe)."""

    counts: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)  # the first few error details
    acks: list[tuple[str, int, str, str, str]] = field(default_factory=list)  # room, seq, kind, id, actor
    room_seq: dict[str, int] = field(default_factory=dict)  # room -> the highest seq a client received

    def error(self, reason: str, detail: str) -> None:
        self.errors[reason] += 1
        if len(self.samples) < 20:
            self.samples.append(f"{reason}: {detail}"[:300])


def pack(frame: Any) -> bytes:
    data: bytes = msgpack.packb(frame, use_bin_type=True)
    return data


@dataclass
class Outstanding:
    frame: dict[str, Any]
    kind: str
    sent: float


class Client:
    def __init__(
        self, name: str, url: str, room: str, role: str, token: str, tally: Tally, rng: random.Random
    ) -> None:
        self.name = name
        self.url = url
        self.room = room
        self.role = role
        self.token = token  # an invite until the first welcome, then the session token (same participant)
        self.tally = tally
        self.rng = rng
        self.me = ""
        self.epoch: str | None = None
        self.seq = 0
        self.sealed: list[int] = []  # sealed rolls seen, for a GM to reveal
        self.outstanding: Outstanding | None = None
        self.paused = False  # whether this socket stopped reading at some point
        self.ids = itertools.count(1)

    # -- the run ---------------------------------------------------------------------------------------

    async def run(self, start_at: float, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, start_at - loop.time()))
        failures = 0
        while loop.time() < deadline and failures < 20:
            try:
                async with connect(
                    self.url, open_timeout=20, close_timeout=5, ping_interval=None, compression=None
                ) as ws:
                    failures = 0
                    await self._session(ws, deadline)
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else None
                if code in EXPECTED_CLOSES:
                    self.tally.counts[f"closed {code}"] += 1
                elif code is None and self.paused:
                    # The server gave up on a consumer that stopped reading, before its close got through.
                    self.tally.counts["dropped after a pause"] += 1
                else:
                    self.tally.error("unexpected close", f"{self.name}: {code} {exc}")
            except (OSError, InvalidHandshake, InvalidStatus, TimeoutError) as exc:
                failures += 1
                self.tally.error("connect failed", f"{self.name}: {type(exc).__name__}: {exc}")
                await asyncio.sleep(1.0)
            if loop.time() < deadline:
                self.tally.counts["reconnects"] += 1
                await asyncio.sleep(self.rng.uniform(0.05, 0.5))

    async def _session(self, ws: ClientConnection, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        self.paused = False
        await self._hello(ws)
        if self.outstanding is not None:
            # The socket closed before the answer came. A roll is retried with its id and must be acked
            # with the seq it got the first time (or stored now); other requests are given up.
            pending, self.outstanding = self.outstanding, None
            if pending.kind == "roll":
                self.tally.counts["rolls retried after reconnect"] += 1
                await self._request(ws, pending.frame, "roll")
        leave_at = min(deadline, loop.time() + self.rng.expovariate(1 / RECONNECT_MEAN))
        act_at = loop.time() + self.rng.expovariate(1 / ACTION_MEAN)
        while True:
            now = loop.time()
            if now >= leave_at:
                return  # leaving the ``async with`` closes with 1000; run() reconnects with resume
            self._give_up_after(now, ACK_TIMEOUT)
            if now >= act_at and self.outstanding is None and self.role != "spectator":
                act_at = now + self.rng.expovariate(1 / ACTION_MEAN)
                if self.rng.random() < SLOW_CHANCE:
                    self.tally.counts["slow pauses"] += 1
                    self.paused = True
                    await asyncio.sleep(min(self.rng.uniform(*SLOW_SECONDS), max(0.0, leave_at - now)))
                    continue
                await self._act(ws)
            wait = max(0.01, min(leave_at, act_at) - loop.time())
            try:
                message = await asyncio.wait_for(ws.recv(), timeout=wait)
            except TimeoutError:
                continue
            self._received(message)

    def _give_up_after(self, now: float, timeout: float) -> None:
        """An answer that has not come within ``timeout`` seconds is an error; stop waiting for it."""
        pending = self.outstanding
        if pending is not None and now - pending.sent > timeout:
            self.tally.error("no answer", f"{self.name}: {pending.frame}")
            self.outstanding = None

    async def _hello(self, ws: ClientConnection) -> None:
        hello: dict[str, Any] = {"t": "hello", "v": 1, "token": self.token}
        if self.epoch is not None:
            hello["resume"] = {"epoch": self.epoch, "seq": self.seq}
        await ws.send(pack(hello))
        first = await asyncio.wait_for(ws.recv(), timeout=30)
        welcome = msgpack.unpackb(first.encode() if isinstance(first, str) else first, raw=False)
        if welcome.get("t") != "welcome":
            raise ConnectionError(f"expected a welcome, got {welcome!r:.200}")
        self.me = welcome["you"]["id"]
        self.token = welcome["session"]
        history = welcome["history"]
        resumed = self.epoch is not None
        if resumed and welcome["epoch"] == self.epoch and welcome["recovered"]:
            self.tally.counts["resumes recovered"] += 1
            for event in history:
                self._event(event)
        else:
            if resumed:
                self.tally.counts["resumes not recovered"] += 1
            for event in history:
                self._check_hidden(event)
        self.epoch = welcome["epoch"]
        if welcome["seq"] != self.seq and resumed and welcome["recovered"]:
            self.tally.error("resume gap", f"{self.name}: at {self.seq} after a welcome at {welcome['seq']}")
        self.seq = welcome["seq"]

    # -- requests --------------------------------------------------------------------------------------

    async def _act(self, ws: ClientConnection) -> None:
        draw = self.rng.random()
        if draw < OVERSIZE_CHANCE:
            self.tally.counts["oversize frames"] += 1
            await ws.send(b"\x81" + b"x" * (70 * 1024))
            return
        if draw < OVERSIZE_CHANCE + MALFORMED_CHANCE:
            await self._malformed(ws)
            return
        rid = f"{self.name}-{next(self.ids)}"
        if self.role == "gm" and self.sealed and draw < 0.25:
            seq = self.sealed.pop(self.rng.randrange(len(self.sealed)))
            await self._request(ws, {"t": "reveal", "id": rid, "seq": seq}, "reveal")
        elif draw < 0.35:
            await self._request(ws, self._resource(rid), "resource")
        else:
            await self._request(ws, self._roll(rid), "roll")

    def _roll(self, rid: str) -> dict[str, Any]:
        rng = self.rng
        formula = f"{rng.randint(1, 6)}d6kh{rng.randint(1, 3)} + {rng.randint(0, 5)}"
        # Spending Hope on an Experience: refused with ``insufficient`` while the roller has none.
        spend = {"experience": 2, "spend_hope": True} if rng.random() < 0.2 else {}
        intent = rng.choice(
            [
                {"system": "dice", "formula": formula},
                {"system": "drawsteel.power", "characteristic": rng.randint(-1, 3), "edges": 1},
                {"system": "daggerheart.duality", "modifier": 1, **spend},
                {"system": "honors_edge.roll", "pool": "4k2", "tn": 15},
            ]
        )
        visibility = rng.choice(VISIBILITIES)
        return {"t": "roll", "id": rid, "intent": intent, "visibility": visibility, "label": f"soak {rid}"}

    def _resource(self, rid: str) -> dict[str, Any]:
        if self.role == "gm":
            return {
                "t": "resource",
                "id": rid,
                "name": "fear",
                "op": self.rng.choice(["gain", "spend"]),
                "n": 1,
            }
        return {"t": "resource", "id": rid, "name": "hope", "op": "spend", "n": 1}

    async def _malformed(self, ws: ClientConnection) -> None:
        self.tally.counts["malformed frames"] += 1
        rid = f"{self.name}-{next(self.ids)}"
        with_id: list[dict[str, Any]] = [
            {"t": "roll", "id": rid, "intent": "4d6", "visibility": "public"},
            {"t": "resource", "id": rid, "name": "gold", "op": "gain", "n": 1},
            {"t": "reveal", "id": rid, "seq": -4},
            {"t": "dance", "id": rid},
        ]
        choice = self.rng.randrange(len(with_id) + 2)
        if choice < len(with_id):
            # The answer names the id: it is waited for like any request's.
            self.outstanding = Outstanding(with_id[choice], "junk", asyncio.get_running_loop().time())
            await ws.send(pack(with_id[choice]))
        elif choice == len(with_id):
            await ws.send(pack([1, 2, 3]))
        else:
            await ws.send(bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(1, 40))))

    async def _request(self, ws: ClientConnection, frame: dict[str, Any], kind: str) -> None:
        self.outstanding = Outstanding(frame, kind, asyncio.get_running_loop().time())
        await ws.send(pack(frame))

    # -- what comes back --------------------------------------------------------------------------------

    def _received(self, message: str | bytes) -> None:
        if isinstance(message, str):
            self.tally.error("text frame", f"{self.name}: {message[:100]}")
            return
        frame = msgpack.unpackb(message, raw=False)
        kind = frame.get("t")
        if kind == "event":
            self._event(frame)
        elif kind in ("ack", "error"):
            self._answer(frame)
        elif kind != "pong":
            self.tally.error("unexpected frame", f"{self.name}: {kind!r}")

    def _event(self, event: dict[str, Any]) -> None:
        seq = event["seq"]
        if seq != self.seq + 1:
            self.tally.error("gap or duplicate", f"{self.name}: event {seq} after {self.seq}")
        self.seq = max(self.seq, seq)
        if seq > self.tally.room_seq.get(self.room, 0):
            self.tally.room_seq[self.room] = seq
        self.tally.counts["events received"] += 1
        self._check_hidden(event)
        if event["kind"] == "roll" and event.get("sealed"):
            self.sealed.append(seq)
            del self.sealed[:-50]

    def _check_hidden(self, event: dict[str, Any]) -> None:
        if event["kind"] != "roll" or event["visibility"] == "public":
            return
        visibility, roller = event["visibility"], event["actor"]["id"]
        audience = {
            "gm": self.role == "gm" or self.me == roller,
            "blind": self.role == "gm",
            "self": self.me == roller,
        }[visibility]
        if event.get("sealed"):
            leaked = [k for k in HIDDEN_FIELDS if k in event]
            if leaked:
                self.tally.error("hidden field", f"{self.name}: sealed seq {event['seq']} carries {leaked}")
        elif not audience and "revealed" not in event:
            self.tally.error("hidden field", f"{self.name}: seq {event['seq']} ({visibility}) arrived open")

    def _answer(self, frame: dict[str, Any]) -> None:
        pending = self.outstanding
        if pending is None or frame.get("id") != pending.frame.get("id"):
            if frame.get("t") == "error" and frame.get("code") == "bad_frame":
                self.tally.counts["malformed answered"] += 1  # junk with no readable id
                return
            self.tally.error("unexpected answer", f"{self.name}: {frame!r:.200}")
            return
        self.outstanding = None
        if frame["t"] == "error":
            code = frame.get("code")
            if code in EXPECTED_CODES[pending.kind]:
                self.tally.counts[f"{pending.kind} refused ({code})"] += 1
            else:
                self.tally.error(f"error {code}", f"{self.name}: {pending.frame!r:.150} -> {frame!r:.150}")
            return
        if pending.kind == "junk":
            self.tally.error("junk acked", f"{self.name}: {frame!r:.200}")
            return
        self.tally.counts["acks"] += 1
        self.tally.counts[f"acks ({pending.kind})"] += 1
        self.tally.acks.append((self.room, int(frame["seq"]), pending.kind, str(frame["id"]), self.me))
