"""Fan-out without sockets: shared encodings, coalesced writes, the welcome floor, slow sockets."""

from __future__ import annotations

import asyncio
from typing import Any

import msgpack

from relay.core import protocol
from relay.core.actions import Session
from relay.core.state import Member, RoomState, fold
from relay.core.visibility import body_of, seal
from relay.shell.fanout import Outbox, broadcast, serve_first
from tests.relay.helpers import forms


class Sink:
    """A socket that takes writes while ``open_`` and keeps them; ``writable`` waits for ``drained``."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.open_ = True
        self.drained = asyncio.Event()
        self.drained.set()

    def ready(self) -> bool:
        return self.open_

    def write(self, chunks: list[bytes]) -> None:
        self.writes.append(b"".join(chunks))

    async def writable(self) -> bool:
        await self.drained.wait()
        return True

    def frames(self) -> list[dict[str, Any]]:
        """Split what was written back into WebSocket frames and decode them."""
        data = b"".join(self.writes)
        out = []
        while data:
            assert data[0] == 0x82, "binary, final, unmasked"
            n, at = data[1], 2
            if n == 126:
                n, at = int.from_bytes(data[2:4], "big"), 4
            elif n == 127:
                n, at = int.from_bytes(data[2:10], "big"), 10
            out.append(msgpack.unpackb(data[at : at + n], raw=False))
            data = data[at + n :]
        return out


class Sub:
    def __init__(self, limit: int = 100) -> None:
        self.outbox = Outbox(limit)


def member(pid: str, role: str) -> Member:
    return Member(pid, pid.upper(), role)


def rec(seq: int, kind: str = "join", **fields: Any) -> dict[str, Any]:
    base = {
        "seq": seq,
        "epoch": "e",
        "ts": seq,
        "kind": kind,
        "actor": member("p1", "player").wire(),
        "visibility": "public",
    }
    if kind == "join":
        base["member"] = member(f"m{seq}", "player").wire()
    base.update(fields)
    return base


def roll(seq: int, visibility: str) -> dict[str, Any]:
    r = rec(seq, "roll", visibility=visibility, label="Hidden", intent={"system": "x"}, result={"total": 7})
    if visibility != "public":
        r["sealed"] = seal(body_of(r))
    return r


def test_framing_matches_rfc6455() -> None:
    for n in (0, 125, 126, 65535, 65536, 70000):
        frame = protocol.framed(b"x" * n)
        assert frame[0] == 0x82
        header = 2 if n < 126 else 4 if n < 65536 else 10
        assert len(frame) == header + n


async def test_events_committed_together_are_one_write_per_socket() -> None:
    subs = {Sub(): Session(member("p1", "player")), Sub(): Session(member("g", "gm"))}
    sinks = []
    for sub in subs:
        sink = Sink()
        sinks.append(sink)
        sub.outbox.start(0, sink)
    await asyncio.sleep(0)
    records = [rec(1), rec(2), roll(3, "public"), rec(4)]
    state = fold(records)
    broadcast(records, subs, state, forms(), lambda s: None)
    await asyncio.sleep(0)
    for sink in sinks:
        assert len(sink.writes) == 1, "one write for the whole group"
        assert [f["seq"] for f in sink.frames()] == [1, 2, 3, 4]
    # And the very same bytes went to both sockets.
    assert sinks[0].writes[0] == sinks[1].writes[0]


async def test_a_group_goes_out_at_once_with_a_reply_queued_before_it_and_the_roller_first() -> None:
    # The server has a roller served first (serve_first); a socket with its ack queued gets the ack and
    # the events in one write, at once: the roller has both before the rest of the room, and can send its
    # next roll while the others are written to.
    order: list[str] = []

    class Named(Sink):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def write(self, chunks: list[bytes]) -> None:
            order.append(self.name)
            super().write(chunks)

    idle, replied, other = Sub(), Sub(), Sub()
    subs = {
        idle: Session(member("p1", "player")),
        replied: Session(member("p2", "player")),
        other: Session(member("p3", "player")),
    }
    serve_first(subs, replied)
    serve_first(subs, Sub())  # not a subscriber: nothing changes
    assert len(subs) == 3
    sinks = {idle: Named("idle"), other: Named("other"), replied: Named("replied")}
    for sub, sink in sinks.items():
        sub.outbox.start(0, sink)
    ack = {"t": "ack", "id": "r1", "seq": 1}
    replied.outbox.put(protocol.framed(protocol.encode(ack)))
    records = [rec(1), rec(2)]
    broadcast(records, subs, fold(records), forms(), lambda s: None)
    assert order == ["replied", "other", "idle"], "the roller, then the others from the last to arrive"
    for sub in (idle, other, replied):
        assert len(sinks[sub].writes) == 1, "one write each, all during the broadcast"
    assert [f.get("seq") for f in sinks[replied].frames()] == [1, 1, 2]
    assert sinks[replied].frames()[0]["t"] == "ack", "the ack first, in the same write as its events"
    await asyncio.sleep(0)
    assert len(sinks[replied].writes) == 1, "the flush that was scheduled for the ack finds nothing left"


async def test_hidden_rolls_split_the_group_by_audience() -> None:
    p1, p2, gm = Sub(), Sub(), Sub()
    subs = {
        p1: Session(member("p1", "player")),
        p2: Session(member("p2", "player")),
        gm: Session(member("g", "gm")),
    }
    sinks = {sub: Sink() for sub in subs}
    for sub, sink in sinks.items():
        sub.outbox.start(0, sink)
    await asyncio.sleep(0)
    records = [rec(1), roll(2, "gm"), rec(3)]
    broadcast(records, subs, fold(records), forms(), lambda s: None)
    await asyncio.sleep(0)
    seen = {sub: sinks[sub].frames() for sub in subs}
    assert [f["seq"] for f in seen[p2]] == [1, 2, 3]
    assert seen[p2][1]["sealed"] is True
    assert "label" not in seen[p2][1]
    assert b"Hidden" not in b"".join(sinks[p2].writes)
    assert seen[p1][1]["label"] == "Hidden", "the roller of a gm roll sees it"
    assert seen[gm][1]["label"] == "Hidden"


async def test_the_welcome_floor_drops_what_the_history_held() -> None:
    sub = Sub()
    subs = {sub: Session(member("p1", "player"))}
    state = RoomState()
    records = [rec(i) for i in range(1, 7)]
    for r in records:
        state.apply(r)
    # Queued before the welcome: events 1-3 one by one, then 4-6 as one group.
    for r in records[:3]:
        broadcast([r], subs, state, forms(), lambda s: None)
    broadcast(records[3:], subs, state, forms(), lambda s: None)
    sub.outbox.put(protocol.framed(protocol.encode({"t": "pong", "id": "x"})))
    sink = Sink()
    sub.outbox.start(4, sink)  # the welcome held up to seq 4
    await asyncio.sleep(0)
    assert [f.get("seq", f["t"]) for f in sink.frames()] == [5, 6, "pong"]
    sub.outbox.close()


async def test_a_socket_that_keeps_up_is_never_overflowed() -> None:
    sub = Sub(limit=3)
    subs = {sub: Session(member("p1", "player"))}
    sink = Sink()
    sub.outbox.start(0, sink)
    await asyncio.sleep(0)
    records = [rec(i) for i in range(1, 11)]
    state = fold(records)
    dropped: list[Any] = []
    # A reply waits in the queue, so every event queues behind it instead of going out at once.
    sub.outbox.put(protocol.framed(protocol.encode({"t": "pong", "id": "p"})))
    for r in records:  # ten events in one loop iteration, limit three
        broadcast([r], subs, state, forms(), dropped.append)
    assert len(sink.writes) >= 2, "a full queue was written out at once"
    await asyncio.sleep(0)
    assert dropped == []
    assert [f.get("seq", f["t"]) for f in sink.frames()] == ["pong", *range(1, 11)]


async def test_a_socket_that_stops_reading_is_overflowed_and_gets_a_gapless_prefix() -> None:
    sub = Sub(limit=3)
    subs = {sub: Session(member("p1", "player"))}
    sink = Sink()
    sub.outbox.start(0, sink)
    await asyncio.sleep(0)
    records = [rec(i) for i in range(1, 11)]
    state = fold(records)
    broadcast(records[:2], subs, state, forms(), lambda s: None)
    await asyncio.sleep(0)
    sink.open_ = False  # its buffer is full from here on
    sink.drained.clear()
    dropped: list[Any] = []
    for r in records[2:]:
        broadcast([r], subs, state, forms(), dropped.append)
    await asyncio.sleep(0)
    assert dropped == [sub]
    assert sub.outbox.overflowed
    assert [f["seq"] for f in sink.frames()] == [1, 2]
    assert sub.outbox.put(b"late"), "puts after the close are ignored, not errors"
    assert len(sub.outbox) == 0


async def test_renderings_go_to_those_who_asked_and_only_in_full() -> None:
    import rules
    from rules.rng import Scripted

    result = rules.resolve({"system": "drawsteel.power", "characteristic": 2}, rng=Scripted([3, 4]))
    plain, vtt, outsider = Sub(), Sub(), Sub()
    subs = {
        plain: Session(member("p1", "player")),
        vtt: Session(member("g", "gm"), frozenset({"foundry", "roll20"})),
        outsider: Session(member("p2", "player"), frozenset({"foundry", "roll20"})),
    }
    sinks = {sub: Sink() for sub in subs}
    for sub, sink in sinks.items():
        sub.outbox.start(0, sink)
    await asyncio.sleep(0)
    public = rec(
        1, "roll", visibility="public", label="Climb", intent={"system": "drawsteel.power"}, result=result
    )
    hidden = rec(
        2, "roll", visibility="gm", label="Ambush", intent={"system": "drawsteel.power"}, result=result
    )
    hidden["sealed"] = seal(body_of(hidden))
    records = [public, hidden]
    state = fold(records)
    state.participants["g"] = member("g", "gm")  # as if the GM had joined
    broadcast(records, subs, state, forms(), lambda s: None)
    await asyncio.sleep(0)
    got = {sub: sinks[sub].frames() for sub in subs}
    assert "foundry" not in got[plain][0]
    assert "roll20" not in got[plain][0]
    assert got[vtt][0]["roll20"]["chat"]
    assert got[vtt][0]["foundry"]["rolls"]
    assert got[vtt][1]["foundry"]["whisper"] == ["g", "p1"], (
        "a gm roll is whispered to the GMs and the roller"
    )
    assert got[outsider][1]["sealed"] is True
    assert "foundry" not in got[outsider][1]
    assert b"Ambush" not in b"".join(sinks[outsider].writes)


async def test_a_socket_whose_buffer_was_full_is_written_once_it_drains() -> None:
    sub = Sub()
    subs = {sub: Session(member("p1", "player"))}
    sink = Sink()
    sink.open_ = False  # the buffer is full before anything is queued
    sink.drained.clear()
    sub.outbox.start(0, sink)
    records = [rec(i) for i in range(1, 4)]
    state = fold(records)
    broadcast(records[:2], subs, state, forms(), lambda s: None)
    await asyncio.sleep(0)
    assert sink.writes == [], "nothing is written while the buffer is full"
    broadcast(records[2:], subs, state, forms(), lambda s: None)
    sink.open_ = True
    sink.drained.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert [f["seq"] for f in sink.frames()] == [1, 2, 3]
    assert len(sink.writes) == 1, "what piled up goes out in one write"
