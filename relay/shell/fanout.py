"""Fan-out: each event signed once per audience form and encoded once per (form, format set), then queued
to every socket without waiting.

Each socket owns an ``Outbox``: a bounded queue of framed messages flushed once per loop iteration.
Putting never awaits, so a broadcast costs the same whether a socket is fast or stalled; a socket whose
queue fills while its buffer is full is marked overflowed and the server closes it with 4008 (it can
resume from its last seq).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from relay.core import protocol
from relay.core.actions import Session
from relay.core.formats import renderings
from relay.core.state import RoomState
from relay.core.visibility import FULL, audience
from relay.settings.logs import get_logger
from relay.trust.forms import Forms

logger = get_logger("relay.fanout")
NO_FORMATS: frozenset[str] = frozenset()
#: Event kinds that carry the renderings a hello asked for (a reveal as the roll it opens).
RENDERED_KINDS = ("roll", "reveal")
S = TypeVar("S", bound="Subscriber")


class Sink(Protocol):
    """Where an outbox writes: "can the socket take bytes now", "write these", "wait until it can"."""

    def ready(self) -> bool: ...

    def write(self, chunks: list[bytes]) -> None: ...

    async def writable(self) -> bool:
        """Wait until ``ready()``; False when the socket will never be ready again (it closed)."""
        ...


# One queued write: (first seq, last seq, bytes, the per-event parts when it holds several events).
# Acks, errors and pongs carry no seq (None) and are always written.
Item = tuple[int | None, int | None, bytes, tuple[tuple[int, bytes], ...] | None]


class Outbox:
    """A socket's bounded queue of framed messages, written in coalesced bursts.

    ``put`` never waits and never writes: it queues and schedules one flush for the end of the current
    loop iteration, so all the events committed together reach a socket in one write (one system call)
    whatever their number (``put_run``, given such a group whole, writes it at once when nothing
    waits). A socket whose buffer is full is written later, by a task that exists only while it waits
    for the buffer to drain; while it stays full, frames pile up, and past ``limit`` queued frames the
    socket is overflowed (the caller closes it). A socket that keeps up is never overflowed: a full
    queue is written out at once instead.

    Until ``start`` (the welcome is out) the queue only collects; events at or below the welcome's seq
    are then skipped, since the welcome's history already holds them.

    An idle socket's outbox is a few small fields and an empty list: no task, no event, no buffer, since
    ten thousand idle sockets would otherwise pay for them all.
    """

    __slots__ = (
        "_draining",
        "_frames",
        "_items",
        "_limit",
        "_schedule",
        "_scheduled",
        "_sink",
        "closed",
        "floor",
        "overflowed",
    )

    def __init__(self, limit: int, schedule: Callable[[Outbox], None] | None = None) -> None:
        """``schedule(outbox)`` arranges one ``outbox.flush()`` soon (by default: the next loop iteration)."""
        self._schedule = schedule if schedule is not None else _next_iteration
        self._items: list[Item] = []
        self._frames = 0
        self._limit = limit
        self._sink: Sink | None = None
        self._scheduled = False
        self._draining: asyncio.Task[None] | None = None
        self.floor = 0
        self.overflowed = False
        self.closed = False

    def __len__(self) -> int:
        return self._frames

    def put(self, data: bytes, seq: int | None = None) -> bool:
        """Queue one framed message; False when the queue was full (the socket must be closed)."""
        return self._put((seq, seq, data, None), 1)

    def put_run(self, first: int, last: int, data: bytes, parts: tuple[tuple[int, bytes], ...]) -> bool:
        """Queue the events ``first..last`` as one write (``data`` is their frames joined).

        A run already holds every event one loop iteration committed for the room, so when nothing is
        queued before it and the socket can take it, it is written at once: the same single write the
        flush would make, without the queue, the scheduling and the flush (most of a delivery's Python
        work when rolls come one at a time).
        """
        sink = self._sink
        if first > self.floor and sink is not None and not self.closed and sink.ready():
            if not self._items:
                sink.write([data])
                return True
            # Behind a frame queued this iteration (a roller's ack): both go now, in one write, rather
            # than at the iteration's end, after every other member's.
            kept = self._put((first, last, data, parts), len(parts))
            self.flush()
            return kept
        return self._put((first, last, data, parts), len(parts))

    def _put(self, item: Item, frames: int) -> bool:
        if self.closed:
            return True
        if self._frames >= self._limit:
            sink = self._sink
            if sink is not None and sink.ready():
                self.flush()
            else:
                self.overflowed = True
                self.close()
                return False
        self._items.append(item)
        self._frames += frames
        if self._sink is not None and not self._scheduled:
            self._scheduled = True
            self._schedule(self)
        return True

    def flush(self) -> None:
        self._scheduled = False
        sink = self._sink
        if self.closed or sink is None or not self._items:
            return
        if not sink.ready():
            if self._draining is None:  # write once the socket drains
                self._draining = asyncio.get_running_loop().create_task(self._drain(sink))
            return
        floor = self.floor
        chunks: list[bytes] = []
        for first, last, data, parts in self._items:
            if first is None or first > floor:
                chunks.append(data)
            elif parts is not None and last is not None and last > floor:
                chunks.extend(part for seq, part in parts if seq > floor)
        self._items.clear()
        self._frames = 0
        if chunks:
            sink.write(chunks)

    async def _drain(self, sink: Sink) -> None:
        try:
            while not self.closed and self._items:
                if not await sink.writable():
                    return
                self.flush()
        except Exception:
            logger.exception("send_failed")
        finally:
            self._draining = None

    def close(self) -> None:
        self.closed = True
        self._items.clear()
        self._frames = 0
        draining, self._draining = self._draining, None
        if draining is not None and draining is not asyncio.current_task():
            draining.cancel()

    def start(self, floor: int, sink: Sink) -> None:
        """The welcome (holding every event up to ``floor``) is out: write what came after, from now on."""
        self.floor = floor
        self._sink = sink
        self.flush()


def _next_iteration(outbox: Outbox) -> None:
    asyncio.get_running_loop().call_soon(outbox.flush)


class Subscriber(Protocol):
    outbox: Outbox


class Renderer:
    """Event frames for one record, built and encoded at most once per (form, format set)."""

    def __init__(self, record: Mapping[str, Any], state: RoomState, forms: Forms) -> None:
        self.record = record
        self.state = state
        self.forms = forms
        self._frames: dict[tuple[str, frozenset[str]], dict[str, Any]] = {}
        self._bytes: dict[tuple[str, frozenset[str]], bytes] = {}
        self._renderings: dict[str, Any] | None = None
        self._rendered: frozenset[str] = NO_FORMATS

    def key(self, session: Session) -> tuple[str, frozenset[str]]:
        form = audience(self.record, self.state, session.id, session.role)
        # A reveal is rendered too: it is the first time most of the room may see that roll.
        wants = session.formats if form == FULL and self.record["kind"] in RENDERED_KINDS else NO_FORMATS
        return form, wants

    def frame(self, session: Session) -> dict[str, Any]:
        return self._frame(self.key(session))

    def _frame(self, key: tuple[str, frozenset[str]]) -> dict[str, Any]:
        frame = self._frames.get(key)
        if frame is None:
            form, wants = key
            frame = self.forms.frame(self.record, form, self.state)
            if wants:
                # Renderings ride beside the signed fields, outside the signature (spec/signing.md).
                extra = self._extra(wants)
                frame = {**frame, **{name: extra[name] for name in wants if name in extra}}
            self._frames[key] = frame
        return frame

    def _extra(self, wants: frozenset[str]) -> dict[str, Any]:
        missing = wants - self._rendered
        if self._renderings is None or missing:
            more = renderings(self.record, missing, self.state.gm_ids())
            self._renderings = {**(self._renderings or {}), **more}
            self._rendered = self._rendered | missing
        return self._renderings

    def encoded_for(self, key: tuple[str, frozenset[str]]) -> bytes:
        data = self._bytes.get(key)
        if data is None:
            form, wants = key
            if wants:
                data = protocol.framed(protocol.encode(self._frame(key)))
            else:
                data = self.forms.wire(self.record, form, self.state)
            self._bytes[key] = data
        return data


def serve_first(subscribers: dict[S, Session], sub: S) -> None:
    """Have the next ``broadcast`` to ``subscribers`` write to ``sub`` before any other socket (a roller:
    its next roll can be on its way while the rest of the room is written to)."""
    session = subscribers.pop(sub, None)
    if session is not None:
        subscribers[sub] = session  # broadcast serves from the last one back


def broadcast(
    records: Sequence[Mapping[str, Any]],
    subscribers: dict[S, Session],
    state: RoomState,
    forms: Forms,
    on_overflow: Callable[[S], None],
) -> None:
    """Queue ``records`` (in seq order) to every subscriber, each in the form that subscriber may see.

    Subscribers are served from the last one back, so the one ``serve_first`` moved last comes first.

    Each distinct (form, formats) of a record is rendered, encoded and framed once, and every socket of
    that audience gets the very same bytes object. Records that look the same to everyone but for the
    formats asked for (all but hidden rolls) are joined into runs, so a socket costs one queue entry per
    run however many events the run holds; hidden rolls go out one by one, per audience.
    """
    overflowed: dict[S, None] = {}
    run: list[Mapping[str, Any]] = []
    for record in records:
        if _uniform(record, state):
            run.append(record)
            continue
        if run:
            _broadcast_run(run, subscribers, state, forms, overflowed)
            run = []
        _broadcast_one(record, subscribers, state, forms, overflowed)
    if run:
        _broadcast_run(run, subscribers, state, forms, overflowed)
    for sub in overflowed:
        on_overflow(sub)


def _uniform(record: Mapping[str, Any], state: RoomState) -> bool:
    # A hidden roll goes to everyone alike only once an entry says it was revealed: one missing from
    # memory (relay.shell.old_rolls) is sent per audience, never in full to all.
    return record["kind"] != "roll" or record["visibility"] == "public" or state.revealed(record["seq"])


def _broadcast_run(
    run: list[Mapping[str, Any]],
    subscribers: dict[S, Session],
    state: RoomState,
    forms: Forms,
    overflowed: dict[S, None],
) -> None:
    renderers = [
        (record["seq"], record["kind"] in RENDERED_KINDS, Renderer(record, state, forms)) for record in run
    ]
    first, last = run[0]["seq"], run[-1]["seq"]
    by_formats: dict[frozenset[str], tuple[bytes, tuple[tuple[int, bytes], ...]]] = {}
    for sub, session in reversed(subscribers.items()):
        formats = session.formats
        entry = by_formats.get(formats)
        if entry is None:
            parts = tuple(
                (seq, renderer.encoded_for((FULL, formats if rendered else NO_FORMATS)))
                for seq, rendered, renderer in renderers
            )
            entry = by_formats[formats] = (b"".join(part for _, part in parts), parts)
        if not sub.outbox.put_run(first, last, entry[0], entry[1]):
            overflowed[sub] = None


def _broadcast_one(
    record: Mapping[str, Any],
    subscribers: dict[S, Session],
    state: RoomState,
    forms: Forms,
    overflowed: dict[S, None],
) -> None:
    renderer = Renderer(record, state, forms)
    seq = record["seq"]
    by_key: dict[tuple[str, frozenset[str]], bytes] = {}
    key_of = renderer.key
    for sub, session in reversed(subscribers.items()):
        key = key_of(session)
        data = by_key.get(key)
        if data is None:
            data = by_key[key] = renderer.encoded_for(key)
        if not sub.outbox.put(data, seq):
            overflowed[sub] = None


def history(
    records: Iterable[Mapping[str, Any]], session: Session, state: RoomState, forms: Forms
) -> list[dict[str, Any]]:
    """Stored records as ``session`` may see them now, for a welcome (signed forms come from ``forms``)."""
    return [Renderer(record, state, forms).frame(session) for record in records]
