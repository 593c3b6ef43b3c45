"""Real WebSocket clients for the end-to-end tests, and the spec's helpers they judge frames with.

Written from the wire-protocol spec, not from the server's code: a client records every byte the server sends
and hands out the frames a test waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable
from typing import Any

import msgpack
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

#: Seconds to wait for one expected frame. Generous because the machine running the suite may be busy.
TIMEOUT = 8.0


def pack(obj: Any) -> bytes:
    data = msgpack.packb(obj, use_bin_type=True)
    assert isinstance(data, bytes)
    return data


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False)


class Refused(AssertionError):
    """The server closed the socket instead of welcoming the client."""

    def __init__(self, code: int | None, reason: str, frames: list[Any]) -> None:
        super().__init__(f"closed with {code} {reason!r} after {frames!r}")
        self.code = code
        self.reason = reason
        self.frames = frames


class Client:
    """A real WebSocket client that records every raw message it receives, in order.

    ``raw`` holds the messages exactly as they came off the socket (bytes for binary frames); ``frames`` holds
    them decoded. ``next()`` hands out received frames that match, each at most once, in arrival order, so a
    test can wait for "the ack for r1" without caring whether an event arrived first.
    """

    def __init__(self, ws: ClientConnection, label: str) -> None:
        self.ws = ws
        self.label = label
        self.raw: list[bytes | str] = []
        self.frames: list[Any] = []
        self._taken: set[int] = set()
        self._changed = asyncio.Event()
        self.closed = False
        self.close_code: int | None = None
        self.close_reason: str = ""
        self.welcome: dict[str, Any] = {}
        self._reader: asyncio.Task[None] | None = None
        self._ids = 0

    # -- connecting --------------------------------------------------------------------------------------
    @classmethod
    async def open(cls, url: str, label: str = "client", *, read: bool = True, **kwargs: Any) -> Client:
        """Open the socket without saying hello."""
        kwargs.setdefault("max_size", 16 * 1024 * 1024)
        kwargs.setdefault("open_timeout", TIMEOUT)
        kwargs.setdefault("close_timeout", 2)
        ws = await connect(url, **kwargs)
        client = cls(ws, label)
        if read:
            client.start_reading()
        return client

    @classmethod
    async def join(
        cls,
        url: str,
        token: str,
        label: str = "client",
        *,
        name: str | None = None,
        resume: dict[str, Any] | None = None,
        formats: list[str] | None = None,
        read: bool = True,
        **kwargs: Any,
    ) -> Client:
        """Open, say hello and wait for the welcome (raises ``Refused`` if the server closes instead)."""
        client = await cls.open(url, label, **kwargs)
        hello: dict[str, Any] = {"t": "hello", "v": 1, "token": token}
        if name is not None:
            hello["name"] = name
        if resume is not None:
            hello["resume"] = resume
        if formats is not None:
            hello["formats"] = formats
        await client.send(hello)
        try:
            client.welcome = await client.next("welcome")
        except AssertionError:
            if client.closed:
                raise Refused(client.close_code, client.close_reason, client.frames) from None
            raise
        if not read:
            client.stop_reading()
        return client

    def start_reading(self) -> None:
        self._reader = asyncio.create_task(self._read(), name=f"reader-{self.label}")

    def stop_reading(self) -> None:
        """Stop pulling messages: the socket's buffers fill up, like a client on a stalled network."""
        if self._reader is not None:
            self._reader.cancel()
            self._reader = None

    async def _read(self) -> None:
        try:
            async for message in self.ws:
                self.raw.append(message)
                try:
                    self.frames.append(unpack(message) if isinstance(message, bytes) else ("text", message))
                except Exception as exc:  # a frame a client cannot decode is a finding, kept for the test
                    self.frames.append(("undecodable", repr(exc)))
                self._changed.set()
        except ConnectionClosed:
            pass
        # Reached only when the connection ended (a cancelled reader raises instead).
        rcvd = self.ws.protocol.close_rcvd
        if rcvd is not None:
            self.close_code, self.close_reason = rcvd.code, rcvd.reason
        else:
            self.close_code, self.close_reason = self.ws.close_code, self.ws.close_reason or ""
        self.closed = True
        self._changed.set()

    # -- identity ----------------------------------------------------------------------------------------
    @property
    def me(self) -> dict[str, Any]:
        you = self.welcome["you"]
        assert isinstance(you, dict)
        return you

    @property
    def id(self) -> str:
        return str(self.me["id"])

    def new_id(self, prefix: str = "r") -> str:
        self._ids += 1
        return f"{prefix}-{self.label}-{self._ids}-{secrets.token_hex(3)}"

    # -- sending -----------------------------------------------------------------------------------------
    async def send(self, frame: Any) -> None:
        await self.ws.send(pack(frame))

    async def send_raw(self, data: bytes | str) -> None:
        await self.ws.send(data)

    async def request(self, frame: dict[str, Any], timeout: float = TIMEOUT) -> dict[str, Any]:
        """Send a frame with an ``id`` and return the ack, pong or error answering it."""
        if "id" not in frame:
            frame = {**frame, "id": self.new_id(frame.get("t", "x"))}
        await self.send(frame)
        return await self.answer(frame["id"], timeout)

    async def answer(self, request_id: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        return await self.next(
            where=lambda f: f.get("t") in {"ack", "error", "pong"} and f.get("id") == request_id,
            timeout=timeout,
        )

    async def roll(
        self,
        intent: dict[str, Any],
        visibility: str = "public",
        label: str | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Roll and return the ack (fails the test on an error)."""
        frame: dict[str, Any] = {
            "t": "roll",
            "id": request_id or self.new_id(),
            "intent": intent,
            "visibility": visibility,
        }
        if label is not None:
            frame["label"] = label
        reply = await self.request(frame)
        assert reply.get("t") == "ack", f"{self.label}: roll {frame} was answered with {reply}"
        assert isinstance(reply.get("seq"), int), reply
        return reply

    async def ping(self) -> None:
        reply = await self.request({"t": "ping"})
        assert reply["t"] == "pong", reply

    # -- receiving ---------------------------------------------------------------------------------------
    async def next(
        self,
        t: str | None = None,
        *,
        kind: str | None = None,
        where: Callable[[dict[str, Any]], bool] | None = None,
        timeout: float = TIMEOUT,
    ) -> dict[str, Any]:
        """The first received frame not handed out yet that matches; waits up to ``timeout`` seconds."""

        def matches(f: Any) -> bool:
            if not isinstance(f, dict):
                return False
            if t is not None and f.get("t") != t:
                return False
            if kind is not None and f.get("kind") != kind:
                return False
            return where is None or bool(where(f))

        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for i, f in enumerate(self.frames):
                if i not in self._taken and matches(f):
                    self._taken.add(i)
                    return f  # type: ignore[no-any-return]
            remaining = deadline - asyncio.get_running_loop().time()
            if self.closed or remaining <= 0:
                what = f"t={t!r} kind={kind!r}" + (" with a condition" if where else "")
                state = (
                    f"closed with {self.close_code} {self.close_reason!r}" if self.closed else "still open"
                )
                tail = self.frames[-6:]
                raise AssertionError(
                    f"{self.label}: no frame {what} within {timeout}s ({state}); last frames: {tail!r}"
                )
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.5))

    async def event(self, seq: int, timeout: float = TIMEOUT) -> dict[str, Any]:
        return await self.next("event", where=lambda f: f.get("seq") == seq, timeout=timeout)

    def events(self, since: int = 0) -> list[dict[str, Any]]:
        """Every event frame received (live, not welcome history), from raw message index ``since``."""
        return [f for f in self.frames[since:] if isinstance(f, dict) and f.get("t") == "event"]

    def mark(self) -> int:
        return len(self.raw)

    def bytes_since(self, start: int, end: int | None = None) -> bytes:
        """Every received byte from message ``start`` to ``end`` (text frames as UTF-8)."""
        return b"".join(m if isinstance(m, bytes) else m.encode() for m in self.raw[start:end])

    async def wait_closed(self, timeout: float = TIMEOUT) -> tuple[int | None, str]:
        """Wait for the server to close the socket; returns the close code and reason the server sent."""
        if self._reader is None and not self.closed:
            self.start_reading()
        deadline = asyncio.get_running_loop().time() + timeout
        while not self.closed:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise AssertionError(f"{self.label}: the server did not close the socket within {timeout}s")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.5))
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._reader, 2)
        return self.close_code, self.close_reason

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.ws.close(), 3)
        if self._reader is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._reader, 3)


async def caught_up(client: Client, *others: Client) -> None:
    """Wait until ``client`` has every event up to each of ``others``' welcome: what a GM's client has seen
    before it acts on a participant (on two nodes, the GM's node may learn of an arrival from the stream a
    moment after that participant's welcome)."""
    for other in others:
        seq = int(other.welcome["seq"])
        if seq > int(client.welcome["seq"]) and not any(int(ev["seq"]) >= seq for ev in client.events()):
            await client.event(seq)


def without_sig(event: dict[str, Any]) -> dict[str, Any]:
    """An event but for its signature: what two copies of one event share (each signing of an event has a
    nonce of its own, so two signatures of it differ: docs/verification.md)."""
    return {key: value for key, value in event.items() if key != "sig"}


# --------------------------------------------------------------------------------------------------------
# Spec helpers shared by the test modules
# --------------------------------------------------------------------------------------------------------

#: The audience table of the protocol: which roles get the full event for each visibility.
VISIBILITIES = ("public", "gm", "blind", "self")


HIDDEN_KEYS = ("label", "intent", "result", "dice", "foundry", "roll20")


def sees_full(visibility: str, viewer_id: str, viewer_role: str, roller_id: str) -> bool:
    """Whether a viewer gets the full roll event (else the sealed placeholder), per the audiences table."""
    if visibility == "public":
        return True
    if visibility == "gm":
        return viewer_id == roller_id or viewer_role == "gm"
    if visibility == "blind":
        return viewer_role == "gm"
    if visibility == "self":
        return viewer_id == roller_id
    raise ValueError(visibility)


def assert_sealed(event: dict[str, Any]) -> None:
    assert event.get("sealed") is True, event
    commitment = event.get("commitment")
    assert isinstance(commitment, str), event
    assert len(commitment) == 64, event
    int(commitment, 16)
    leaked = [k for k in HIDDEN_KEYS if k in event]
    assert not leaked, f"a sealed placeholder carries {leaked}: {event}"


def assert_full(event: dict[str, Any]) -> None:
    assert not event.get("sealed"), event
    assert "commitment" not in event or event.get("sealed") is not True, event
    result = event.get("result")
    assert isinstance(result, dict), event
    assert {"system", "dice", "total", "formula", "text"} <= set(result), result
    assert isinstance(event.get("intent"), dict), event


#: The caps of the errata (Fear 12, Hope 6), so a fold accepts either way of reporting a capped gain.
CAPS = {"fear": 12, "hope": 6}


def fold_resources(history: list[dict[str, Any]]) -> tuple[int, dict[str, int]]:
    """Fear and Hope folded from resource events; each value must follow from the previous one and delta."""
    fear = 0
    hope: dict[str, int] = {}
    for ev in history:
        if ev.get("kind") != "resource":
            continue
        name, delta, value = ev["name"], ev["delta"], ev["value"]
        assert name in CAPS, ev
        before = fear if name == "fear" else hope.get(str(ev["participant"]), 0)
        assert value == min(max(before + delta, 0), CAPS[name]), f"{name} was {before}: {ev}"
        if name == "fear":
            fear = value
        else:
            hope[str(ev["participant"])] = value
    return fear, hope


def assert_sentence(message: Any) -> None:
    """An error message meant for a person: a sentence, never a trace."""
    assert isinstance(message, str), message
    assert len(message) >= 12, message
    assert " " in message, message
    assert message.rstrip()[-1] in ".!?", f"not a sentence: {message!r}"
    assert "Traceback" not in message, message
    assert 'File "' not in message, message
