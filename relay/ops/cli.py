"""The ``tablerelay`` command: serve, room create/list/export, backup, restore, token, store copy, key rotate,
verify, foundry, roll.

Each subcommand's work lives in its own module; this file only parses the command line.
"""

from __future__ import annotations

import argparse
import signal
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tablerelay",
        description="A WebSocket relay for virtual tabletop tables, with server-side dice.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="run the relay server")
    serve.add_argument("--host", help="address to listen on [127.0.0.1] (TABLERELAY_HOST)")
    serve.add_argument("--port", type=int, help="port to listen on [8765] (TABLERELAY_PORT)")
    serve.add_argument("--data", help="data folder [./data] (TABLERELAY_DATA)")
    serve.add_argument("--config", help="a TOML config file (TABLERELAY_CONFIG)")
    serve.add_argument("--log-format", choices=["auto", "json", "console"], help="log line format")
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"], help="log level [info]")
    serve.add_argument(
        "--public-url",
        help="the address people open, e.g. behind a proxy [http://HOST:PORT] (TABLERELAY_PUBLIC_URL)",
    )
    _store_option(serve)
    serve.add_argument(
        "--replicas",
        type=int,
        help="with a NATS store: replicas of its stream and bucket [3 if the cluster has 3 servers, else 1]",
    )

    room = sub.add_parser("room", help="create, list, export, import, archive or delete rooms")
    room_sub = room.add_subparsers(dest="room_command", required=True, metavar="ACTION")
    create = room_sub.add_parser("create", help="create a room and print its tokens")
    create.add_argument("--name", required=True, help="the room's name")
    _place_options(create)
    create.add_argument("--json", action="store_true", help="print one JSON object")
    _store_option(create)
    create.add_argument("--fear-max", type=int, help="the room's Fear limit [12]")
    create.add_argument("--hope-max", type=int, help="each participant's Hope limit [6]")
    create.add_argument(
        "--public-url",
        help="the server's address for links [the running server's] (TABLERELAY_PUBLIC_URL)",
    )
    listing = room_sub.add_parser("list", help="list rooms")
    _place_options(listing)
    listing.add_argument("--json", action="store_true", help="print JSON")
    _store_option(listing)

    export = room_sub.add_parser(
        "export",
        help="write a room's events, signed, as anyone outside hidden rolls may see them",
        description="Write a room's events in seq order, each signed with the current key, as a "
        "spectator sees them now (hidden rolls not yet revealed stay sealed). Check it with "
        "tablerelay verify.",
    )
    export.add_argument("room", help="room id")
    export.add_argument("--format", choices=["jsonl", "msgpack"], default="jsonl", help="[jsonl]")
    export.add_argument("--output", "-o", help="file to write [standard output]")
    export.add_argument(
        "--stored",
        action="store_true",
        help="every event as stored, hidden rolls and their nonces included (a GM's backup; what "
        "'room import' takes): keep it private",
    )
    export.add_argument(
        "--with-secrets",
        action="store_true",
        help="with --stored: also the room's secret dice seeds and open witnessed rolls, as 'store copy' "
        "carries them, so the importing relay rolls on from the open seed (without them it abandons it). "
        "As sensitive as a backup: whoever holds the file knows the open seed",
    )
    _place_options(export)
    _store_option(export)

    importing = room_sub.add_parser(
        "import",
        help="add a room from a stored export (checked first; an existing room id is refused)",
        description="Add the room a 'room export --stored' file holds, with its id, epoch and every "
        "event, after checking every signature, the seqs, each event's fields and the fold. Refuses a room "
        "id that exists. A file made --with-secrets brings the room's dice seeds too; without them, the "
        "room's open dice seed is abandoned (its rolls stay 'awaiting seed') and the next one committed.",
    )
    importing.add_argument("file", help="an export made with 'tablerelay room export ROOM --stored'")
    importing.add_argument("--keys", help="a JWK Set to trust instead of the keys in the file's header")
    _place_options(importing)
    archive = room_sub.add_parser(
        "archive",
        help="make a room read-only: history stays viewable, nothing new is stored",
        description="Append an 'archive' event: from then on the room refuses rolls and changes (error "
        "code 'archived') and stores no joins or leaves. Works while a server serves the data folder.",
    )
    archive.add_argument("room", help="room id")
    _place_options(archive)
    delete = room_sub.add_parser(
        "delete",
        help="delete a room and all its events for good (asks first)",
        description="Delete a room and its events. Asks you to type the room id; without a terminal it "
        "refuses unless given --yes. Refuses while a server serves the data folder.",
    )
    delete.add_argument("room", help="room id")
    delete.add_argument("--yes", action="store_true", help="delete without asking (for scripts)")
    _place_options(delete)
    backup = sub.add_parser(
        "backup",
        help="copy the database consistently, while the server runs",
        description="Copy the data folder's database with SQLite's online backup API: consistent, and "
        "safe while the server serves and writes. DEST is a file, or a folder to put a dated file in.",
    )
    backup.add_argument("dest", help="the backup file (or a folder)")
    _place_options(backup)
    backup.add_argument("--json", action="store_true", help="print one JSON object")
    restore = sub.add_parser(
        "restore",
        help="put a backup in place (server stopped); every room gets a new epoch",
        description="Replace the data folder's database with a backup, with the server stopped. Every "
        "room gets a new epoch, so clients start afresh instead of resuming across the restore. The "
        "replaced database is kept beside it.",
    )
    restore.add_argument("src", help="a file written by tablerelay backup")
    _place_options(restore)
    restore.add_argument("--json", action="store_true", help="print one JSON object")

    key = sub.add_parser("key", help="manage the key that signs events")
    key_sub = key.add_subparsers(dest="key_command", required=True, metavar="ACTION")
    rotate = key_sub.add_parser(
        "rotate", help="make a new signing key current; the old one stays published as retired"
    )
    _place_options(rotate)

    verify = sub.add_parser(
        "verify",
        help="check the signature of every event in a room export",
        description="Check every event of a room export (tablerelay room export). Prints each event "
        "that fails and exits 1 if any does.",
    )
    verify.add_argument("file", help="an export file (JSON Lines or MessagePack)")
    verify.add_argument(
        "--keys",
        help="a JWK Set to trust (the server's /.well-known/tablerelay-keys.json) instead of the file's",
    )
    verify.add_argument(
        "--fair",
        action="store_true",
        help="also recompute every roll's dice from its revealed seed and print each roll's verdict "
        "(spec/fairness.md); exits 1 if any fails",
    )

    token = sub.add_parser("token", help="issue a token for a room")
    token.add_argument("--room", required=True, help="room id")
    token.add_argument("--role", required=True, choices=["gm", "player", "spectator"])
    token.add_argument("--name", help="the participant's display name")
    token.add_argument("--ttl", type=int, help="seconds until the token expires [30 days]")
    _place_options(token)
    _store_option(token)
    token.add_argument(
        "--link", action="store_true", help="print the page link with the token, not the token"
    )
    token.add_argument(
        "--public-url", help="the server's address for --link [the running server's] (TABLERELAY_PUBLIC_URL)"
    )

    store = sub.add_parser("store", help="move room logs between stores")
    store_sub = store.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    copy = store_sub.add_parser(
        "copy",
        help="copy every room and its events from one store to another",
        description="Copy rooms and their events, exactly as stored, e.g. from the data folder's SQLite "
        "file to a NATS cluster: tablerelay store copy --from sqlite --to nats://HOST:4222. A room the "
        "target already holds with the same events is left alone; one holding other events is an error.",
    )
    copy.add_argument("--from", dest="source", required=True, help="sqlite or nats://HOST:PORT[,...]")
    copy.add_argument("--to", dest="target", required=True, help="sqlite or nats://HOST:PORT[,...]")
    copy.add_argument("--data", help="data folder of a sqlite store [./data]")
    copy.add_argument("--config", help="a TOML config file")

    foundry = sub.add_parser("foundry", help="the Foundry VTT module the relay serves")
    foundry_sub = foundry.add_subparsers(dest="foundry_command", required=True, metavar="ACTION")
    package = foundry_sub.add_parser("package", help="write the zip that /foundry/tablerelay.zip serves")
    package.add_argument("--out", default="tablerelay-foundry.zip", help="the zip to write")
    package.add_argument(
        "--public-url", help="the relay's address written into module.json [the configured public_url]"
    )
    _place_options(package)

    roll = sub.add_parser(
        "roll",
        help="roll locally with the rules core (no server)",
        description="Roll locally: a system with its arguments, or a dice formula. Values are JSON where "
        "they parse as JSON (numbers, true, lists, maps), else strings: tablerelay roll drawsteel.power "
        "characteristic=2 edges=1; tablerelay roll 4d6kh3; tablerelay roll 1d20+5 dialect=roll20",
    )
    roll.add_argument(
        "system",
        help="a system name ('tablerelay roll list' shows them) or a dice formula in Foundry VTT notation",
    )
    roll.add_argument("args", nargs="*", metavar="key=value")
    roll.add_argument("--json", action="store_true", help="print the exact result as JSON")
    return parser


def _place_options(parser: argparse.ArgumentParser) -> None:
    """The two options that say where a command's server keeps its things."""
    parser.add_argument("--data", help="data folder [./data]")
    parser.add_argument("--config", help="a TOML config file")


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        help="sqlite (the data folder) or nats://HOST:PORT[,nats://...] [sqlite] (TABLERELAY_STORE)",
    )


class _Version(argparse.Action):
    """``--version``, which reads the installed package's metadata only when asked: importing
    importlib.metadata costs every other command a fifth of a second."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any, **__: Any) -> None:
        from importlib import metadata

        try:
            version = metadata.version("tablerelay")
        except metadata.PackageNotFoundError:  # run from a source tree that was never installed
            version = "unknown (not installed)"
        print(f"{parser.prog} {version}")  # on stdout, as argparse's own version action prints it
        parser.exit()


def _room_command(args: argparse.Namespace) -> int:
    # Each action imports only its own module: `room create` runs once per table, and the campaign module
    # (import, archive, delete) brings the whole room engine with it.
    if args.room_command in ("import", "archive", "delete"):
        from relay.ops import campaign

        return {
            "import": campaign.room_import_command,
            "archive": campaign.room_archive_command,
            "delete": campaign.room_delete_command,
        }[args.room_command](args)
    from relay.ops import commands

    return {
        "create": commands.room_create_command,
        "list": commands.room_list_command,
        "export": commands.room_export_command,
    }[args.room_command](args)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command != "serve" and hasattr(signal, "SIGPIPE"):
        # One-shot commands piped into `head` should end quietly, as other command-line tools do. The
        # server keeps Python's default (SIGPIPE ignored) so a closed socket is an error, not a kill.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        return _run(args)
    except sqlite3.DatabaseError as exc:
        # Every command opens the data folder's database the same way (relay.storage.sqlite.db.connect), which
        # says in one sentence why a file is not usable; any other database error is a fault to see whole.
        from relay.storage.sqlite.db import DatabaseUnusable

        if not isinstance(exc, DatabaseUnusable):
            raise
        print(f"tablerelay: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.command == "roll":
        from rules.cli import roll_command

        return roll_command(args.system, args.args, as_json=args.json)
    if args.command == "serve":
        from relay.ops.commands import serve_command

        return serve_command(args)
    if args.command == "room":
        return _room_command(args)
    if args.command in ("backup", "restore"):
        from relay.ops.backup import backup_command, restore_command

        return backup_command(args) if args.command == "backup" else restore_command(args)
    if args.command == "key":
        from relay.ops.commands import key_rotate_command

        return key_rotate_command(args)
    if args.command == "verify":
        from relay.ops.commands import verify_command

        return verify_command(args)
    if args.command == "store":
        from relay.ops.store_copy import store_copy_command

        return store_copy_command(args)
    if args.command == "foundry":
        from relay.ops.commands import foundry_package_command

        return foundry_package_command(args)
    from relay.ops.commands import token_command

    return token_command(args)


if __name__ == "__main__":
    sys.exit(main())
