"""The I/O shell: a websockets asyncio server around the sans-I/O ``Room``, plus a few HTTP endpoints.

Per socket: read the hello, admit it to its room, subscribe its outbox *before* reading the welcome's
history (so no event can fall between history and live delivery; the outbox drops the ones the history
already holds), send the welcome, then feed each frame to the room and carry out what it returns.
Appends complete in commit order through future callbacks on the event loop, so acks and broadcasts go
out in seq order without any task awaiting a socket.
"""

from __future__ import annotations

import asyncio
import email.utils
import gc
import http
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import structlog
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State

from relay.core import protocol, retention
from relay.core.actions import Action, Append, Broadcast, Pending, Refused, Send, Session
from relay.core.room import Resolver, Room
from relay.core.state import RoomState
from relay.settings.config import Config
from relay.settings.logs import REQUEST, debug_enabled, get_logger
from relay.shell import admission, campaign_io, fanout, old_rolls, public, upkeep
from relay.shell.cluster import retries
from relay.shell.fanout import Outbox
from relay.shell.http import foundry, static
from relay.shell.keepalive import Keepalive
from relay.shell.observe.looplag import LoopLag
from relay.shell.observe.metrics import CONTENT_TYPE as METRICS_TYPE
from relay.shell.observe.metrics import Metrics
from relay.shell.ratelimit import TokenBucket
from relay.storage import stores
from relay.storage.base import Conflict, EventLog
from relay.storage.sqlite import SqliteLog
from relay.trust import tokens
from relay.trust.forms import Forms
from relay.trust.nonces import NoncePool
from relay.trust.signing import Keyring, load_keyring

if TYPE_CHECKING:
    from relay.shell.cluster.presence import Presence

logger = get_logger("relay.server")
MAX_ROOM_ID = 64
#: Seconds between keepalive pings, and to wait for each pong before closing with 1011
#: (relay.shell.keepalive).
PING_INTERVAL = 20.0
PING_TIMEOUT = 20.0
NOT_BUILT = (
    b"This page is not installed on this server. A wheel carries it; a checkout needs "
    b"'python scripts/build_assets.py --develop' (./scripts/run does it).\n"
)
KEYS_PATH = "/.well-known/tablerelay-keys.json"
STOPPING = b"The server is shutting down; reconnect in a moment and resume.\n"


def _reason(text: str) -> str:
    """A close reason within the protocol's 123 bytes."""
    data = text.encode()
    if len(data) <= 123:
        return text
    return data[:120].decode(errors="ignore") + "…"


class Connection:
    """One WebSocket: its outbox, its session once admitted, its rate limit.

    Slotted and small: ten thousand idle sockets each hold one.
    """

    __slots__ = ("_session", "bucket", "cid", "closing", "frames", "handle", "outbox", "ws")
    _ids = itertools.count(1)

    def __init__(self, ws: ServerConnection, config: Config, schedule: Callable[[Outbox], None]) -> None:
        self.ws = ws
        self.cid = next(self._ids)
        self.outbox = Outbox(config.limits.send_queue, schedule)
        self._session: Session | None = None
        self.bucket = TokenBucket(config.limits.rate, config.limits.burst)
        self.frames = 0
        self.closing = False
        self.handle: RoomHandle | None = None  # set once admitted; cleared when detached

    @property
    def session(self) -> Session:
        assert self._session is not None
        return self._session

    def admit(self, session: Session) -> None:
        self._session = session

    def close(self, code: int, reason: str) -> None:
        """Close without waiting (safe from callbacks); later frames are dropped."""
        if self.closing:
            return
        self.closing = True
        self.outbox.close()
        asyncio.get_running_loop().create_task(self.ws.close(code, _reason(reason)))


@dataclass(eq=False)
class RoomHandle:
    room: Room
    forms: Forms
    # In order of arrival, but a roller is moved to be served first when its roll is stored
    # (relay.shell.fanout.serve_first), so it has its ack and event before the rest of the room.
    subscribers: dict[Connection, Session] = field(default_factory=dict)
    sessions: dict[Session, Connection] = field(default_factory=dict)
    outgoing: list[dict[str, Any]] = field(default_factory=list)  # committed, not yet broadcast


class Relay:
    """Everything the server holds: rooms, connections, the log, metrics."""

    def __init__(
        self,
        config: Config,
        log: EventLog,
        secret: bytes,
        *,
        metrics: Metrics | None = None,
        resolve: Resolver | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        self.config = config
        self.keyring = keyring
        # The published keys, as the welcome carries them and /.well-known/tablerelay-keys.json serves them.
        self.keys: list[dict[str, Any]] = keyring.jwks()["keys"] if keyring is not None else []
        self._jwks = json.dumps({"keys": self.keys}).encode()
        # Makes the nonces that let the loop sign each event form in 3 µs (relay.trust.nonces); ``run`` starts
        # it.
        self.nonces: NoncePool | None = None
        self.limits = config.limits
        self.log = log
        # Appends that lost a race to another relay node are tried again (only with the cluster store).
        self.retries = retries.Retries(self) if log.shared else None
        self.presence: Presence | None = None  # who is here, for the other nodes (cluster store; ``run``)
        self.secret = secret
        self.metrics = metrics if metrics is not None else Metrics()
        self.resolve = resolve
        self.rooms: dict[str, RoomHandle] = {}
        self._loading: dict[str, asyncio.Future[RoomHandle | None]] = {}
        self.connections: set[Connection] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self._sockets: set[ServerConnection] = set()
        self._pending_rooms: dict[RoomHandle, None] = {}
        self._pending_outboxes: dict[Outbox, None] = {}
        self._tick_scheduled = False
        self._foundry_zips: dict[str, bytes] = {}  # the Foundry module's zip, built once per base address
        self.stopping = False
        self._inflight: set[Pending] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.started = time.time()
        # Where people reach this server: the base of every absolute link it serves. ``run`` sets it again
        # once the socket is bound (with --port 0 only the socket knows the port).
        self.public_base = public.public_base(config, (config.host, config.port))
        self.lag = LoopLag(observe=self.metrics.loop_lag.observe)
        self.upkeep = upkeep.Upkeep(self)  # old hidden rolls out of memory, idle rooms unloaded
        self.keepalive = Keepalive(PING_INTERVAL, PING_TIMEOUT)  # one timer pings every socket
        self.gate = admission.Gate(config)  # origins allowed, sockets per client address

    # -- rooms -------------------------------------------------------------------------------------------

    async def room(self, room_id: str) -> RoomHandle | None:
        handle = self.rooms.get(room_id)
        if handle is not None:
            return handle
        loading = self._loading.get(room_id)
        if loading is not None:
            return await asyncio.shield(loading)
        future: asyncio.Future[RoomHandle | None] = asyncio.get_running_loop().create_future()
        self._loading[room_id] = future
        try:
            handle = await self._load(room_id)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here; other waiters re-raise it
            raise
        else:
            future.set_result(handle)
            return handle
        finally:
            del self._loading[room_id]

    async def _load(self, room_id: str) -> RoomHandle | None:
        info = await self.log.get_room(room_id)
        if info is None:
            return None
        state: RoomState = await self.log.state(room_id)
        room = Room(info, state, self.limits, resolve=self.resolve)
        keep = self.limits.history
        if keep and state.seq:
            try:
                room.remember(await self.log.read(room_id, max(0, state.seq - keep), keep))
            except BaseException:
                self.log.unfollow(room_id)  # ``state`` began keeping the room's events for a follow
                raise
        # Signed forms are kept for the events a fresh welcome shows (the last ``history`` seqs), so a
        # loaded room's memory stops growing (docs/hardening.md, the soak); a resume from further back
        # signs the older forms for its welcome.
        handle = RoomHandle(room, Forms(room_id, self.keyring, self.limits.history))
        self.rooms[room_id] = handle
        self.metrics.rooms.set(len(self.rooms))
        logger.info("room_loaded", room=room_id, seq=state.seq)
        self.log.follow(room_id, state.seq, lambda records: self._remote(handle, records))
        # With other nodes serving the room, members without a socket here may have one there.
        sweep = room.sweep() if not self.log.shared else None
        if sweep is not None:
            self._submit(handle, sweep)
        return handle

    # -- appends and their outcomes ------------------------------------------------------------------

    def _submit(self, handle: RoomHandle, pending: Pending) -> None:
        try:
            future = self.log.append(handle.room.id, pending.records, pending.expected)
        except RuntimeError as exc:
            self._failed(handle, pending, exc)
            return
        self._inflight.add(pending)
        self._idle.clear()
        future.add_done_callback(lambda f: self._appended(handle, pending, f))

    def _appended(self, handle: RoomHandle, pending: Pending, future: asyncio.Future[int]) -> None:
        self._inflight.discard(pending)
        if not self._inflight:
            self._idle.set()
        error = future.exception() if not future.cancelled() else asyncio.CancelledError()
        if error is not None:
            self._failed(handle, pending, error)
            return
        for session, _ in pending.acks:
            conn = handle.sessions.get(session)
            if conn is not None:
                fanout.serve_first(handle.subscribers, conn)  # the roller, by this iteration's broadcast
        try:
            # The acks are queued now and the events, signed, at the end of this iteration (``_tick``):
            # a roller gets its ack and its event in one write.
            self._execute(handle, handle.room.committed_append(pending))
        except Exception:
            logger.exception("commit_delivery_failed", room=handle.room.id, seq=pending.last)
        elapsed = time.perf_counter() - pending.started
        self.metrics.fanout.observe(elapsed)
        debug = debug_enabled()  # the per-event lines' values are not even built at info level
        for record in pending.records:
            kind = record["kind"]
            self.metrics.event(kind)
            if kind == "roll":
                system = str(record["intent"].get("system", "?"))
                self.metrics.roll(system, record["visibility"])
                if debug:
                    logger.debug(
                        "rolled",
                        room=handle.room.id,
                        seq=record["seq"],
                        system=system,
                        visibility=record["visibility"],
                        actor=record["actor"]["id"],
                    )
            elif debug:
                logger.debug("stored", room=handle.room.id, seq=record["seq"], kind=kind)
        for done in pending.done:
            done(None)

    def _remote(self, handle: RoomHandle, records: list[dict[str, Any]]) -> None:
        """Events another relay node stored in this room: fold, broadcast (as our own), retry what waited."""
        self._execute(handle, handle.room.remote(records))
        for record in records:
            self.metrics.event(record["kind"])
        if self.presence is not None:
            self.presence.answer_leaves(handle, records)
        if self.retries is not None:
            self.retries.caught_up(handle)

    def _failed(self, handle: RoomHandle, pending: Pending, error: BaseException) -> None:
        conflict = isinstance(error, Conflict)
        retried = False
        if conflict and self.retries is not None:
            assert isinstance(error, Conflict)
            logger.info("append_lost_race", room=handle.room.id, expected=pending.expected)
            retried = self.retries.take(handle, pending, error)
        elif conflict:
            logger.warning("append_conflict", room=handle.room.id, expected=pending.expected)
        else:
            logger.error(
                "append_failed",
                room=handle.room.id,
                expected=pending.expected,
                error=type(error).__name__,
                exc_info=error,
            )
        self._execute(handle, handle.room.failed_append(pending, conflict))
        if retried:
            return
        for done in pending.done:
            done(error)

    def _execute(self, handle: RoomHandle, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                conn = handle.sessions.get(action.session)
                if conn is not None:
                    self._send(conn, action.frame)
            elif isinstance(action, Append):
                self._submit(handle, action.pending)
            elif isinstance(action, Broadcast):
                # Gathered and sent once per loop iteration: the appends one SQLite commit settles all
                # complete in the same iteration, so their events go out as one write per socket.
                handle.outgoing.append(action.record)
                self._pending_rooms[handle] = None
                self._schedule_tick()
            else:  # a campaign-management effect (rare): relay.shell.campaign_io
                campaign_io.carry_out(self, handle, action)

    # Output happens once per loop iteration, in a "tick": first every room's newly committed events are
    # broadcast, then every outbox with something queued is flushed. So an ack and the event it names,
    # and all the events one commit settled, leave in one write per socket.

    def _schedule_flush(self, outbox: Outbox) -> None:
        self._pending_outboxes[outbox] = None
        self._schedule_tick()

    def _schedule_tick(self) -> None:
        if not self._tick_scheduled:
            self._tick_scheduled = True
            asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self._tick_scheduled = False
        rooms, self._pending_rooms = self._pending_rooms, {}
        for handle in rooms:
            if handle.outgoing:
                records, handle.outgoing = handle.outgoing, []
                try:
                    fanout.broadcast(
                        records, handle.subscribers, handle.room.committed, handle.forms, self._overflow
                    )
                except Exception:
                    logger.exception("broadcast_failed", room=handle.room.id, first=records[0]["seq"])
        outboxes, self._pending_outboxes = self._pending_outboxes, {}
        for outbox in outboxes:
            try:
                outbox.flush()
            except Exception:
                logger.exception("flush_failed")

    def send_frame(self, conn: Connection, frame: dict[str, Any]) -> None:
        self._send(conn, frame)

    def _send(self, conn: Connection, frame: dict[str, Any]) -> None:
        if frame.get("t") == "error":
            self.metrics.errors.labels(frame["code"]).inc()
        if not conn.outbox.put(protocol.framed(protocol.encode(frame))):
            self._overflow(conn)

    def _overflow(self, sub: Connection) -> None:
        if not sub.closing:
            logger.info("slow_client_closed", conn=sub.cid, queued=len(sub.outbox))
            self.metrics.closes.labels(str(protocol.CLOSE_SLOW)).inc()
            sub.close(protocol.CLOSE_SLOW, "Too slow: the send queue overflowed. Resume from your last seq.")
            # Leave the room now: its close handshake may wait behind a full buffer for a while.
            self._detach(sub)

    def _detach(self, conn: Connection) -> None:
        """Take an admitted socket out of its room (once): no more events, and a leave if it was the last."""
        handle = conn.handle
        if handle is None:
            return
        conn.handle = None
        session = conn.session
        handle.subscribers.pop(conn, None)
        handle.sessions.pop(session, None)
        self.connections.discard(conn)
        self.metrics.connections.set(len(self.connections))
        conn.outbox.close()
        leave = handle.room.disconnect(session)
        if leave is not None:
            self._submit(handle, leave)
        if self.presence is not None and session.id not in handle.room.sockets:
            self.presence.changed(handle)

    async def drain(self) -> None:
        """Wait until every append made so far has been committed (or has failed)."""
        await self._idle.wait()

    # -- sockets -----------------------------------------------------------------------------------------

    async def handler(self, ws: ServerConnection) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._sockets.add(ws)
        self.keepalive.add(ws)
        conn = Connection(ws, self.config, self._schedule_flush)
        # Bound for the rest of this task (websockets runs each connection in a task of its own, whose
        # context dies with it), without a context manager object kept alive per idle socket.
        structlog.contextvars.bind_contextvars(conn=conn.cid)
        address = self.gate.address(ws.remote_address, ws.request.headers if ws.request else None)
        counted = self.gate.enter(address)
        try:
            if not counted:  # handshakes that raced past process_request's check
                await self._refuse(conn, protocol.CLOSE_TRY_LATER, admission.TOO_MANY)
                return
            handle = await self._open(conn)
            if handle is not None:
                await self._serve(handle, conn)
        except ConnectionClosed:
            pass
        except Exception:
            logger.exception("connection_failed", conn=conn.cid)
            if not conn.closing:
                await ws.close(1011, "Internal error.")
        finally:
            if counted:
                self.gate.leave(address)
            self._detach(conn)
            self._handlers.discard(task)
            self._sockets.discard(ws)
            # websockets keeps the exception that ended a socket's frame parser (an oversize or broken
            # frame, a cut mid-frame) on its protocol object, and that exception's traceback holds the
            # parser's frame, which holds the protocol: a cycle, so the socket's objects and buffers
            # waited for a full garbage collection (the only cycles a soak's closed sockets left).
            failed = ws.protocol.parser_exc
            if failed is not None:
                failed.__traceback__ = None

    async def _refuse(self, conn: Connection, code: int, reason: str) -> None:
        logger.info("refused", code=code, reason=reason)
        self.metrics.closes.labels(str(code)).inc()
        conn.closing = True
        await conn.ws.close(code, _reason(reason))

    async def _open(self, conn: Connection) -> RoomHandle | None:
        """Hello, admission and welcome: the room the socket is now subscribed to, or None if refused.

        Everything this step builds (the hello, the token's claims, the welcome and the history records
        in it) is local to it and freed when it returns, so an idle socket keeps none of it.
        """
        ws = conn.ws
        try:
            first = await asyncio.wait_for(ws.recv(), timeout=self.limits.hello_timeout)
        except TimeoutError:
            await self._refuse(conn, protocol.CLOSE_UNAUTHORIZED, "Send a hello first.")
            return None
        try:
            hello = protocol.parse(first, self.limits)
        except protocol.FrameError as exc:
            await self._refuse(
                conn, protocol.CLOSE_UNAUTHORIZED, f"The first frame must be a valid hello: {exc}"
            )
            return None
        if not isinstance(hello, protocol.Hello):
            await self._refuse(conn, protocol.CLOSE_UNAUTHORIZED, "The first frame must be a hello.")
            return None
        if self.stopping:
            await self._refuse(conn, protocol.CLOSE_GOING_AWAY, "The server is shutting down.")
            return None
        wanted_room = self._room_in_query(ws)
        try:
            claims = tokens.verify(self.secret, hello.token, room=wanted_room)
        except tokens.TokenError as exc:
            await self._refuse(conn, protocol.CLOSE_UNAUTHORIZED, exc.reason)
            return None
        handle = await self.room(claims.room) if len(claims.room) <= MAX_ROOM_ID else None
        if handle is None:
            await self._refuse(
                conn, protocol.CLOSE_UNAUTHORIZED, "The token's room does not exist on this server."
            )
            return None
        room = handle.room
        try:
            session, join = room.admit(claims, hello.name, hello.formats)
        except Refused as exc:
            await self._refuse(conn, exc.code, exc.reason)
            return None
        conn.admit(session)
        conn.handle = handle
        if self.presence is not None and room.sockets.get(session.id) == 1:
            self.presence.changed(handle)
        # Subscribed from here on: every event committed later lands in the outbox.
        handle.subscribers[conn] = session
        handle.sessions[session] = conn
        self.connections.add(conn)
        self.metrics.connections.set(len(self.connections))
        structlog.contextvars.bind_contextvars(room=room.id, participant=session.id)
        logger.info("joined", role=session.role, resume=hello.resume is not None)
        if join is not None and not await self._wait(handle, join):
            await self._refuse(conn, 1011, "The server could not store your arrival; try again.")
            return None
        welcome = await self._welcome(handle, session, hello)
        await ws.send(protocol.encode(welcome))
        conn.outbox.start(welcome["seq"], SocketSink(ws))
        return handle

    async def _serve(self, handle: RoomHandle, conn: Connection) -> None:
        """Feed the socket's frames to its room until it closes."""
        ws = conn.ws
        try:
            async for message in ws:
                self._on_message(handle, conn, message)
        finally:
            self._detach(conn)
            logger.info("left", code=ws.close_code)

    async def _wait(self, handle: RoomHandle, pending: Pending) -> bool:
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def finished(error: BaseException | None) -> None:
            if not done.done():
                done.set_result(error is None)

        pending.done.append(finished)
        self._submit(handle, pending)
        return await done

    async def _welcome(self, handle: RoomHandle, session: Session, hello: protocol.Hello) -> dict[str, Any]:
        room = handle.room
        after, upto, recovered = room.history_range(hello.resume)
        # The state as of ``upto``: taken before awaiting the read, while it still matches.
        state = room.committed.wire()
        records = room.recent_between(after, upto)
        if records is None:
            stored = await self.log.read(room.id, after, upto - after)  # upto > after: [] came from memory
            records = [r for r in stored if r["seq"] <= upto]
        if len(records) != upto - after:
            logger.error("history_short", after=after, upto=upto, got=len(records))
            raise RuntimeError("the log returned fewer events than it has committed")
        token = tokens.issue(self.secret, room.id, session.role, sub=session.id, name=session.member.name)
        if not recovered and self.limits.presence_days > 0:
            records = retention.shown(records, int(time.time() * 1000), self.limits.presence_days)
        shown = await old_rolls.view(self.log, room.id, records, room.committed)  # hidden rolls out of memory
        history = fanout.history(records, session, shown, handle.forms)
        welcome = room.welcome(session, token, history, recovered)
        welcome["seq"] = upto
        welcome["state"] = state
        welcome["keys"] = self.keys
        return welcome

    def _on_message(self, handle: RoomHandle, conn: Connection, message: str | bytes) -> None:
        if conn.closing or self.stopping:
            return  # while stopping, nothing new starts; a client resends after it resumes
        conn.frames += 1
        token = REQUEST.set(f"{conn.cid}.{conn.frames}")
        try:
            self._handle_frame(handle, conn, message)
        finally:
            REQUEST.reset(token)

    def _handle_frame(self, handle: RoomHandle, conn: Connection, message: str | bytes) -> None:
        if not conn.bucket.allow():
            if conn.bucket.abusive:
                logger.info("rate_abuse_closed")
                self.metrics.closes.labels(str(protocol.CLOSE_POLICY)).inc()
                conn.close(protocol.CLOSE_POLICY, "Too many frames; slow down.")
                return
            self._send(
                conn,
                protocol.error_frame("rate_limited", "Too many frames; slow down.", _peek_id(message)),
            )
            return
        try:
            frame = protocol.parse(message, self.limits)
        except protocol.FrameError as exc:
            self._send(conn, protocol.error_frame(exc.code, exc.message, exc.request_id))
            return
        if type(frame) is protocol.Reveal and old_rolls.in_log(handle.room, conn.session, frame.seq):
            self.upkeep.reveal_later(handle, conn, frame)  # perhaps an old hidden roll, out of memory
            return
        try:
            actions = handle.room.handle(conn.session, frame)
        except Exception:
            logger.exception("frame_failed", frame=type(frame).__name__)
            request_id = getattr(frame, "id", None)
            self._send(
                conn, protocol.error_frame("internal", "Something went wrong on the server.", request_id)
            )
            return
        if self.retries is not None:
            if self.retries.held_back(handle, conn, frame, actions):
                return
            self.retries.remember(actions, conn, frame)
        self._execute(handle, actions)

    @staticmethod
    def _room_in_query(ws: ServerConnection) -> str | None:
        query = parse_qs(urlsplit(ws.request.path).query) if ws.request is not None else {}
        values = query.get("room")
        return values[0] if values else None

    # -- HTTP ----------------------------------------------------------------------------------------------

    async def process_request(
        self,
        connection: ServerConnection,
        request: Request,
    ) -> Response | None:
        path = urlsplit(request.path).path
        if path == "/ws":
            if self.stopping:  # a handshake that slipped in while the listening socket closed
                return _response(503, STOPPING, "text/plain; charset=utf-8")
            refused = self.gate.refusal(connection.remote_address, request.headers)
            if refused is not None:
                logger.info("handshake_refused", status=refused[0], origin=request.headers.get("Origin"))
                return _response(refused[0], f"{refused[1]}\n".encode(), "text/plain; charset=utf-8")
            return None
        if path == "/healthz":
            body = json.dumps(
                {
                    "status": "ok",
                    "rooms": len(self.rooms),
                    "connections": len(self.connections),
                    "uptime": round(time.time() - self.started, 3),
                    "loop_lag": self.lag.summary(),
                }
            ).encode()
            return _response(200, body, "application/json")
        if path == "/metrics":
            return _response(200, self.metrics.render(), METRICS_TYPE)
        if path in (foundry.MANIFEST_PATH, foundry.ZIP_PATH):
            return await self._foundry(path, request)
        if path.startswith(campaign_io.EXPORT_PREFIX):
            status, body, kind = await campaign_io.export_download(self, request, path)
            return _response(status, body, kind)
        if path == KEYS_PATH:
            # Public and the same for everyone: any page or tool may fetch it, and caches may keep it a
            # while (a rotation only adds a key, and takes effect when the server restarts).
            return _response(
                200,
                self._jwks,
                "application/jwk-set+json",
                cache="public, max-age=300",
                cors=True,
            )
        file = static.resolve(path)
        if file is not None:
            try:
                data = await asyncio.to_thread(file.read_bytes)
            except OSError:
                return _response(404, b"Not found.\n", "text/plain; charset=utf-8")
            return _response(200, data, static.content_type(file))
        if path in static.PAGES:
            return _response(404, NOT_BUILT, "text/plain; charset=utf-8")
        return _response(404, b"Not found.\n", "text/plain; charset=utf-8")

    async def _foundry(self, path: str, request: Request) -> Response:
        """The Foundry module's manifest or zip, with addresses that name this relay as it was reached."""
        base = self.config.public_url or _request_base(request) or self.public_base
        sources = foundry.installed_sources()
        try:
            if path == foundry.MANIFEST_PATH:
                body = json.dumps(foundry.manifest(sources, base), indent=2).encode()
                return _response(200, body, "application/json", cors=True)
            data = self._foundry_zips.get(base)
            if data is None:
                data = await asyncio.to_thread(foundry.package, sources, base)
                if len(self._foundry_zips) >= FOUNDRY_ZIPS_KEPT:  # the oldest goes
                    del self._foundry_zips[next(iter(self._foundry_zips))]
                self._foundry_zips[base] = data
        except foundry.FoundryPackageError as exc:
            logger.warning("foundry_package_unavailable", reason=str(exc))
            return _response(404, f"{exc}\n".encode(), "text/plain; charset=utf-8")
        return _response(200, data, "application/zip")

    async def shutdown(self, server: Server) -> None:
        """Stop accepting, finish the appends under way (their acks and events go out), close with 1001."""
        self.stopping = True
        server.close(close_connections=False)
        await self.drain()
        for _ in range(3):  # the broadcast and outbox flushes the last commits scheduled
            await asyncio.sleep(0)
        closing = [
            ws.close(protocol.CLOSE_GOING_AWAY, "The server is shutting down; reconnect and resume.")
            for ws in list(self._sockets)
        ]
        await asyncio.gather(*closing, return_exceptions=True)
        if self._handlers:
            await asyncio.wait(list(self._handlers))  # run() bounds the whole of shutdown
        await server.wait_closed()


class SocketSink:
    """An outbox's view of a websockets connection: raw writes of pre-framed messages.

    Server frames are unmasked and we never fragment or compress (``compression=None``), so a framed
    message is the same bytes for every socket and can go straight to the transport, after anything
    websockets itself still has to send (a pong, say). Flow control is websockets' own: ``paused`` is
    set while the transport's buffer is above its high-water mark and ``drain`` waits for it to empty.
    """

    __slots__ = ("ws",)

    def __init__(self, ws: ServerConnection) -> None:
        self.ws = ws

    def ready(self) -> bool:
        return self.ws.protocol.state is State.OPEN and not self.ws.paused

    def write(self, chunks: list[bytes]) -> None:
        pending = self.ws.protocol.data_to_send()
        if pending:
            if not all(pending):  # an end-of-stream marker: let websockets handle its own shutdown
                self.ws.send_data()
                return
            chunks = [*pending, *chunks]
        self.ws.transport.write(b"".join(chunks))

    async def writable(self) -> bool:
        if self.ws.protocol.state is not State.OPEN:
            return False
        try:
            await self.ws.drain()
        except ConnectionClosed:
            return False
        return self.ws.protocol.state is State.OPEN


def _peek_id(message: str | bytes) -> str | None:
    try:
        raw = protocol.decode(message)
    except protocol.FrameError:
        return None
    rid = raw.get("id")
    return rid if isinstance(rid, str) and len(rid) <= 64 else None


def _response(
    status: int, body: bytes, content_type: str, *, cache: str = "no-cache", cors: bool = False
) -> Response:
    phrase = http.HTTPStatus(status).phrase
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Connection", "close"),
            ("Content-Length", str(len(body))),
            ("Content-Type", content_type),
            ("Cache-Control", cache),
            ("X-Content-Type-Options", "nosniff"),
        ]
    )
    if cors:
        headers["Access-Control-Allow-Origin"] = "*"
    return Response(status, phrase, headers, body)


#: Foundry zips kept, one per address the module was fetched by: a relay is reached by a few (its public
#: name, a LAN address, localhost), and a zip is about 80 KB, so Host headers made up by the thousand must
#: not each keep one.
FOUNDRY_ZIPS_KEPT = 8
#: A Host (or X-Forwarded-Host) that may name this relay in a manifest: a DNS name or IPv4 address, or an
#: IPv6 address in brackets, and an optional port.
_HOST = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\])"  # a name; an IPv6 address
    r"(?::[0-9]{1,5})?"  # a port
)


def _request_base(request: Request) -> str | None:
    """This server's address as the request reached it (behind a proxy, as the proxy says it was reached);
    None when the request names no host that could be one."""
    host = request.headers.get("X-Forwarded-Host") or request.headers.get("Host")
    host = host.split(",")[0].strip() if host else ""
    if not _HOST.fullmatch(host):
        return None
    scheme = request.headers.get("X-Forwarded-Proto", "http").split(",")[0].strip()
    return f"{'https' if scheme == 'https' else 'http'}://{host}"


#: Young container objects allocated between collections of the youngest generation (CPython's default
#: is 700, which under load ran a collection every few rolls; each roll's dicts are freed by reference
#: counting, so a collection finds almost nothing).
GC_YOUNG = 10_000


def settle_gc() -> None:
    """Keep the cyclic collector off the hot path of a long-running server process.

    Everything alive once the server has started (modules, the rules tables, configuration) is frozen
    out of later collections: a full collection walked all of it, pausing the event loop 26 to 49 ms
    in the latency benchmark, whose p99 is about 30 ms. The youngest generation is collected less
    often. The server's process calls this; a library user's own process keeps its
    settings.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG, middle, old)


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"ws://{shown}:{port}/ws"


async def run(
    config: Config,
    stop: asyncio.Event,
    *,
    resolve: Resolver | None = None,
    on_ready: Callable[[Server, Relay], None] | None = None,
    keyring: Keyring | None = None,
) -> bool:
    """Serve until ``stop`` is set, then close sockets with 1001, finish appends and close the log.

    Stopping takes at most ``limits.drain_timeout`` seconds (then the log is closed, which still commits
    what its writer holds); the result says whether everything finished within it.

    ``keyring`` signs events; by default the data folder's (or ``TABLERELAY_SIGNING_KEY``), unless the
    ``signing`` setting is off.
    """
    secret = tokens.load_secret(config.data, config.secret)
    if keyring is None and config.signing:
        keyring = load_keyring(config.data, config.signing_key)
    log = await stores.open_log(config)
    clean = True
    nonces = None
    if keyring is not None and config.signing_nonces == "ahead":
        nonces = await NoncePool.start()
        keyring = keyring.with_nonces(nonces.take)
    relay = Relay(config, log, secret, resolve=resolve, keyring=keyring)
    relay.nonces = nonces
    if isinstance(log, SqliteLog):
        log.on_commit = relay.metrics.batch.observe
    elif log.shared:  # the cluster store (nats-py imported only then)
        from relay.shell.cluster.presence import Presence
        from relay.storage.nats import NatsLog

        assert isinstance(log, NatsLog)
        relay.presence = Presence(relay, log, config.node)
        try:
            await relay.presence.start()
        except Exception as exc:
            await log.close()
            if nonces is not None:
                await nonces.close()
            raise stores.StoreUnusable(f"Cannot set up the presence buckets on NATS: {exc}.") from exc
    try:
        async with serve(
            relay.handler,
            config.host,
            config.port,
            process_request=relay.process_request,
            compression=None,
            max_size=config.limits.max_frame,
            max_queue=64,
            server_header="tablerelay",
            ping_interval=None,  # relay.shell.keepalive pings instead: one timer, not a task per socket
            ping_timeout=None,
            close_timeout=10,
        ) as server:
            port = server.sockets[0].getsockname()[1] if server.sockets else config.port
            relay.public_base = public.public_base(config, (config.host, port))
            try:
                public.record_serving(config.data, relay.public_base)
            except OSError as exc:  # only the links other commands print suffer; serving goes on
                logger.warning("cannot_record_address", data=str(config.data), error=str(exc))
            logger.info(
                "listening",
                host=config.host,
                port=port,
                url=_url(config.host, port),
                public_url=relay.public_base,
                event_loop=type(asyncio.get_running_loop()).__module__.split(".")[0],
            )
            if on_ready is not None:
                on_ready(server, relay)
            lag = asyncio.get_running_loop().create_task(relay.lag.run())
            tending = asyncio.get_running_loop().create_task(relay.upkeep.run())
            try:
                await stop.wait()
            finally:
                lag.cancel()
                tending.cancel()
                await relay.keepalive.close()
            logger.info("stopping", connections=len(relay.connections))
            begun = time.monotonic()
            bound = config.limits.drain_timeout
            try:
                await asyncio.wait_for(relay.shutdown(server), bound)
            except TimeoutError:
                clean = False
                logger.error("drain_timeout", seconds=bound, appends_in_flight=len(relay._inflight))
        try:
            await asyncio.wait_for(relay.drain(), max(1.0, bound - (time.monotonic() - begun)))
        except TimeoutError:
            clean = False
            logger.error("drain_timeout", seconds=bound, appends_in_flight=len(relay._inflight))
    finally:
        if relay.nonces is not None:
            await relay.nonces.close()
        if relay.presence is not None:
            await relay.presence.close()
        public.forget_serving(config.data)
        await log.close()  # the writer commits every append already handed to it first
        logger.info("stopped", clean=clean)
    return clean
