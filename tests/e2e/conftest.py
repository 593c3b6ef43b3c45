"""End-to-end fixtures: a real ``tablerelay serve`` process and real WebSocket clients.

Everything here is written from the wire-protocol spec, not from the server's code: the server is a black box
started as a subprocess, spoken to over sockets, and judged by the bytes it sends and the log lines it writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.console import tablerelay_bin

#: Seconds to wait for one expected frame. Generous because the machine running the suite may be busy.
TIMEOUT = 8.0
#: Seconds to wait for the server to say it is listening.
START_TIMEOUT = 30.0


def pack(obj: Any) -> bytes:
    data = msgpack.packb(obj, use_bin_type=True)
    assert isinstance(data, bytes)
    return data


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False)


# --------------------------------------------------------------------------------------------------------
# The server process
# --------------------------------------------------------------------------------------------------------


@dataclass
class Server:
    """One ``tablerelay serve`` process on a data folder; its stderr is collected line by line."""

    data: Path
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    log_lines: list[str] = field(default_factory=list)
    host: str = ""
    port: int = 0
    url: str = ""
    _ready: threading.Event = field(default_factory=threading.Event)
    _reader: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> Server:
        self._ready.clear()
        self.host, self.port, self.url = "", 0, ""
        self.proc = subprocess.Popen(
            [tablerelay_bin(), "serve", "--host", "127.0.0.1", "--port", "0", "--data", str(self.data)],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self._reader = threading.Thread(target=self._read_stderr, args=(self.proc,), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None:
                self._reader.join(2)
                pytest.fail(
                    f"tablerelay serve exited with {self.proc.returncode} before listening; stderr:\n"
                    + self.log_text()
                )
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                self._reader.join(2)
                pytest.fail(
                    f"tablerelay serve did not log 'listening' within {START_TIMEOUT}s; stderr:\n"
                    + self.log_text()
                )
        return self

    def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.log_lines.append(line)
            if not self._ready.is_set():
                record = parse_log_line(line)
                if record is not None and record.get("event") == "listening":
                    self.host = str(record["host"])
                    self.port = int(record["port"])
                    self.url = str(record["url"])
                    self._ready.set()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Send ``sig`` and wait for the process to exit; returns its exit status."""
        assert self.proc is not None
        if sig != signal.SIGKILL and _loop_running():
            # The wait would hold this thread's event loop, and the test's clients on it could not answer
            # the server's close frame: the server would wait out its 10-second close timeout.
            pytest.fail("Server.stop from an async test blocks its event loop: await astop() instead")
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(
                f"tablerelay serve did not exit within {timeout}s of signal {sig}; stderr:\n"
                + self.log_text()
            )
        if self._reader is not None:
            self._reader.join(5)
        return code

    async def astop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """``stop`` from an async test: the test's event loop keeps running while the server shuts down, so
        its open clients answer the server's close frame (``stop`` refuses to run on a running loop)."""
        return await asyncio.to_thread(self.stop, sig, timeout)

    def kill(self) -> None:
        """SIGKILL: no clean-up, as in a power cut."""
        self.stop(signal.SIGKILL)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- observation -------------------------------------------------------------------------------------
    @property
    def http(self) -> str:
        return f"http://{self.host}:{self.port}"

    def log_text(self) -> str:
        return "\n".join(self.log_lines)

    def logged(self, event: str, room: str | None = None) -> list[dict[str, Any]]:
        """The log records of ``event`` read so far (of room ``room`` only, if given)."""
        return [
            r
            for r in map(parse_log_line, list(self.log_lines))
            if r is not None and r.get("event") == event and (room is None or r.get("room") == room)
        ]

    async def alogged(
        self, event: str, room: str | None = None, *, count: int = 1, timeout: float = 10.0
    ) -> list[dict[str, Any]]:
        """``logged``, once it holds ``count`` records: the server's stderr is read by a thread, which under
        load can lag behind what the server has already said on its sockets."""
        deadline = time.monotonic() + timeout
        while len(found := self.logged(event, room)) < count:
            # The message (every line read so far, joined) is built only if the wait fails.
            assert time.monotonic() < deadline, (
                f"fewer than {count} {event!r} lines logged:\n{self.log_text()[-3000:]}"
            )
            await asyncio.sleep(0.05)
        return found

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str, str]:
        """A blocking HTTP GET: (status, content type, body)."""
        try:
            with urllib.request.urlopen(self.http + path, timeout=timeout) as resp:
                return (
                    resp.status,
                    resp.headers.get("Content-Type", ""),
                    resp.read().decode("utf-8", "replace"),
                )
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode("utf-8", "replace")

    async def aget(self, path: str) -> tuple[int, str, str]:
        return await asyncio.to_thread(self.get, path)

    async def assert_healthy(self) -> None:
        assert self.running, "the server process died:\n" + self.log_text()[-4000:]
        status, _, body = await self.aget("/healthz")
        assert status == 200, f"/healthz answered {status}: {body!r}"

    # -- command line ------------------------------------------------------------------------------------
    def cli(self, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [tablerelay_bin(), *args, "--data", str(self.data)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert proc.returncode == 0, f"tablerelay {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}"
        return proc

    def create_room(self, name: str = "Test table") -> Room:
        out = self.cli("room", "create", "--name", name, "--json").stdout
        data = json.loads(out)
        assert set(data) >= {"room", "gm", "player", "spectator", "watch"}, data
        return Room(
            id=str(data["room"]),
            gm=data["gm"],
            player=data["player"],
            spectator=data["spectator"],
            watch=data["watch"],
            name=name,
        )

    async def acreate_room(self, name: str = "Test table") -> Room:
        return await asyncio.to_thread(self.create_room, name)

    def token(self, room: str, role: str, *, name: str | None = None, ttl: int | None = None) -> str:
        args = ["token", "--room", room, "--role", role]
        if name is not None:
            args += ["--name", name]
        if ttl is not None:
            args += ["--ttl", str(ttl)]
        out = self.cli(*args).stdout.strip()
        assert out, "tablerelay token printed nothing"
        return out.splitlines()[-1].strip()


@dataclass(frozen=True)
class Room:
    id: str
    gm: str
    player: str
    spectator: str
    watch: str
    name: str


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def parse_log_line(line: str) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


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


def server_env(secret: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    env["TABLERELAY_SECRET"] = secret
    env["PYTHONUNBUFFERED"] = "1"
    # TEST_SQLITE_WRITER=process runs the e2e suite against the SQLite writer process.
    if os.environ.get("TEST_SQLITE_WRITER"):
        env["TABLERELAY_SQLITE_WRITER"] = os.environ["TEST_SQLITE_WRITER"]
    env.update(extra or {})
    return env


@contextlib.contextmanager
def running_server(data: Path, extra_env: dict[str, str] | None = None) -> Iterator[Server]:
    """A started server that is stopped with SIGTERM afterwards, which must exit 0."""
    server = Server(data=data, env=server_env(secrets.token_hex(24), extra_env)).start()
    try:
        yield server
    finally:
        if server.running:
            _exited_cleanly(server, server.stop(signal.SIGTERM))


@contextlib.asynccontextmanager
async def arunning_server(data: Path, extra_env: dict[str, str] | None = None) -> AsyncIterator[Server]:
    """``running_server`` in an async test: stopped with ``astop``."""
    server = Server(data=data, env=server_env(secrets.token_hex(24), extra_env)).start()
    try:
        yield server
    finally:
        if server.running:
            _exited_cleanly(server, await server.astop(signal.SIGTERM))


def _exited_cleanly(server: Server, code: int) -> None:
    assert code == 0, f"tablerelay serve exited with {code} after SIGTERM; stderr tail:\n" + "\n".join(
        server.log_lines[-40:]
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server per test module, on its own data folder, with default limits and debug logging.

    Debug logging makes the "no hidden value in any log line" checks as strict as they can be.
    """
    with running_server(tmp_path_factory.mktemp("relay-data"), {"TABLERELAY_LOG_LEVEL": "debug"}) as srv:
        yield srv


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start extra servers for one test (own limits, or to be killed); any still running are stopped."""
    started: list[Server] = []

    def start(data: Path | None = None, **env: str) -> Server:
        srv = Server(
            data=data or tmp_path / f"data{len(started)}",
            env=server_env(env.pop("secret", secrets.token_hex(24)), env),
        ).start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        if srv.running:
            srv.stop(signal.SIGKILL)


@pytest.fixture
async def room(server: Server) -> Room:
    return await server.acreate_room("Table " + secrets.token_hex(3))


# --------------------------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------------------------


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


@pytest.fixture
async def clients() -> Any:
    """Collects clients a test opens and closes them at the end, whatever happened."""
    opened: list[Client] = []

    class Opener:
        async def join(self, url: str, token: str, label: str = "client", **kwargs: Any) -> Client:
            c = await Client.join(url, token, label, **kwargs)
            opened.append(c)
            return c

        async def open(self, url: str, label: str = "client", **kwargs: Any) -> Client:
            c = await Client.open(url, label, **kwargs)
            opened.append(c)
            return c

    yield Opener()
    await asyncio.gather(*(c.close() for c in opened), return_exceptions=True)


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
