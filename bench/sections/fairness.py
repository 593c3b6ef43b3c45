"""Fair dice (spec/fairness.md): what the fair path costs, measured against the relay without it.

Two measurements, each with two real relay processes up at once and taking turns, the order reversed every
other round (``bench.tools.harness.turn_order``), so each pair of turns meets nearly the same machine:

- **Acked player rolls.** The same relay started with ``fair_dice`` on and off (``TABLERELAY_FAIR_DICE``),
  each with its own lean rollers (``bench.sections.appends``'s ``Rig``, as in the signing section), every
  roll a public player roll carrying a 16-byte roller seed on both sides, as the JS client sends it: the
  relay with fair dice off reads and ignores it, so both get the same frames. With fair dice on each roll's
  dice come from the room's open seed through its transcript's HMAC key (``relay.core.fairness``), its
  event carries the ``fair`` map, and every ``seed_rolls`` rolls (250) the seed is revealed and the next one
  committed and stored: all of that is in the on side's windows.
- **A GM's witnessed roll.** Two relays with fair dice on, each with a room of a GM and five players; on
  one the players said ``"witness": true`` in their hello and answer every ``pending`` event at once with
  16 random bytes, on the other they did not, so the GM's rolls there are unwitnessed (made at once, no
  ``pending``). Both rooms have the same sockets, so the same deliveries per roll; what differs is the
  witnesses' round trip and the pending event. The GM makes public rolls one at a time (the next when the
  previous one's event has arrived); the latency is from the roll frame leaving the GM's socket to its ack
  arriving there, which the relay sends only once the roll is made and stored.

The witnessed side's clients are Python ``websockets`` clients in this process, the GM and its players on
one event loop, the same code for both sides; nothing else runs in this process while they roll.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bench.sections import appends
from bench.sections.latency import percentile
from bench.tools import servers
from bench.tools.harness import BenchError, turn_order
from bench.tools.servers import Calibration
from relay.trust import tokens

FAIR_ON = {"TABLERELAY_FAIR_DICE": "true"}
FAIR_OFF = {"TABLERELAY_FAIR_DICE": "false"}
#: Seconds one GM roll may take before the run is called stalled (a witnessed roll waits 250 ms at most).
ROLL_TIMEOUT = 30.0


async def acked(
    run_dir: Path,
    calibration: Calibration,
    *,
    rooms: int,
    rollers_per_room: int,
    rounds: int,
    seconds: float,
    lead: float,
    warmup: float = 0.5,
) -> dict[str, Any]:
    """Acked public player rolls per second, fair dice on and off, taking turns: each side's windows in
    round order (``bench.sections.appends.paired``)."""
    paired = await appends.paired(
        run_dir,
        calibration,
        {"on": {"extra_env": FAIR_ON, "seed": True}, "off": {"extra_env": FAIR_OFF, "seed": True}},
        rooms=rooms,
        rollers_per_room=rollers_per_room,
        rounds=rounds,
        seconds=seconds,
        warmup=warmup,
        lead=lead,
    )
    for side, windows in paired.items():
        for w in windows:
            if w["errors"]:
                # A refused roll (a seed not yet stored: ``conflict``) would pass for a fast one: say so.
                raise BenchError(f"fair dice {side}: rolls refused in a window: {w['errors']}")
    return {
        "rooms": rooms,
        "rollers_per_room": rollers_per_room,
        "seconds": seconds,
        "lead": lead,
        **paired,
    }


async def _recv(ws: ClientConnection, timeout: float = ROLL_TIMEOUT) -> dict[str, Any]:
    frame: dict[str, Any] = msgpack.unpackb(await asyncio.wait_for(ws.recv(decode=False), timeout))
    return frame


class WitnessTable:
    """A fair relay with one room: a GM and ``players`` players, who answer witness requests or not."""

    def __init__(self, server: servers.Server, gm: ClientConnection, gm_id: str, witnessing: bool) -> None:
        self.server = server
        self.gm = gm
        self.gm_id = gm_id
        self.witnessing = witnessing
        self.players: list[ClientConnection] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.answers = 0  # witness frames sent
        self.serial = 0

    @classmethod
    async def open(
        cls,
        run_dir: Path,
        calibration: Calibration,
        *,
        players: int,
        witnessing: bool,
        witness_wait_ms: int | None = None,
    ) -> WitnessTable:
        env = dict(FAIR_ON)
        if witness_wait_ms is not None:
            env["TABLERELAY_WITNESS_WAIT_MS"] = str(witness_wait_ms)
        tag = "fair-witnessed" if witnessing else "fair-unwitnessed"
        server = await servers.start("relay", run_dir, calibration, tag, extra_env=env)
        table: WitnessTable | None = None
        try:
            (room,) = server.add_rooms(1)
            url = server.url(room)
            gm = await connect(url, compression=None, max_size=None)
            await gm.send(msgpack.packb({"t": "hello", "v": 1, "token": room.gm, "name": "GM"}))
            welcome = await _recv(gm)
            if welcome.get("t") != "welcome":
                raise BenchError(f"fair dice: the GM got {welcome} instead of a welcome")
            # The GM's socket is read only by ``roll``, which passes over the players' joins.
            table = cls(server, gm, str(welcome["you"]["id"]), witnessing)
            for i in range(players):
                # Players each of their own (``sub``): a roll asks each participant once.
                token = tokens.issue(server.secret, room.name, "player", sub=f"player{i}", name=f"Player {i}")
                ws = await connect(url, compression=None, max_size=None)
                hello = {"t": "hello", "v": 1, "token": token, "name": f"Player {i}", "witness": witnessing}
                await ws.send(msgpack.packb(hello))
                if (await _recv(ws)).get("t") != "welcome":
                    raise BenchError("fair dice: a player got no welcome")
                table.players.append(ws)
                table.tasks.append(asyncio.create_task(table._drain(ws, f"player{i}")))
        except BaseException:
            if table is not None:
                await table.close()
            else:
                await server.stop()
            raise
        return table

    async def _drain(self, ws: ClientConnection, me: str) -> None:
        """Read a player's socket for good (every event reaches it, witness or not); a witness answers each
        pending event that asks it, at once. Ends quietly when the socket closes."""
        with contextlib.suppress(ConnectionClosed):
            while True:
                frame = msgpack.unpackb(await ws.recv(decode=False))
                if frame.get("kind") != "pending" or me not in frame.get("asked", ()):
                    continue
                value = os.urandom(16)
                await ws.send(
                    msgpack.packb(
                        {"t": "witness", "id": f"w{frame['seq']}", "pending": frame["seq"], "value": value}
                    )
                )
                self.answers += 1

    async def roll(self) -> tuple[float, int, bool]:
        """One public GM roll: its intent → ack latency (ms), the witness values its event carries, and
        whether it named a pending event (was witnessed)."""
        self.serial += 1
        rid = f"g{self.serial}"
        frame = {
            "t": "roll",
            "id": rid,
            "intent": servers.INTENT,
            "visibility": "public",
            "label": servers.LABEL,
            "seed": os.urandom(16),
        }
        raw = msgpack.packb(frame)
        started = time.perf_counter()
        await self.gm.send(raw)
        latency = 0.0
        seq = None  # the roll event's, from its ack
        events: dict[int, dict[str, Any]] = {}  # by seq: the relay sends the ack first, but need not
        while seq is None or seq not in events:
            got = await _recv(self.gm)
            if got.get("t") == "error" and got.get("id") == rid:
                raise BenchError(f"fair dice: the GM's roll was refused: {got}")
            if got.get("t") == "ack" and got.get("id") == rid:
                latency = 1000 * (time.perf_counter() - started)
                seq = got["seq"]
            elif got.get("t") == "event":
                events[got["seq"]] = got
        event = events[seq]
        if event.get("kind") != "roll":
            raise BenchError(f"fair dice: the GM's ack names a {event.get('kind')} event")
        fair = event.get("fair") or {}
        return latency, len(fair.get("witnesses") or ()), fair.get("pending") is not None

    async def rolls(self, count: int) -> dict[str, Any]:
        samples: list[float] = []
        witnesses = witnessed = 0
        for _ in range(count):
            ms, values, pending = await self.roll()
            samples.append(ms)
            witnesses += values
            witnessed += pending
        return {"rolls": count, "samples_ms": samples, "witness_values": witnesses, "witnessed": witnessed}

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for ws in (self.gm, *self.players):
            with contextlib.suppress(Exception):
                await ws.close()
        await self.server.stop()


async def witnessed(
    run_dir: Path,
    calibration: Calibration,
    *,
    players: int,
    rolls: int,
    rounds: int,
    warmup: int = 20,
    witness_wait_ms: int | None = None,
) -> dict[str, Any]:
    """A GM's public rolls with ``players`` witnesses against the same rolls unwitnessed, taking turns:
    each side's p50 and p99 over all its rounds, and each round's."""
    tables: dict[str, WitnessTable] = {}
    try:
        for name, witnessing in (("witnessed", True), ("unwitnessed", False)):
            tables[name] = await WitnessTable.open(
                run_dir, calibration, players=players, witnessing=witnessing, witness_wait_ms=witness_wait_ms
            )
            await tables[name].rolls(warmup)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in tables}
        for i in range(rounds):
            for name in turn_order(list(tables), i):
                runs[name].append(await tables[name].rolls(rolls))
        answers = {name: table.answers for name, table in tables.items()}
    finally:
        await asyncio.gather(*(t.close() for t in tables.values()), return_exceptions=True)
    out: dict[str, Any] = {"players": players, "rolls_per_round": rolls, "rounds": rounds, "warmup": warmup}
    for name, done in runs.items():
        samples = [x for r in done for x in r["samples_ms"]]
        out[name] = {
            "rolls": len(samples),
            "p50_ms": percentile(samples, 50),
            "p99_ms": percentile(samples, 99),
            "max_ms": max(samples),
            "witness_values": sum(r["witness_values"] for r in done),
            "witnessed": sum(r["witnessed"] for r in done),
            "answers": answers[name],  # warm-up rolls' answers included
            "rounds": [
                {"p50_ms": percentile(r["samples_ms"], 50), "p99_ms": percentile(r["samples_ms"], 99)}
                for r in done
            ],
        }
    return out


async def measure(
    run_dir: Path,
    calibration: Calibration,
    *,
    shapes: tuple[tuple[int, int], ...],
    rounds: int,
    seconds: float,
    lead: float,
    players: int,
    latency_rolls: int,
    latency_rounds: int,
    witness_wait_ms: int | None = None,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The whole section: acked rolls on ÷ off for each ``(rooms, rollers per room)`` of ``shapes``, then the
    witnessed GM roll against the unwitnessed one; ``say`` prints each round's figures."""
    rolls = []
    for rooms, per_room in shapes:
        shape = await acked(
            run_dir,
            calibration,
            rooms=rooms,
            rollers_per_room=per_room,
            rounds=rounds,
            seconds=seconds,
            lead=lead,
        )
        for i, (on, off) in enumerate(zip(shape["on"], shape["off"], strict=True), 1):
            say(
                f"fair round {i:>2}: {rooms}×{per_room} on {on['rate']:>7,.0f}  off {off['rate']:>7,.0f}"
                f" acked rolls/s  ({on['rate'] / max(off['rate'], 1):.2f}×)"
            )
        rolls.append(shape)
    gm = await witnessed(
        run_dir,
        calibration,
        players=players,
        rolls=latency_rolls,
        rounds=latency_rounds,
        witness_wait_ms=witness_wait_ms,
    )
    for side in ("witnessed", "unwitnessed"):
        r = gm[side]
        say(
            f"GM roll {side:>11}: p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms"
            f"  ({r['rolls']} rolls, {r['witness_values']} witness values)"
        )
    return {"acked": rolls, "witnesses": gm}
