"""A campaign's life cycle on the command line: ``tablerelay room import``, ``room archive``, ``room delete``.

(``room export`` lives in ``relay.ops.commands``; ``--stored`` writes what ``import`` takes.)

- Import checks everything before it stores anything: the file is a stored export, every signature
  verifies (with the file's keys, or ``--keys``), seqs run 1, 2, 3 … without a hole up to the header's
  last seq, and ``relay.core.records.checked_fold`` holds every record to what the server writes (its kind's
  fields, a hidden roll's seal opening to the roll, a reveal publishing that seal, epochs in spans, a roll
  that renders) and folds them as the server would. A room id that already exists is refused: nothing is
  merged into or over an existing room. The room's secrets, when the file carries them, are stored with it;
  when it does not, its open dice seed is abandoned (``relay.ops.room_move``).
- Archive appends an ``archive`` event, so the room is read-only wherever its log is read. With a server
  serving the data folder, the command asks that server over its WebSocket (as an operator with a GM
  token), since a second writer beside a running server would fight it over the next seq.
- Delete removes the room and its events for good. It asks first (type the room id), refuses without a
  terminal unless given ``--yes``, and refuses while a server serves the data folder (the server holds the
  room in memory and would keep serving it).
- With ``--store nats://...`` the same commands work on the cluster store (``relay.ops.nats_campaign``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
from collections.abc import Callable
from typing import Any

from relay.core import records
from relay.core.formats import with_numbers
from relay.core.info import RoomInfo
from relay.core.state import RoomState
from relay.ops import nats_campaign, room_move
from relay.ops.campaign_parts import OPERATOR, archive_record, confirm_delete, imported
from relay.ops.console import InputError, command_config, export_file, fail, shown_date
from relay.settings.config import ConfigError
from relay.shell import public
from relay.storage import exports
from relay.storage.base import Conflict, RoomExists, RoomLimitReached
from relay.storage.sqlite.db import (
    append_sync,
    connect,
    delete_room_sync,
    get_room_sync,
    import_room_sync,
    state_sync,
)
from relay.trust import tokens


def _cluster(config: Any) -> bool:
    from relay.storage import stores

    return stores.is_cluster(config)


# -- import ------------------------------------------------------------------------------------------------


ImportRefused = room_move.ImportRefused


def checked_records(export: exports.Export, keys: Any = None) -> tuple[RoomInfo, list[dict[str, Any]]]:
    """The room and its records from a stored export, once everything about them checks out."""
    info, stored, _ = checked_room(export, keys)
    return info, stored


def checked_room(
    export: exports.Export, keys: Any = None
) -> tuple[RoomInfo, list[dict[str, Any]], RoomState]:
    """``checked_records``, and the room they fold into."""
    if export.form != "stored":
        raise ImportRefused(
            "this is a public export (hidden rolls sealed, no nonces): only an export made with "
            "'tablerelay room export ROOM --stored' holds everything a room needs"
        )
    problems = exports.failures(export, keys)
    if problems:
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        raise ImportRefused(f"the export does not verify: {shown}")
    try:
        info = records.room_info(export.room)
    except records.RecordError as exc:
        raise ImportRefused(f"the header's room is not one this server writes: {exc}") from exc
    # The numbers an export leaves out go back beside each roll with fractions, as the room keeps them.
    stored = [with_numbers({k: v for k, v in e.items() if k not in ("kid", "sig")}) for e in export.events]
    try:
        state = records.checked_fold(stored)
    except records.RecordError as exc:
        raise ImportRefused(str(exc)) from exc
    return info, stored, state


def room_import_command(args: argparse.Namespace) -> int:
    try:
        config = command_config(args, writes=True)  # an import may start a new database
    except ConfigError as exc:
        return fail(str(exc))
    try:
        data, keys = export_file(args)
    except InputError as exc:
        return fail(str(exc))
    try:
        export = exports.read(data)
        info, records, state = checked_room(export, keys)
        move = room_move.planned(info, records, state, export.secrets)
    except exports.ExportError as exc:
        return fail(f"{args.file} is not a room export: {exc}.", 1)
    except ImportRefused as exc:
        return fail(f"{args.file} was not imported: {exc}.", 1)
    if _cluster(config):
        return nats_campaign.import_room(config, args.file, records, args.keys, move)
    seeds = move.seeds_to_store()
    with contextlib.closing(connect(config.db_path, config.synchronous)) as conn:
        try:
            import_room_sync(
                conn,
                info,
                [*records, *move.records(seeds)],
                max_rooms=config.limits.max_rooms,
                seeds=seeds,
                kept=move.kept,
            )
        except RoomExists:
            existing = get_room_sync(conn, info.id)
            when = shown_date(existing.created) if existing is not None else "?"
            return fail(
                f"room {info.id} already exists here ({existing.name if existing else '?'!r}, created "
                f"{when}); nothing was imported. Delete it first (tablerelay room delete {info.id}) if the "
                "file should replace it.",
                1,
            )
        except RoomLimitReached as exc:
            return fail(str(exc), 1)
    print(imported(info, len(records), args.keys))
    said = move.said()
    if said:
        print(said)
    return 0


# -- archive -----------------------------------------------------------------------------------------------


def room_archive_command(args: argparse.Namespace) -> int:
    try:
        config = command_config(args, stored=True)
    except ConfigError as exc:
        return fail(str(exc))
    if _cluster(config):
        return nats_campaign.archive_room(config, args.room)
    with contextlib.closing(connect(config.db_path, config.synchronous)) as conn:
        info = get_room_sync(conn, args.room)
        if info is None:
            return fail(f"there is no room {args.room!r} in {config.db_path}; see: tablerelay room list")
        running = public.running_base(config.data)
        if running is not None:
            secret = tokens.load_secret(config.data, config.secret)
            return _archive_through(running, info, secret)
        state = state_sync(conn, info.id)
        if state.archived:
            print(f"Room {info.id} is already archived.")
            return 0
        now = int(datetime.datetime.now(tz=datetime.UTC).timestamp() * 1000)
        try:
            append_sync(conn, info.id, [archive_record(state, info, now)], state.seq)
        except Conflict:
            return fail("the room changed while it was being archived; run the command again.", 1)
    print(f"Room {info.name!r} ({info.id}) is archived: read-only, its history still viewable.")
    return 0


def _archive_through(base: str, info: RoomInfo, secret: bytes) -> int:
    """Archive through the running server: it alone writes its rooms' logs."""
    import msgpack
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect as ws_connect

    url = "ws" + base[len("http") :] + "/ws" if base.startswith("http") else base
    token = tokens.issue(secret, info.id, "gm", sub=OPERATOR["id"], name=OPERATOR["name"], ttl=300)
    send: Callable[[dict[str, Any]], None]
    try:
        with ws_connect(url, open_timeout=10, close_timeout=2) as ws:
            send = lambda frame: ws.send(msgpack.packb(frame, use_bin_type=True))  # noqa: E731
            send({"t": "hello", "v": 1, "token": token})
            while True:
                message = ws.recv(10)
                if not isinstance(message, bytes):
                    continue
                frame = msgpack.unpackb(message, raw=False)
                if frame.get("t") == "welcome":
                    if frame.get("archived"):
                        print(f"Room {info.id} is already archived.")
                        return 0
                    send({"t": "archive", "id": "cli-archive"})
                elif frame.get("id") == "cli-archive" and frame.get("t") == "ack":
                    break
                elif frame.get("t") == "error" and frame.get("id") == "cli-archive":
                    return fail(f"the server refused: {frame.get('message')}", 1)
    except (OSError, TimeoutError, WebSocketException) as exc:
        return fail(f"the server at {base} serves this data folder but could not be asked: {exc}", 1)
    print(f"Room {info.name!r} ({info.id}) is archived (by the server at {base}): read-only from now on.")
    return 0


# -- delete ------------------------------------------------------------------------------------------------


def room_delete_command(args: argparse.Namespace, ask: Callable[[str], str] = input) -> int:
    try:
        config = command_config(args, stored=True)
    except ConfigError as exc:
        return fail(str(exc))
    if _cluster(config):
        return nats_campaign.delete_room(config, args.room, args.yes, ask)
    with contextlib.closing(connect(config.db_path, config.synchronous)) as conn:
        info = get_room_sync(conn, args.room)
        if info is None:
            return fail(f"there is no room {args.room!r} in {config.db_path}; see: tablerelay room list")
        running = public.running_base(config.data)
        if running is not None:
            return fail(
                f"a server ({running}) is serving this data folder and holds the room; stop it first, or "
                "archive the room instead (tablerelay room archive), which works while it runs.",
                1,
            )
        seq = state_sync(conn, info.id).seq
        refused = confirm_delete(info, seq, args.yes, ask)
        if refused is not None:
            return refused
        delete_room_sync(conn, info.id)
    print(f"Deleted room {info.name!r} ({info.id}) and its {seq} events.")
    return 0
