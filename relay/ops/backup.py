"""Online backup of the SQLite store, and its restore with a new epoch for every room.

**Backup** (``tablerelay backup DEST``) uses SQLite's online backup API (``sqlite3.Connection.backup``) in
one step: the copy is made inside one read transaction, so it is the database exactly as it was at one
commit, while a server keeps serving and writing beside it (in WAL mode a reader blocks no writer). Every
event acknowledged before the backup began is in it. The copy is written next to ``DEST``, checked with
``PRAGMA integrity_check``, switched out of WAL mode (one self-contained file) and renamed into place, so
``DEST`` is never a half-written file.

**Restore** (``tablerelay restore SRC``, with the server stopped) checks ``SRC`` (SQLite's integrity check,
then every room's events read and folded as the server will read them, ``relay.core.records.checked_fold``),
copies it into the data folder and gives every room a new ``epoch``. Clients that saw events after the backup
point hold seqs the restored log will reuse for other events; with a new epoch their resume no longer
matches, so they get ``recovered: false`` and a fresh state (spec/protocol.md: the epoch changes when the
room's log is lost) rather than a mix of old and new events. The database it replaces is kept beside it as
``tablerelay.sqlite3.before-restore-TIMESTAMP``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from relay.core import records
from relay.ops.console import command_config, fail
from relay.settings.config import ConfigError
from relay.shell import public
from relay.storage import stores
from relay.storage.codec import decode_record

SUFFIXES = ("-wal", "-shm")


class BackupError(Exception):
    """A backup or restore that cannot be done; the message is a sentence for the operator."""


def _stamp() -> str:
    return f"{datetime.datetime.now(datetime.UTC):%Y%m%dT%H%M%SZ}"


def _summary(conn: sqlite3.Connection) -> dict[str, Any]:
    rooms = conn.execute("SELECT COUNT(*) FROM rooms").fetchone()[0]
    events = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    return {"rooms": int(rooms), "events": int(events)}


#: The tables that make a SQLite file a tablerelay database.
TABLES = frozenset({"rooms", "events"})


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _read_only(path: Path) -> sqlite3.Connection:
    """``path`` opened read-only. By a URI built from the path, not pasted into one: a file name holding
    ``?`` or ``#`` would otherwise be read as the URI's query."""
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _check(conn: sqlite3.Connection, what: str) -> None:
    try:
        tables = _tables(conn)
        verdict = conn.execute("PRAGMA integrity_check").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{what} is not a SQLite database: {exc}.") from exc
    if not tables >= TABLES:
        raise BackupError(f"{what} is not a tablerelay database: it has no rooms and events tables.")
    if verdict != "ok":
        raise BackupError(f"{what} failed SQLite's integrity check: {verdict}.")


def _stored(conn: sqlite3.Connection, room: str) -> Iterator[dict[str, Any]]:
    """A room's records as the server reads them, or ``RecordError`` for a row it could not read."""
    for seq, data in conn.execute("SELECT seq, data FROM events WHERE room = ? ORDER BY seq", (room,)):
        try:
            record = decode_record(data)
        except Exception as exc:  # msgpack raises a dozen kinds for bytes that are not MessagePack
            raise records.RecordError(f"event {seq} cannot be read ({type(exc).__name__})") from exc
        if not isinstance(record, dict) or record.get("seq") != seq:
            raise records.RecordError(f"event {seq} does not hold the record of seq {seq}")
        yield record


def _check_rooms(conn: sqlite3.Connection, what: str) -> None:
    """Every room of a backup as the server will load it: a damaged row is refused here, not when a player
    joins. Renderings are not checked: this server wrote every roll (an import checks them)."""
    for (room,) in conn.execute("SELECT id FROM rooms ORDER BY id").fetchall():
        try:
            records.checked_fold(_stored(conn, room), render=False)
        except records.RecordError as exc:
            raise BackupError(f"{what} holds a room that cannot be served: room {room}, {exc}.") from exc


def _copy(source: sqlite3.Connection, target: Path) -> sqlite3.Connection:
    """``source`` copied to ``target`` in one backup step; the open copy, in rollback-journal mode."""
    with contextlib.suppress(FileNotFoundError):
        target.unlink()
    copy = sqlite3.connect(target, isolation_level=None)
    try:
        source.backup(copy)  # pages=-1: everything in one step, one read transaction, one consistent state
        copy.execute("PRAGMA journal_mode = DELETE")
    except BaseException:
        copy.close()
        raise
    return copy


def _check_replaceable(dest: Path, db: Path) -> None:
    """A backup goes where nothing is, or over an earlier backup (a nightly job writing one name): never
    over the live database itself, nor over a file that is not a tablerelay database (a mistyped name)."""
    if not dest.exists():
        return
    if dest.resolve() == db.resolve():
        raise BackupError(f"{dest} is the database being backed up; give the backup another name.")
    if not dest.is_file():
        raise BackupError(f"{dest} exists and is not a file; give the backup another name.")
    try:
        with contextlib.closing(_read_only(dest)) as earlier:
            ours = _tables(earlier) >= TABLES
    except sqlite3.DatabaseError:
        ours = False
    if not ours:
        raise BackupError(
            f"{dest} exists and is not a tablerelay backup, so it is left as it is; give the backup another "
            "name, or a folder (each backup there is named by its time)."
        )


def backup(db: Path, dest: Path) -> dict[str, Any]:
    """Copy the live database ``db`` to ``dest``, consistently, while a server may be writing to it."""
    if not db.is_file():
        raise BackupError(stores.no_database(db))
    dest = dest.expanduser()
    if dest.is_dir():
        dest = dest / f"tablerelay-{_stamp()}.sqlite3"
    if not dest.parent.is_dir():
        raise BackupError(f"The folder {dest.parent} does not exist.")
    _check_replaceable(dest, db)
    partial = dest.with_name(f".{dest.name}.partial")
    source = sqlite3.connect(db, timeout=30.0)
    try:
        source.execute("PRAGMA busy_timeout = 30000")
        taken = datetime.datetime.now(datetime.UTC)
        copy = _copy(source, partial)
    finally:
        source.close()
    try:
        _check(copy, f"The copy {partial}")
        summary = _summary(copy)
    finally:
        copy.close()
    os.replace(partial, dest)
    return {
        "backup": str(dest),
        "taken": taken.isoformat(timespec="seconds"),
        "bytes": dest.stat().st_size,
        **summary,
    }


def restore(src: Path, data: Path) -> dict[str, Any]:
    """Replace the data folder's database with ``src``, every room with a new epoch. The server must be
    stopped."""
    running = public.running_base(data)
    if running is not None:
        raise BackupError(
            f"A server is serving this data folder ({running}); stop it first, then restore, then start it."
        )
    if not src.is_file():
        raise BackupError(f"There is no backup at {src}.")
    db = data / "tablerelay.sqlite3"
    data.mkdir(parents=True, exist_ok=True)
    staging = data / ".tablerelay.sqlite3.restoring"
    source = _read_only(src)
    try:
        _check(source, f"The backup {src}")
        _check_rooms(source, f"The backup {src}")
        copy = _copy(source, staging)
    finally:
        source.close()
    try:
        rooms = [row[0] for row in copy.execute("SELECT id FROM rooms ORDER BY id")]
        copy.execute("BEGIN IMMEDIATE")
        for room in rooms:
            copy.execute("UPDATE rooms SET epoch = ? WHERE id = ?", (secrets.token_hex(8), room))
        copy.execute("COMMIT")
        summary = _summary(copy)
    finally:
        copy.close()
    kept = None
    if db.exists():
        kept = (
            data / f"tablerelay.sqlite3.before-restore-{datetime.datetime.now(datetime.UTC):%Y%m%dT%H%M%SZ}"
        )
        old = sqlite3.connect(db)
        try:
            old.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # what the WAL holds goes into the kept file
        finally:
            old.close()
        os.replace(db, kept)
    for suffix in SUFFIXES:
        with contextlib.suppress(FileNotFoundError):
            Path(f"{db}{suffix}").unlink()
    os.replace(staging, db)
    return {"restored": str(src), "database": str(db), "kept": str(kept) if kept else None,
            "new_epochs": len(rooms), **summary}  # fmt: skip


def backup_command(args: argparse.Namespace) -> int:
    try:
        config = command_config(args)
        stores.sqlite_only(config, "backup and restore")
        summary = backup(config.db_path, Path(args.dest))
    except (ConfigError, BackupError) as exc:
        return fail(str(exc), 1)
    except sqlite3.Error as exc:
        return fail(f"The backup failed: {exc}.", 1)
    _print(
        summary,
        args.json,
        f"Backed up {summary['rooms']} rooms and {summary['events']} events to {summary['backup']}.",
    )
    return 0


def restore_command(args: argparse.Namespace) -> int:
    try:
        config = command_config(args, writes=True)
        stores.sqlite_only(config, "backup and restore")
        summary = restore(Path(args.src).expanduser(), config.data)
    except (ConfigError, BackupError) as exc:
        return fail(str(exc), 1)
    except sqlite3.Error as exc:
        return fail(f"The restore failed: {exc}.", 1)
    kept = f" The database it replaced is kept as {summary['kept']}." if summary["kept"] else ""
    _print(
        summary,
        args.json,
        f"Restored {summary['rooms']} rooms and {summary['events']} events from {summary['restored']}; every "
        f"room has a new epoch, so clients start afresh rather than resume.{kept}",
    )
    return 0


def _print(summary: dict[str, Any], as_json: bool, sentence: str) -> None:
    print(json.dumps(summary) if as_json else sentence)
