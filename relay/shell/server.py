"""The I/O shell: a websockets asyncio server around the sans-I/O ``Room``.

Per socket: read the hello, admit it to its room, subscribe its outbox *before* reading the welcome's
history (so no event can fall between history and live delivery; the outbox drops the ones the history
already holds), send the welcome, then feed each frame to the room and carry out what it returns.
Appends complete in commit order through future callbacks on the event loop, so acks and broadcasts go
out in seq order without any task awaiting a socket.

The helpers (``upkeep``, ``cluster.retries``, ``cluster.presence``, ``campaign_io``, ``http.routes``) are
handed this server as the narrow interfaces of ``relay.shell.host``; ``relay.shell.serve`` runs it.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import structlog
from websockets.asyncio.server import Server, ServerConnection
from websockets.exceptions import ConnectionClosed

from relay.core import fair, protocol, retention
from relay.core.actions import (
    Action,
    Append,
    Broadcast,
    KeepWitness,
    Measure,
    Pending,
    PrepareSeed,
    Refused,
    RetireKept,
    Send,
    Session,
    WaitWitnesses,
)
from relay.core.room import Resolver, Room
from relay.core.state import RoomState
from relay.settings.config import Config
from relay.settings.logs import REQUEST, debug_enabled, get_logger
from relay.shell import admission, campaign_io, fanout, old_rolls, public, seeding, upkeep
from relay.shell.cluster import retries
from relay.shell.connection import Connection, RoomHandle, SocketSink, close_reason, peek_id
from relay.shell.fanout import Outbox
from relay.shell.http.routes import Routes
from relay.shell.keepalive import Keepalive
from relay.shell.observe.looplag import LoopLag
from relay.shell.observe.metrics import Fullness, Metrics
from relay.storage.base import Conflict, EventLog, StoreFull
from relay.trust import tokens
from relay.trust.forms import Forms
from relay.trust.nonces import NoncePool
from relay.trust.signing import Keyring

if TYPE_CHECKING:
    from relay.shell.cluster.presence import Presence

logger = get_logger("relay.server")
MAX_ROOM_ID = 64
#: Seconds between keepalive pings, and to wait for each pong before closing with 1011
#: (relay.shell.keepalive).
PING_INTERVAL = 20.0
PING_TIMEOUT = 20.0


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
        self.published_keys = json.dumps({"keys": self.keys}).encode()  # /.well-known/tablerelay-keys.json
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
        self.stopping = False
        # Whether the store has room (a full disk, a stream at its byte limit), for /healthz and the log.
        self.fullness = Fullness()
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
        # Dice seeds stored ahead, and witnessed rolls' timers and stores, for fair dice (spec/fairness.md).
        self.seeds = seeding.Preparer(log, lambda handle: self.rooms.get(handle.room.id) is handle)
        self.routes = Routes(self)  # the HTTP endpoints, answered before a handshake

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
        try:
            seeds = await seeding.load(self.log, room_id, state) if self.config.fair_dice else None
            # Read before the room is reachable: a roller's retry must find its open roll, not roll anew.
            kept = await self.log.kept_rolls(room_id) if seeds is not None and state.pendings else []
        except BaseException:
            self.log.unfollow(room_id)  # ``state`` began keeping the room's events for a follow
            raise
        room = Room(info, state, self.limits, resolve=self.resolve, seeds=seeds)
        if room.fair is not None and self.presence is not None:  # the other nodes' witnesses, kept current
            room.fair.elsewhere = self.presence.witnesses.for_room(room_id)
            await self.seeds.watch(self.rooms, self.execute)  # and the values stored through them
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
        if room.fair is not None and state.pendings:  # witnessed rolls a restart or a node's end left open
            margin = fair.TAKEOVER_MS if self.log.shared else 0
            self.execute(handle, fair.recover(room, room.fair, kept, margin=margin))
        if not self.log.shared:  # with other nodes serving the room, members without a socket may be there
            self.upkeep.sweep_later(handle)
        return handle

    # -- appends and their outcomes ------------------------------------------------------------------

    def submit(self, handle: RoomHandle, pending: Pending) -> None:
        try:
            future = self.log.append(handle.room.id, pending.records, pending.expected, pending.kept)
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
        if self.fullness.episode:
            self.fullness.stored(handle.room.id, pending.last)
        for session, _ in pending.acks:
            conn = handle.sessions.get(session)
            if conn is not None:
                fanout.serve_first(handle.subscribers, conn)  # the roller, by this iteration's broadcast
        try:
            # The acks are queued now and the events, signed, at the end of this iteration (``_tick``):
            # a roller gets its ack and its event in one write.
            self.execute(handle, handle.room.committed_append(pending))
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
        self.execute(handle, handle.room.remote(records))
        for record in records:
            self.metrics.event(record["kind"])
        if self.presence is not None:
            self.presence.answer_leaves(handle, records)
        if self.retries is not None:
            self.retries.caught_up(handle)

    def _failed(self, handle: RoomHandle, pending: Pending, error: BaseException) -> None:
        conflict = isinstance(error, Conflict)
        full = isinstance(error, StoreFull)
        retried = False
        if conflict and self.retries is not None:
            assert isinstance(error, Conflict)
            logger.info("append_lost_race", room=handle.room.id, expected=pending.expected)
            retried = self.retries.take(handle, pending, error)
        elif conflict:
            logger.warning("append_conflict", room=handle.room.id, expected=pending.expected)
        elif full:
            self.fullness.refused(error, handle.room.id)  # logged once, not per refused roll
        else:
            logger.error(
                "append_failed",
                room=handle.room.id,
                expected=pending.expected,
                error=type(error).__name__,
                exc_info=error,
            )
        self.execute(handle, handle.room.failed_append(pending, conflict, full=full))
        if retried:
            return
        for done in pending.done:
            done(error)

    def execute(self, handle: RoomHandle, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                conn = handle.sessions.get(action.session)
                if conn is not None:
                    self.send_frame(conn, action.frame)
            elif isinstance(action, Append):
                self.submit(handle, action.pending)
            elif isinstance(action, Broadcast):
                # Gathered and sent once per loop iteration: the appends one SQLite commit settles all
                # complete in the same iteration, so their events go out as one write per socket.
                handle.outgoing.append(action.record)
                self._pending_rooms[handle] = None
                self._schedule_tick()
            elif isinstance(action, PrepareSeed):
                self.seeds.prepare(handle, action.n)
            elif isinstance(action, WaitWitnesses):
                self.seeds.wait(handle, action, self.execute)
            elif isinstance(action, KeepWitness):
                self.seeds.keep(handle, action, self.execute)
            elif isinstance(action, RetireKept):
                self.seeds.retire(handle, action)
            elif isinstance(action, Measure):
                self.metrics.measure(action.name, action.value)
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
        # A single node's stop stores no leaves: its tables come back to the next start (rejoin_grace).
        leave = handle.room.disconnect(session, leave=self.log.shared or not self.stopping)
        if leave is not None:
            self.submit(handle, leave)
        if self.presence is not None and (session.id not in handle.room.sockets or session.witness):
            self.presence.changed(handle)

    @property
    def appends_in_flight(self) -> int:
        return len(self._inflight)

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
        await conn.ws.close(code, close_reason(reason))

    async def _open(self, conn: Connection) -> RoomHandle | None:
        """Hello, admission and welcome: the room the socket is now subscribed to, or None if refused.

        Everything this step builds (the hello, the token's claims, the welcome and the history records
        in it) is local to it and freed when it returns, so an idle socket keeps none of it.
        """
        ws = conn.ws
        try:
            first = await asyncio.wait_for(ws.recv(), timeout=self.limits.hello_timeout)
        except TimeoutError:
            # Try again later, not 4001: on a starved host a client's hello can arrive late through no fault
            # of its own, and a client gives up for good on 4001 (a deploy's reconnect storm lost 1,476).
            await self._refuse(conn, protocol.CLOSE_TRY_LATER, "Send a hello first.")
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
            session, join = room.admit(claims, hello.name, hello.formats, witness=hello.witness)
        except Refused as exc:
            await self._refuse(conn, exc.code, exc.reason)
            return None
        conn.admit(session)
        conn.handle = handle
        if self.presence is not None and (room.sockets.get(session.id) == 1 or session.witness):
            self.presence.changed(handle)
        # Subscribed from here on: every event committed later lands in the outbox.
        handle.subscribers[conn] = session
        handle.sessions[session] = conn
        self.connections.add(conn)
        self.metrics.connections.set(len(self.connections))
        structlog.contextvars.bind_contextvars(room=room.id, participant=session.id)
        logger.info("joined", role=session.role, resume=hello.resume is not None)
        stored = join is None or await self._wait(handle, join)
        if not stored and not self.fullness.full:  # a full store keeps welcoming: the join is not stored
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
        self.submit(handle, pending)
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
            self.send_frame(
                conn,
                protocol.error_frame("rate_limited", "Too many frames; slow down.", peek_id(message)),
            )
            return
        try:
            frame = protocol.parse(message, self.limits)
        except protocol.FrameError as exc:
            self.send_frame(conn, protocol.error_frame(exc.code, exc.message, exc.request_id))
            return
        if type(frame) is protocol.Reveal and old_rolls.in_log(handle.room, conn.session, frame.seq):
            self.upkeep.reveal_later(handle, conn, frame)  # perhaps an old hidden roll, out of memory
            return
        try:
            actions = handle.room.handle(conn.session, frame)
        except Exception:
            logger.exception("frame_failed", frame=type(frame).__name__)
            request_id = getattr(frame, "id", None)
            self.send_frame(
                conn, protocol.error_frame("internal", "Something went wrong on the server.", request_id)
            )
            return
        if self.retries is not None:
            if self.retries.held_back(handle, conn, frame, actions):
                return
            self.retries.remember(actions, conn, frame)
        self.execute(handle, actions)

    @staticmethod
    def _room_in_query(ws: ServerConnection) -> str | None:
        query = parse_qs(urlsplit(ws.request.path).query) if ws.request is not None else {}
        values = query.get("room")
        return values[0] if values else None

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
