"""``tablerelay store copy``: rooms and their events from one store to another, exactly as stored.

Records are copied as the source holds them (the same MessagePack maps, seqs, epochs and timestamps), so
a room keeps its epoch (clients resume across the move) and every event signs and verifies as before. The
room's dice seeds and what its open witnessed rolls keep (spec/fairness.md) go with it: without them the
target would draw a new seed under a commitment the old one made, and every later roll would fail its check.
A room the target already holds with the same events is skipped; one holding other events is refused.
Either way round: SQLite into NATS (moving to a cluster), or NATS into a SQLite file in a folder (a backup of
the cluster store that ``tablerelay serve --data FOLDER`` can serve).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import sys

from relay.core.info import RoomInfo
from relay.settings.config import ConfigError, load
from relay.storage import stores
from relay.storage.base import EventLog
from relay.storage.sqlite.db import connect
from relay.storage.sqlite.log import SqliteLog

CHUNK = 100  # records per append (one NATS message each)


class CopyError(Exception):
    pass


async def _copy_room(source: EventLog, target: EventLog, info: RoomInfo) -> int:
    """Copy one room; the number of events written."""
    have = await target.last_seq(info.id)
    total = await source.last_seq(info.id)
    existing = await target.get_room(info.id)
    if existing is not None and existing.epoch != info.epoch:
        raise CopyError(f"room {info.id} exists in the target with another epoch; it was not copied.")
    if existing is None:
        await _put_room(target, info)
    if have > total:
        raise CopyError(
            f"room {info.id} has more events in the target ({have}) than in the source ({total})."
        )
    if have:  # a copy interrupted earlier, or done before: what is there must be the source's
        mine = await source.read(info.id, 0, have)
        theirs = await target.read(info.id, 0, have)
        if mine != theirs:
            raise CopyError(f"room {info.id} holds other events in the target; it was not copied.")
    kept = await source.kept_rolls(info.id)
    written = 0
    seq = have
    while seq < total:
        records = await source.read(info.id, seq, CHUNK)
        if not records:
            break
        last = records[-1]["seq"]
        chunk_kept = [k for k in kept if seq < k["pending"] <= last]
        seq = await target.append(info.id, records, seq, chunk_kept)
        written += len(records)
    await _copy_seeds(source, target, info.id)
    return written


async def _copy_seeds(source: EventLog, target: EventLog, room: str) -> None:
    for n, secret in sorted((await source.seeds(room)).items()):
        if await target.ensure_seed(room, n, secret) != secret:
            message = f"room {room} holds another dice seed {n} in the target; its seeds were not copied."
            raise CopyError(message)


async def _put_room(target: EventLog, info: RoomInfo) -> None:
    """Add ``info`` to the target's room directory exactly as it is (its id and epoch kept)."""
    if isinstance(target, SqliteLog):
        with contextlib.closing(connect(target.path, target.synchronous)) as conn:
            conn.execute(
                "INSERT OR IGNORE INTO rooms (id, name, epoch, created, fear_max, hope_max) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (info.id, info.name, info.epoch, info.created, info.fear_max, info.hope_max),
            )
        return
    put = getattr(target, "put_room", None)
    if put is None:
        raise CopyError("the target store cannot take rooms with their ids.")
    await put(info)


async def copy(source: EventLog, target: EventLog) -> list[tuple[RoomInfo, int]]:
    return [(info, await _copy_room(source, target, info)) for info in await source.list_rooms()]


def store_copy_command(args: argparse.Namespace) -> int:
    try:
        base = load(args.config, {"data": args.data})
        source_config = dataclasses.replace(base, store=args.source)
        target_config = dataclasses.replace(base, store=args.target)
        stores.check(source_config)
        stores.check(target_config)
        stores.check_stored(source_config)  # copying from a folder with no database copies nothing
        stores.check_data_folder(target_config, writes=True)
    except ConfigError as exc:
        print(f"tablerelay: {exc}", file=sys.stderr)
        return 2
    if args.source.strip() == args.target.strip():
        print("tablerelay: --from and --to name the same store.", file=sys.stderr)
        return 2

    stores.quiet_logs()

    async def main() -> list[tuple[RoomInfo, int]]:
        source = await stores.open_log(source_config, follow=False)
        try:
            target = await stores.open_log(target_config, follow=False)
            try:
                return await copy(source, target)
            finally:
                await target.close()
        finally:
            await source.close()

    try:
        copied = asyncio.run(main())
    except (CopyError, stores.StoreUnusable) as exc:
        print(f"tablerelay: {exc}", file=sys.stderr)
        return 1
    for info, count in copied:
        print(f"room {info.id} ({info.name}): {count} events copied")
    print(f"{len(copied)} rooms copied from {args.source} to {args.target}.")
    return 0
