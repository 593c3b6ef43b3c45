"""``tablerelay serve``: the server's process, from the listening socket to a clean stop.

``run`` opens the store, starts the nonce child and (on the cluster store) presence, serves the relay
(``relay.shell.server.Relay``) until asked to stop, then drains: sockets closed with 1001, appends under
way finished, the log closed. ``settle_gc`` keeps the cyclic collector off the hot path of that process.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable

from websockets.asyncio.server import Server, serve

from relay.core.room import Resolver
from relay.settings.config import Config
from relay.settings.logs import get_logger
from relay.shell import public, upkeep
from relay.shell.server import Relay
from relay.storage import stores
from relay.storage.sqlite.log import SqliteLog
from relay.trust import tokens
from relay.trust.nonces import NoncePool
from relay.trust.signing import Keyring, load_keyring

logger = get_logger("relay.server")


#: Young container objects allocated between collections of the youngest generation (CPython's default
#: is 700, which under load ran a collection every few rolls; each roll's dicts are freed by reference
#: counting, so a collection finds almost nothing).
GC_YOUNG = 10_000


#: Handshakes the kernel may hold for the listening socket before the event loop accepts them (asyncio's
#: default is 100). After a deploy every client comes back within seconds: with 100, a restart under 1,800
#: sockets overflowed the queue 5,810 times (TcpExt ListenOverflows; each one a handshake dropped and
#: retried by the client's TCP a second or more later). The kernel caps it at ``net.core.somaxconn``
#: (4096 by default since Linux 5.4): docs/deployment.md, "Deploying without dropping tables".
BACKLOG = 4096


def settle_gc() -> None:
    """Keep the cyclic collector off the hot path of a long-running server process.

    Everything alive once the server has started (modules, the rules tables, configuration) is frozen
    out of later collections: a full collection walked all of it, pausing the event loop 26 to 49 ms
    in the latency benchmark, whose p99 is about 30 ms. The youngest generation is collected less
    often, and the upkeep freezes what survives its collections from now on (``relay.shell.upkeep``: so
    no collection walks the sockets and rooms of the hours before). The server's process calls this; a
    library user's own process keeps its settings.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG, middle, old)
    upkeep.freeze_survivors()


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
        from relay.storage.nats.log import NatsLog

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
            process_request=relay.routes.process_request,
            compression=None,
            max_size=config.limits.max_frame,
            max_queue=64,
            server_header="tablerelay",
            ping_interval=None,  # relay.shell.keepalive pings instead: one timer, not a task per socket
            ping_timeout=None,
            close_timeout=10,
            backlog=BACKLOG,
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
                logger.error("drain_timeout", seconds=bound, appends_in_flight=relay.appends_in_flight)
        try:
            await asyncio.wait_for(relay.drain(), max(1.0, bound - (time.monotonic() - begun)))
        except TimeoutError:
            clean = False
            logger.error("drain_timeout", seconds=bound, appends_in_flight=relay.appends_in_flight)
    finally:
        if relay.nonces is not None:
            await relay.nonces.close()
        if relay.presence is not None:
            await relay.presence.close()
        public.forget_serving(config.data)
        await log.close()  # the writer commits every append already handed to it first
        logger.info("stopped", clean=clean)
    return clean
