"""Connecting to the NATS cluster and setting up what the cluster log needs: the first connection (every
server tried a few times, credentials, TLS, its failure told in one sentence), the events stream and the
key-value buckets (made if missing, idempotently), and waiting out a cluster still electing its leaders.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext, api
from nats.js.kv import KeyValue

from relay.settings.logs import get_logger
from relay.storage.nats.stream import ROOMS_BUCKET, STREAM, SUBJECTS

logger = get_logger("relay.log.nats")

#: JetStream's error code for replicas asked of a server that is not in a cluster.
NOT_CLUSTERED = 10074
#: Seconds a first node waits for a just-started cluster to have room for 3 replicas.
FORMING = 10.0
#: Seconds the first connection may take, every server tried a few times.
CONNECT_PATIENCE = 20.0
#: Seconds to wait for a just-started cluster's JetStream to answer.
READY_TIMEOUT = 30.0

T = TypeVar("T")


class BucketUnsettled(Exception):
    """A KV bucket JetStream would not make (it exists, or is being made) but cannot show yet."""

    def __init__(self, bucket: str, refusal: nats.js.errors.Error) -> None:
        said = refusal.description or type(refusal).__name__
        super().__init__(f"the bucket {bucket} could not be made ({said}) and is not there")


#: JetStream's answers while a just-started cluster, or a stream or bucket just made, elects its leader: they
#: pass on their own, so setting up waits them out (``patiently``).
NOT_READY: tuple[type[Exception], ...] = (
    TimeoutError,
    nats.errors.TimeoutError,
    nats.js.errors.ServiceUnavailableError,
    nats.js.errors.NoStreamResponseError,
    BucketUnsettled,
)


async def patiently(attempt: Callable[[], Awaitable[T]], timeout: float = READY_TIMEOUT) -> T:
    """``attempt()``, tried again every quarter second while JetStream is not ready (``NOT_READY``), for
    ``timeout`` seconds at most; then its last error is raised."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await attempt()
        except NOT_READY:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.25)


class StoreError(Exception):
    """The store address or the NATS cluster cannot be used; the message is a sentence for the operator."""


def servers(store: str) -> list[str]:
    """The server addresses of a ``--store`` value: ``nats://h:p[,nats://h:p...]`` (or ``tls://``)."""
    urls = [part.strip() for part in store.split(",") if part.strip()]
    if not urls:
        raise StoreError("The store address names no NATS server.")
    for url in urls:
        if not url.startswith(("nats://", "tls://")):
            raise StoreError(f"A NATS store address starts with nats:// or tls://; got {url!r}.")
    return urls


def shown(store: str) -> str:
    """The store address as it may appear in messages and logs: passwords masked."""
    return re.sub(r"(://[^:/@,]+):[^@/,]*@", r"\1:***@", store)


@dataclass(frozen=True)
class Connected:
    """A connection to the cluster with what the log needs set up: the rooms bucket, the replica count the
    stream has, and the event that says the disconnection that follows is expected (set when closing)."""

    nc: NatsClient
    js: JetStreamContext
    rooms: KeyValue
    replicas: int
    closing: asyncio.Event


async def connect(
    store: str, *, creds: str | None, ca: str | None, replicas: int, max_bytes: int = 0
) -> Connected:
    """Connect, and create the stream and the rooms bucket if missing (idempotently); ``StoreError`` with
    one sentence when the servers or JetStream cannot be used. ``replicas`` and ``max_bytes`` as
    ``NatsLog.connect``."""
    options: dict[str, Any] = {
        "servers": servers(store),
        "connect_timeout": 3,
        # A few tries per server for the first connection (a wrong password must not spin forever);
        # once connected, reconnecting never gives up (set below).
        "max_reconnect_attempts": 2,
        "reconnect_time_wait": 0.5,
        "allow_reconnect": True,
        "name": "tablerelay",
    }
    if creds:
        if not os.path.isfile(creds):
            raise StoreError(f"The NATS credentials file {creds} does not exist.")
        options["user_credentials"] = creds
    if ca:
        options["tls"] = _tls_context(ca)
    closing = asyncio.Event()
    first: list[Exception] = []  # errors of the first connection, told in one sentence if it fails
    options.update(_connection_callbacks(shown(store), closing.is_set, first))
    try:
        nc = await _first_connection(options, first)
    except (OSError, TimeoutError, nats.errors.Error) as exc:
        cause = _telling(first) or exc
        reason = str(cause).strip(". ") or type(cause).__name__
        raise StoreError(f"Cannot reach the NATS servers at {shown(store)}: {reason}.") from exc
    first.append(_CONNECTED)
    nc.options["max_reconnect_attempts"] = -1
    js = nc.jetstream(timeout=5)

    async def set_up() -> tuple[int, KeyValue]:
        count = await _ensure_stream(js, replicas)
        if max_bytes > 0:
            await _limit_stream(js, max_bytes)
        return count, await ensure_bucket(js, ROOMS_BUCKET, count)

    try:
        count, kv = await patiently(set_up)
    except BucketUnsettled as exc:
        await nc.close()
        raise StoreError(f"JetStream is not usable on {shown(store)}: {exc}.") from exc
    except NOT_READY as exc:
        await nc.close()
        waited = f"{READY_TIMEOUT:.0f} s"
        raise StoreError(f"JetStream on {shown(store)} did not answer within {waited}.") from exc
    except (nats.js.errors.Error, StoreError) as exc:
        await nc.close()
        raise StoreError(f"JetStream is not usable on {shown(store)}: {exc}.") from exc
    return Connected(nc, js, kv, count, closing)


_CONNECTED = Exception("connected")


def _telling(errors: list[Exception]) -> Exception | None:
    """The error of a failed first connection that says most: a refused login or certificate rather than
    the reset connection the server follows it with."""
    for error in errors:
        if isinstance(error, (nats.errors.AuthorizationError, ssl.SSLError)):
            return error
        if "authoriz" in str(error).lower():
            return error
    return errors[-1] if errors else None


async def _first_connection(options: dict[str, Any], first: list[Exception]) -> NatsClient:
    """``nats.connect``, given up on a certificate the CA does not vouch for (not something a retry
    mends) or after CONNECT_PATIENCE seconds: nats-py retries a failed TLS handshake by waiting, for ever,
    on the broken connection."""
    connecting = asyncio.ensure_future(nats.connect(**options))
    deadline = time.monotonic() + CONNECT_PATIENCE
    while not connecting.done():
        if any(isinstance(exc, ssl.SSLError) for exc in first) or time.monotonic() > deadline:
            connecting.cancel()
            with contextlib.suppress(BaseException):
                await connecting
            raise TimeoutError("no connection")
        await asyncio.wait({connecting}, timeout=0.05)
    return connecting.result()


def _tls_context(ca: str) -> ssl.SSLContext:
    """Checks the servers' certificates against ``ca`` (a PEM file) instead of the system's CAs."""
    try:
        return ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise StoreError(f"The NATS CA file {ca} cannot be read as PEM certificates: {exc}.") from exc


def _connection_callbacks(store: str, closing: Callable[[], bool], first: list[Exception]) -> dict[str, Any]:
    """nats-py's connection events as log lines (by default it prints tracebacks to stderr). Until the
    first connection is made (``first`` ends with ``_CONNECTED``), errors are kept for the caller instead."""

    async def error(exc: Exception) -> None:
        if not first or first[-1] is not _CONNECTED:
            first.append(exc)
            return
        logger.warning("nats_error", store=store, error=str(exc) or type(exc).__name__)

    async def disconnected() -> None:
        if not closing():
            logger.warning("nats_disconnected", store=store)

    async def reconnected() -> None:
        logger.info("nats_reconnected", store=store)

    return {"error_cb": error, "disconnected_cb": disconnected, "reconnected_cb": reconnected}


def _stream_config(replicas: int) -> api.StreamConfig:
    return api.StreamConfig(
        name=STREAM,
        subjects=[SUBJECTS + ">"],
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        num_replicas=replicas,
        duplicate_window=120.0,  # seconds a Msg-Id is remembered: far longer than any append's retries
        allow_direct=True,
        discard=api.DiscardPolicy.OLD,
    )


async def _limit_stream(js: JetStreamContext, max_bytes: int) -> None:
    """Give the events stream the byte limit ``max_bytes``, with discard policy new: a full stream refuses
    new messages (``relay.storage.nats.log`` answers ``StoreFull``) rather than dropping its oldest ones,
    which would lose acknowledged events. Idempotent: a stream that has both already is left alone."""
    info = await js.stream_info(STREAM)
    config = info.config
    if config.max_bytes == max_bytes and config.discard == api.DiscardPolicy.NEW:
        return
    config.max_bytes = max_bytes
    config.discard = api.DiscardPolicy.NEW
    await js.update_stream(config)
    logger.info("nats_stream_limited", stream=STREAM, max_bytes=max_bytes)


async def _existing_replicas(js: JetStreamContext) -> int | None:
    try:
        info = await js.stream_info(STREAM)
    except nats.js.errors.NotFoundError:
        return None
    return int(info.config.num_replicas or 1)


async def _ensure_stream(js: JetStreamContext, replicas: int) -> int:
    """The events stream, created if missing; returns its replica count (what the bucket should use).

    ``replicas`` 0: 3, unless the server is not clustered, or 3 replicas still find no room after
    FORMING seconds (a cluster of fewer than 3 servers; a cluster just started may still be gathering its
    servers, hence the wait): then 1.
    """
    existing = await _existing_replicas(js)
    if existing is not None:
        return existing
    count = replicas or 3
    patience = time.monotonic() + FORMING
    while True:
        try:
            await js.add_stream(_stream_config(count))
            return count
        except nats.js.errors.APIError as exc:
            existing = await _existing_replicas(js)
            if existing is not None:  # made by another node meanwhile
                return existing
            if replicas or count == 1:
                raise StoreError(f"Cannot create the JetStream stream {STREAM}: {exc}.") from exc
            if exc.err_code == NOT_CLUSTERED or time.monotonic() > patience:
                count = 1
            else:
                await asyncio.sleep(0.5)


async def bucket_subjects(js: JetStreamContext, bucket: str, filter: str | None = None) -> list[str]:
    """The subjects holding messages in a KV bucket's stream (one request, no consumer)."""
    info = await js.stream_info(f"KV_{bucket}", subjects_filter=filter or f"$KV.{bucket}.>")
    return list((info.state.subjects or {}).keys())


async def ensure_bucket(js: JetStreamContext, name: str, replicas: int, *, ttl: float = 0) -> KeyValue:
    """KV bucket ``name`` (one value per key; ``ttl`` seconds before a key expires, 0: never), made if
    missing."""
    with contextlib.suppress(nats.js.errors.BucketNotFoundError, nats.js.errors.NotFoundError):
        return await js.key_value(name)
    try:
        return await js.create_key_value(bucket=name, history=1, replicas=replicas, ttl=ttl or None)
    except nats.js.errors.BadRequestError as refusal:
        # Made by another node meanwhile, or by our own earlier try whose answer timed out: in a cluster the
        # refusal can come while the stream is still being made, before its info is found.
        try:
            return await js.key_value(name)
        except nats.js.errors.BucketNotFoundError:
            raise BucketUnsettled(name, refusal) from refusal


class LazyBucket:
    """A KV bucket made on first use (a store that never needs it never has one), waiting out a JetStream
    that is not ready for it yet (a bucket another node has just made)."""

    def __init__(self, js: JetStreamContext, name: str, replicas: int) -> None:
        self.js = js
        self.name = name
        self.replicas = replicas
        self._kv: KeyValue | None = None

    async def bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await patiently(lambda: ensure_bucket(self.js, self.name, self.replicas))
        return self._kv
