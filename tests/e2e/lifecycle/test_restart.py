"""Rolling restarts: SIGTERM drains (no new connections, sockets closed with 1001 and a reason, every
acknowledged event stored, exit 0 within the bound), and clients rolling through two restarts lose nothing."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from websockets.exceptions import ConnectionClosed, InvalidHandshake

from tests.e2e.servers import Server
from tests.e2e.wire import Client, assert_sentence

POWER = {"system": "drawsteel.power", "characteristic": 2}
DRAIN_BOUND = 20.0  # seconds: limits.drain_timeout's default
ACKS_PER_LEG = 40  # acks between restarts


@dataclass
class Roller:
    """A client that rolls one roll at a time, reconnecting and resuming across restarts."""

    label: str
    token: str
    acks: dict[str, int] = field(default_factory=dict)  # roll id -> acked seq
    seen: list[int] = field(default_factory=list)  # seqs of every event received, live or in a welcome
    closes: list[tuple[int | None, str]] = field(default_factory=list)
    epoch: str | None = None
    seq: int = 0
    client: Client | None = None
    me: str = ""

    def take(self, client: Client, since: int) -> None:
        """Record the events ``client`` received from frame ``since`` on."""
        for f in client.frames[since:]:
            if isinstance(f, dict) and f.get("t") == "event":
                self.seen.append(f["seq"])
                self.seq = max(self.seq, f["seq"])


async def connect(roller: Roller, url: Callable[[], str], deadline: float) -> Client:
    while True:
        resume = {"epoch": roller.epoch, "seq": roller.seq} if roller.epoch else None
        try:
            client = await Client.join(url(), roller.token, roller.label, resume=resume)
        except (OSError, InvalidHandshake, ConnectionClosed, AssertionError):
            assert time.monotonic() < deadline, f"{roller.label} could not reconnect"
            await asyncio.sleep(0.05)  # the server is between lives
            continue
        welcome = client.welcome
        if roller.epoch is not None:
            assert welcome["epoch"] == roller.epoch, "a restart is not a new epoch"
            assert welcome["recovered"] is True, welcome
        roller.epoch, roller.token, roller.me = welcome["epoch"], welcome["session"], welcome["you"]["id"]
        roller.seen.extend(ev["seq"] for ev in welcome["history"])
        roller.seq = welcome["seq"]
        # Events that came right behind the welcome (in the same read, even) are already in the frames.
        roller.take(client, next(i for i, f in enumerate(client.frames) if f is welcome) + 1)
        return client


async def roll_until(roller: Roller, url: Callable[[], str], done: asyncio.Event) -> None:
    deadline = time.monotonic() + 120
    client = await connect(roller, url, deadline)
    rid: str | None = None
    n = 0
    while not done.is_set():
        if rid is None:
            n += 1
            rid = f"{roller.label}-{n}-{secrets.token_hex(3)}"
        mark = len(client.frames)
        frame = {"t": "roll", "id": rid, "intent": POWER, "visibility": "public", "label": rid}
        try:
            await client.send(frame)
            reply = await client.answer(rid, timeout=10)
        except (ConnectionClosed, AssertionError):
            reply = None
        roller.take(client, mark)
        if reply is not None:
            assert reply["t"] == "ack", reply
            first = roller.acks.setdefault(rid, reply["seq"])
            assert first == reply["seq"], f"a retried roll got a second seq: {first} then {reply['seq']}"
            rid = None
            continue
        # The socket closed before the answer: note how, reconnect, resume, send the same roll again.
        code, reason = await client.wait_closed(15)
        roller.closes.append((code, reason))
        client = await connect(roller, url, deadline)
    mark = len(client.frames)
    await asyncio.sleep(0.3)
    roller.take(client, mark)
    await client.close()


async def test_rolling_restarts_under_load_lose_no_acknowledged_event(
    server_factory: Callable[..., Server],
) -> None:
    secret = secrets.token_hex(24)
    rates = {"TABLERELAY_RATE": "1000", "TABLERELAY_BURST": "1000"}
    srv = server_factory(secret=secret, **rates)
    data = srv.data
    room = await srv.acreate_room("Rolling")
    current = [srv]
    rollers = [Roller("gm", room.gm)] + [Roller(f"p{i}", room.player) for i in range(3)]
    done = asyncio.Event()
    tasks = [asyncio.create_task(roll_until(r, lambda: current[0].url, done)) for r in rollers]

    def acked() -> int:
        return sum(len(r.acks) for r in rollers)

    async def acks_reach(n: int) -> None:
        deadline = time.monotonic() + 60
        while acked() < n:
            assert time.monotonic() < deadline, "the rollers stalled"
            for task in tasks:
                if task.done():
                    task.result()  # a failed roller fails the test with its own message
            await asyncio.sleep(0.02)

    for _leg in (1, 2):
        # Counted from now, not from the start: rollers outpacing the poll must not leave a server that
        # nobody reached yet to be stopped.
        await acks_reach(acked() + ACKS_PER_LEG)
        old = current[0]
        started = time.monotonic()
        code = await asyncio.to_thread(old.stop, signal.SIGTERM, DRAIN_BOUND + 10)
        took = time.monotonic() - started
        assert code == 0, "SIGTERM drains and exits 0:\n" + old.log_text()[-3000:]
        assert took < DRAIN_BOUND, f"the drain took {took:.1f} s"
        with contextlib.suppress(OSError), socket.create_connection((old.host, old.port), 1):
            raise AssertionError("the stopped server's port still accepts connections")
        current[0] = server_factory(data, secret=secret, **rates)
    await acks_reach(acked() + ACKS_PER_LEG)
    done.set()
    await asyncio.gather(*tasks)

    # Every close the rollers saw was the drain's: 1001 with a sentence saying why.
    closes = [c for r in rollers for c in r.closes]
    assert len(closes) >= 2 * len(rollers), "both restarts closed every roller's socket"
    for close_code, reason in closes:
        assert close_code == 1001, closes
        assert_sentence(reason)

    # The log after two restarts, read by a GM resuming from the start: dense, every ack in it.
    audit = {"epoch": rollers[0].epoch, "seq": 0}
    gm = await Client.join(current[0].url, rollers[0].token, "audit", resume=audit)
    try:
        history = gm.welcome["history"]
        seqs = [ev["seq"] for ev in history]
        assert seqs == list(range(1, gm.welcome["seq"] + 1)), "seqs are dense across restarts"
        by_seq = {ev["seq"]: ev for ev in history}
        for r in rollers:
            for rid, seq in r.acks.items():
                event = by_seq.get(seq)
                assert event is not None, f"{r.label}'s ack for {rid} names seq {seq}, which is not stored"
                assert event["kind"] == "roll", (rid, event)
                assert event["label"] == rid, (rid, event)
                assert event["actor"]["id"] == r.me, (rid, event)
        labels = [ev["label"] for ev in history if ev["kind"] == "roll"]
        assert len(labels) == len(set(labels)), "no roll was stored twice"
        # Each roller saw every event from its first welcome on, once per socket, with no gap.
        for r in rollers:
            got = sorted(set(r.seen))
            assert got == list(range(got[0], got[-1] + 1)), f"{r.label} missed events across a restart"
    finally:
        await gm.close()
    assert current[0].running, "the last server is still serving"
