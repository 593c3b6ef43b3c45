"""Which event log a command uses: the data folder's SQLite file, or a NATS JetStream cluster (--store)."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from relay.core.info import RoomInfo
from relay.settings import logs
from relay.settings.config import Config, ConfigError
from relay.storage.base import EventLog, Record
from relay.storage.sqlite.db import check_on_loop
from relay.storage.sqlite.log import SqliteLog
from relay.storage.sqlite.writer import WriterUnusable

SQLITE = "sqlite"
SQLITE_WRITERS = ("auto", "loop", "thread", "process")
#: A cluster node's name: a key token in the NATS buckets (relay.shell.cluster.presence).
NODE_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
T = TypeVar("T")


def is_cluster(config: Config) -> bool:
    return config.store.strip().lower() != SQLITE


def check(config: Config) -> None:
    """Refuse a store setting that cannot work, with one sentence (raises ``ConfigError``)."""
    if config.sqlite_writer not in SQLITE_WRITERS:
        raise ConfigError(
            f"sqlite_writer must be auto, loop, thread or process; got {config.sqlite_writer!r}."
        )
    if config.sqlite_writer == "loop":
        try:
            check_on_loop(config.synchronous)
        except ValueError as exc:
            raise ConfigError(f"{exc}.") from exc
    if not is_cluster(config):
        return
    from relay.storage.nats.connect import StoreError, servers

    try:
        servers(config.store)
    except StoreError as exc:
        raise ConfigError(f"--store must be sqlite or nats://HOST:PORT[,...]: {exc}") from exc
    if config.replicas < 0:
        raise ConfigError(f"--replicas must be 0 (automatic) or more; got {config.replicas}.")
    if config.node is not None and not NODE_NAME.fullmatch(config.node):
        raise ConfigError(
            f"TABLERELAY_NODE must be 1 to 32 letters, digits, '-' or '_'; got {config.node!r}."
        )


def check_stored(config: Config) -> None:
    """A command that reads or changes what a server stored refuses a data folder with no database instead
    of making an empty one there: a mistyped --data would list no rooms, or leave behind a secret and a
    signing key that no server uses. (``serve``, ``room create``, ``room import`` and ``restore`` start
    a new database where there is none.) Raises ``ConfigError``."""
    if not is_cluster(config) and not config.db_path.is_file():
        raise ConfigError(no_database(config.db_path))


def check_data_folder(config: Config, *, writes: bool) -> None:
    """Refuse a data folder the command cannot use, with a sentence (``ConfigError``): a file where the
    folder should be, and for a command that writes there (``writes``: serve, room create and import,
    restore), one it cannot make or write in (a read-only or virtual file system). A NATS store keeps its
    rooms elsewhere, and its nodes' keys come from the environment: nothing is checked for it."""
    if is_cluster(config):
        return
    data = config.data
    if data.exists() and not data.is_dir():
        raise ConfigError(f"The data folder {str(data)!r} is a file, not a folder; check --data.")
    if not writes:
        return
    probe = data / f".tablerelay-probe-{os.getpid()}"
    try:
        data.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"The data folder {str(data)!r} cannot be written: {exc.strerror or exc}.") from exc


def no_database(path: Path) -> str:
    return f"There is no database at {path}; check --data (the folder the server uses)."


def commits_on_loop(config: Config) -> bool:
    """Whether the event loop commits to SQLite itself (``sqlite_writer`` loop, or auto without syncs)."""
    writer = config.sqlite_writer
    return writer == "loop" or (writer == "auto" and config.synchronous == "normal")


def sqlite_only(config: Config, what: str) -> None:
    """Commands that work on the data folder's SQLite file refuse a NATS store rather than miss it."""
    if is_cluster(config):
        raise ConfigError(
            f"{what} work on the SQLite store only so far, not on a NATS store"
            " (tablerelay store copy --from nats://... --to sqlite backs one up)."
        )


def check_serving(config: Config) -> None:
    """Every node of a cluster must sign tokens and events with the same keys, so both come from the
    environment (a data folder's own would differ from node to node)."""
    if not is_cluster(config):
        return
    missing = []
    if not config.secret:
        missing.append("TABLERELAY_SECRET")
    if config.signing and not config.signing_key:
        missing.append("TABLERELAY_SIGNING_KEY")
    if missing:
        raise ConfigError(
            f"In cluster mode every node needs the same {' and '.join(missing)} from the environment; "
            "set it on every node and start again."
        )


async def open_log(config: Config, *, follow: bool = True) -> EventLog:
    """The configured log, ready; the caller closes it. ``follow`` False: a one-shot command."""
    if not is_cluster(config):
        if config.sqlite_writer == "process":
            try:
                return await SqliteLog.with_process(config.db_path, synchronous=config.synchronous)
            except WriterUnusable as exc:
                raise StoreUnusable(str(exc)) from exc
        return SqliteLog(config.db_path, synchronous=config.synchronous, on_loop=commits_on_loop(config))
    from relay.storage.nats.connect import StoreError
    from relay.storage.nats.log import NatsLog

    try:
        return await NatsLog.connect(
            config.store,
            creds=config.nats_creds,
            ca=config.nats_ca,
            replicas=config.replicas,
            follow=follow,
            max_bytes=config.nats_max_bytes,
        )
    except StoreError as exc:
        raise StoreUnusable(str(exc)) from exc


class StoreUnusable(Exception):
    """The configured store cannot be reached or set up; the message is a sentence for the operator."""


def check_secret(config: Config) -> None:
    """Tokens made for a cluster must verify on every node: the secret comes from the environment."""
    if is_cluster(config) and not config.secret:
        raise ConfigError(
            "With a NATS store, tokens are signed with the nodes' TABLERELAY_SECRET; set it and try again."
        )


def quiet_logs() -> None:
    """One-shot commands print their results on stdout: the store's log lines go to stderr, errors only."""
    logs.configure("auto", "error")


def run_on(config: Config, work: Callable[[EventLog], Awaitable[T]]) -> T:
    """Run ``work`` against the configured log from a one-shot command (a fresh event loop)."""

    quiet_logs()

    async def main() -> T:
        log = await open_log(config, follow=False)
        try:
            return await work(log)
        finally:
            await log.close()

    return asyncio.run(main())


async def rooms_and_counts(log: EventLog) -> tuple[list[RoomInfo], dict[str, int]]:
    """Every room and its last seq (the ``room list`` of a store)."""
    rooms = await log.list_rooms()
    counts = {room.id: await log.last_seq(room.id) for room in rooms}
    return rooms, counts


async def whole_room(log: EventLog, room: str) -> tuple[RoomInfo, list[Record]] | None:
    """A room and every record it holds, oldest first (None: no such room)."""
    info = await log.get_room(room)
    if info is None:
        return None
    records: list[Record] = []
    while True:
        chunk = await log.read(room, len(records), 5000)
        records.extend(chunk)
        if len(chunk) < 5000:
            return info, records


async def room_and_invites(log: EventLog, room: str) -> tuple[RoomInfo, int] | None:
    """A room and its current invite generation (``token`` signs invites for it); None: no such room."""
    info = await log.get_room(room)
    if info is None:
        return None
    return info, (await log.state(room)).invites
