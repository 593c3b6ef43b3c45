"""The work behind the ``tablerelay`` commands other than ``roll`` (see relay.ops.cli)."""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import datetime
import json
import signal
import sys
from typing import TYPE_CHECKING

from relay.core import records
from relay.ops.console import InputError, command_config, export_file, fail
from relay.settings import logs
from relay.settings.config import SIGNING_NONCES, Config, ConfigError
from relay.shell import admission, loops, public
from relay.storage import stores
from relay.storage.base import RoomLimitReached
from relay.storage.sqlite.db import (
    check_synchronous,
    connect,
    create_room_sync,
    get_room_sync,
    list_rooms_sync,
    state_sync,
)
from relay.trust import signing, tokens

if TYPE_CHECKING:
    from relay.storage.exports import Export

# The page each role opens its link on.
_PAGE = {"gm": "table", "player": "table", "spectator": "watch"}


def serve_command(args: argparse.Namespace) -> int:
    from relay.shell.serve import run, settle_gc

    try:
        config = command_config(
            args,
            writes=True,
            host=args.host,
            port=args.port,
            log_format=args.log_format,
            log_level=args.log_level,
        )
        logs.configure(config.log_format, config.log_level)
        _check(config)
        stores.check_serving(config)
        keyring = signing.load_keyring(config.data, config.signing_key) if config.signing else None
    except (ConfigError, ValueError, signing.SigningKeyError) as exc:
        return fail(str(exc))

    async def main() -> bool:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await run(config, stop, keyring=keyring)

    try:
        _, loop_factory = loops.factory(config.event_loop)
    except ValueError as exc:
        return fail(str(exc))
    settle_gc()
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            clean = runner.run(main())
    except stores.StoreUnusable as exc:
        return fail(str(exc), 1)
    except OSError as exc:
        import structlog

        structlog.get_logger("relay").error(
            "cannot_listen", host=config.host, port=config.port, error=str(exc)
        )
        return 1
    return 0 if clean else 1  # 1: the drain did not finish within limits.drain_timeout (logged)


def _check(config: Config) -> None:
    """Refuse settings that would only fail later, with a sentence naming the setting."""
    try:
        check_synchronous(config.synchronous)
    except ValueError as exc:
        raise ConfigError(f"{exc}.") from exc
    if config.log_format not in ("auto", "json", "console"):
        raise ConfigError(f"log_format must be auto, json or console; got {config.log_format!r}.")
    if config.signing_nonces not in SIGNING_NONCES:
        raise ConfigError(f"signing_nonces must be ahead or deterministic; got {config.signing_nonces!r}.")
    if not 0 <= config.port <= 65535:
        raise ConfigError(f"port must be from 0 to 65535; got {config.port}.")
    admission.parse_origins(config.origins)
    admission.parse_networks(config.trusted_proxies)
    limits = config.limits
    names = ("max_frame", "burst", "max_rooms", "max_members", "max_per_ip", "send_queue", "history")
    for name in (*names, "resume_max"):
        if getattr(limits, name) < 1:
            raise ConfigError(f"limits.{name} must be at least 1; got {getattr(limits, name)}.")
    for name, zero in (("presence_days", "keep all"), ("rejoin_grace", "leaves as a room loads")):
        if getattr(limits, name) < 0:
            raise ConfigError(f"limits.{name} must be 0 ({zero}) or more; got {getattr(limits, name)}.")
    if min(limits.rate, limits.hello_timeout, limits.room_idle, limits.drain_timeout) <= 0:
        raise ConfigError("limits.rate, hello_timeout, room_idle and drain_timeout must be positive numbers.")


def room_create_command(args: argparse.Namespace) -> int:
    try:
        config = command_config(args, writes=True)
    except ConfigError as exc:
        return fail(str(exc))
    name = args.name.strip()
    if not name or len(name) > 100:
        return fail("--name must be 1 to 100 characters.")
    fear_max = getattr(args, "fear_max", None)
    hope_max = getattr(args, "hope_max", None)
    fear_max = config.limits.fear_max if fear_max is None else fear_max
    hope_max = config.limits.hope_max if hope_max is None else hope_max
    if records.ROOM["fear_max"](fear_max) or records.ROOM["hope_max"](hope_max):
        # The caps an import takes for a room (relay.core.records): the store keeps them as 64-bit integers.
        return fail("--fear-max and --hope-max must be whole numbers from 0 to 2**63 - 1.")
    try:
        if stores.is_cluster(config):
            stores.check_secret(config)
            info = stores.run_on(
                config,
                lambda log: log.create_room(
                    name, fear_max=fear_max, hope_max=hope_max, max_rooms=config.limits.max_rooms
                ),
            )
        else:
            with contextlib.closing(connect(config.db_path, config.synchronous)) as conn:
                info = create_room_sync(
                    conn, name, fear_max=fear_max, hope_max=hope_max, max_rooms=config.limits.max_rooms
                )
    except (RoomLimitReached, stores.StoreUnusable, ConfigError) as exc:
        return fail(str(exc), 1)
    secret = tokens.load_secret(config.data, config.secret)
    gm = tokens.issue(secret, info.id, "gm", sub=tokens.new_gm_id())
    player = tokens.issue(secret, info.id, "player")
    spectator = tokens.issue(secret, info.id, "spectator")
    base = public.public_base(config)
    links = {
        "gm": public.link(base, _PAGE["gm"], gm),
        "player": public.link(base, _PAGE["player"], player),
        "spectator": public.link(base, _PAGE["spectator"], spectator),
    }
    if args.json:
        print(
            json.dumps(
                {
                    "room": info.id,
                    "gm": gm,
                    "player": player,
                    "spectator": spectator,
                    "watch": links["spectator"],
                    "links": links,
                }
            )
        )
        return 0
    print(f"Room {info.name!r} created with id {info.id}.")
    print()
    print(f"GM token (keep it secret):\n  {gm}")
    print(f"Player invite (each use makes a new player):\n  {player}")
    print(f"Spectator token:\n  {spectator}")
    print()
    print(f"GM page (keep it secret):\n  {links['gm']}")
    print(f"Player page (one link for all players):\n  {links['player']}")
    print(f"Spectator page:\n  {links['spectator']}")
    return 0


def room_list_command(args: argparse.Namespace) -> int:
    try:
        config = command_config(args, stored=True)
    except ConfigError as exc:
        return fail(str(exc))
    if stores.is_cluster(config):
        try:
            rooms, counts = stores.run_on(config, stores.rooms_and_counts)
        except stores.StoreUnusable as exc:
            return fail(str(exc), 1)
    else:
        with contextlib.closing(connect(config.db_path, config.synchronous)) as conn:
            rooms = list_rooms_sync(conn)
            counts = dict(
                conn.execute("SELECT room, COALESCE(MAX(seq), 0) FROM events GROUP BY room").fetchall()
            )
    if args.json:
        print(json.dumps([{**room.wire(), "events": counts.get(room.id, 0)} for room in rooms]))
        return 0
    if not rooms:
        print("No rooms yet; create one with: tablerelay room create --name NAME")
        return 0
    print(f"{'ID':<18} {'EVENTS':>7}  {'CREATED (UTC)':<17}  NAME")
    for room in rooms:
        created = datetime.datetime.fromtimestamp(room.created / 1000, tz=datetime.UTC).strftime(
            "%Y-%m-%d %H:%M"
        )
        print(f"{room.id:<18} {counts.get(room.id, 0):>7}  {created:<17}  {room.name}")
    return 0


def token_command(args: argparse.Namespace) -> int:
    try:
        config = command_config(args, stored=True)
    except ConfigError as exc:
        return fail(str(exc))
    if args.ttl is not None and args.ttl <= 0:
        return fail("--ttl must be a positive number of seconds.")
    where = str(config.db_path)
    try:
        if stores.is_cluster(config):
            stores.check_secret(config)
            where = "the NATS store"
            found = stores.run_on(config, lambda log: stores.room_and_invites(log, args.room))
            info, generation = found if found is not None else (None, 0)
        else:
            with contextlib.closing(connect(config.db_path, config.synchronous)) as conn:
                info = get_room_sync(conn, args.room)
                # Invites belong to the room's current invite generation (the GM may have rotated them).
                generation = state_sync(conn, info.id).invites if info is not None else 0
    except (stores.StoreUnusable, ConfigError) as exc:
        return fail(str(exc), 1)
    if info is None:
        return fail(f"there is no room {args.room!r} in {where}; see: tablerelay room list")
    secret = tokens.load_secret(config.data, config.secret)
    ttl = tokens.DEFAULT_TTL if args.ttl is None else args.ttl
    sub = tokens.new_gm_id() if args.role == "gm" else None
    token = tokens.issue(secret, info.id, args.role, sub=sub, name=args.name, ttl=ttl, invites=generation)
    print(public.link(public.public_base(config), _PAGE[args.role], token) if args.link else token)
    return 0


def foundry_package_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from relay.shell.http import foundry

    try:
        config = command_config(args)
    except ConfigError as exc:
        return fail(str(exc))
    base = (args.public_url or public.public_base(config)).rstrip("/")
    try:
        data = foundry.package(foundry.installed_sources(), base)
    except foundry.FoundryPackageError as exc:
        return fail(str(exc))
    out = Path(args.out)
    try:
        out.write_bytes(data)
    except OSError as exc:
        return fail(f"cannot write {out}: {exc.strerror or exc}.")
    print(f"wrote {out} ({len(data):,} bytes): the Foundry module for {base}")
    print(f"manifest URL for Foundry's 'Install Module': {base}{foundry.MANIFEST_PATH}")
    return 0


def key_rotate_command(args: argparse.Namespace) -> int:
    try:
        config = command_config(args)
    except ConfigError as exc:
        return fail(str(exc))
    if config.signing_key:
        return fail(
            "the signing key comes from TABLERELAY_SIGNING_KEY, not the data folder: put a new key there "
            "and restart the server (the old key is then published as retired)."
        )
    if not (config.data / signing.KEY_FILE).is_file() and not config.db_path.is_file():
        # A mistyped --data would mint a key no server signs with; the server makes its first key itself.
        return fail(
            f"{config.data} is not a tablerelay data folder (it holds no {signing.KEY_FILE} and no "
            "database): check --data (the folder the server uses); `tablerelay serve` makes the first key "
            "itself."
        )
    try:
        old, new = signing.rotate(config.data)
    except signing.SigningKeyError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot write the new key in {config.data}: {exc.strerror or exc}.", 1)
    if old is not None:
        print(f"Key {old} retired (still published, so the events it signed still verify).")
    print(f"Key {new} is current. Restart the server to sign with it.")
    return 0


def room_export_command(args: argparse.Namespace) -> int:
    from relay.ops import room_move
    from relay.storage import exports

    stored = getattr(args, "stored", False)
    with_secrets = getattr(args, "with_secrets", False)
    if with_secrets and not stored:
        # A public export is for anyone to read: it never holds a secret.
        return fail("--with-secrets goes with --stored (the export 'room import' takes).")
    try:
        config = command_config(args, stored=True)
        keyring = signing.load_keyring(config.data, config.signing_key)
    except (ConfigError, signing.SigningKeyError) as exc:
        return fail(str(exc))
    if stores.is_cluster(config):
        try:
            found = stores.run_on(config, lambda log: room_move.whole_room(log, args.room, with_secrets))
        except stores.StoreUnusable as exc:
            return fail(str(exc), 1)
        if found is None:
            return fail(f"there is no room {args.room!r} in the NATS store; see: tablerelay room list")
    else:
        with contextlib.closing(connect(config.db_path, config.synchronous)) as conn:
            found = room_move.whole_room_sync(conn, args.room, with_secrets)
        if found is None:
            return fail(f"there is no room {args.room!r} in {config.db_path}; see: tablerelay room list")
    info, records, secrets = found
    if stored:
        events = exports.stored_events(records, info, keyring)
    else:
        events = exports.public_events(records, info, keyring)
    last_seq = records[-1]["seq"] if records else 0
    head = exports.header(info, keyring, last_seq, "stored" if stored else "public", secrets)
    if args.output and args.output != "-":
        try:
            with open(args.output, "wb") as out:
                count = exports.write(out, args.format, head, events)
        except OSError as exc:
            return fail(f"cannot write {args.output}: {exc.strerror or exc}.", 1)
        print(f"Wrote {count} events of room {info.id} to {args.output}.", file=sys.stderr)
    else:
        exports.write(sys.stdout.buffer, args.format, head, events)
        sys.stdout.flush()
    if secrets is not None:
        print(
            f"The file holds room {info.id}'s secret dice seeds (its open seed among them, which nobody may "
            "know before its reveal): keep it as private as a backup, and delete it once it is imported.",
            file=sys.stderr,
        )
    return 0


def verify_command(args: argparse.Namespace) -> int:
    from relay.storage import exports

    try:
        data, keys = export_file(args)
    except InputError as exc:
        return fail(str(exc))
    try:
        export = exports.read(data)
        problems = exports.failures(export, keys)
    except exports.ExportError as exc:
        return fail(f"{args.file} is not a room export: {exc}.")
    for line in problems:
        print(line)
    source = f"the keys in {args.keys}" if args.keys else "the keys in the file's header"
    if problems:
        print(f"{len(problems)} problem(s) in {len(export.events)} events of room {export.room['id']}.")
    else:
        print(f"All {len(export.events)} events of room {export.room['id']} verify, checked with {source}.")
    unfair = fair_verdicts(export) if args.fair else 0
    return 1 if problems or unfair else 0


def fair_verdicts(export: Export) -> int:
    """Print each roll's fairness verdict (``verify --fair``); the number that failed."""
    from relay.storage.exports import revealed_bodies
    from relay.trust.fairness import FAILED, verify_fair

    verdicts = verify_fair(revealed_bodies(export.events), str(export.room["id"]))
    for verdict in verdicts.values():
        print(verdict.text)
    tally = collections.Counter(verdict.verdict for verdict in verdicts.values())
    counts = ", ".join(f"{n} {name}" for name, n in sorted(tally.items())) or "no rolls"
    print(f"Fairness of room {export.room['id']}: {counts}.")
    return tally[FAILED]
