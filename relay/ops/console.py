"""What every ``tablerelay`` command shares: its settings, loaded and checked the one way; a failure said
on stderr with an exit status; a date as the commands print it."""

from __future__ import annotations

import argparse
import datetime
import sys
from typing import Any

from relay.settings.config import Config, load
from relay.shell import public
from relay.storage import stores
from relay.trust import signing


def command_config(
    args: argparse.Namespace, *, stored: bool = False, writes: bool = False, **extra: Any
) -> Config:
    """The command's settings. ``stored``: it works on what a server stored, so its database must exist;
    ``writes``: it writes in the data folder (and may make it)."""
    overrides = {
        "data": getattr(args, "data", None),
        "public_url": getattr(args, "public_url", None),
        "store": getattr(args, "store", None),
        "replicas": getattr(args, "replicas", None),
        **extra,
    }
    config = load(getattr(args, "config", None), overrides)
    stores.check(config)
    stores.check_data_folder(config, writes=writes)
    if stored:
        stores.check_stored(config)
    if config.public_url:
        public.check_public_url(config.public_url)  # a bad address stops every command with a sentence
    return config


class InputError(Exception):
    """A file a command was given that it cannot use; the message is the sentence to print."""


def export_file(args: argparse.Namespace) -> tuple[bytes, Any]:
    """The bytes of ``args.file`` (an export) and the key set ``args.keys`` names (None: the file's own
    keys), for ``verify`` and ``room import``; ``InputError`` with a sentence when either cannot be read."""
    try:
        with open(args.file, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise InputError(f"cannot read {args.file}: {exc.strerror}.") from exc
    if not args.keys:
        return data, None
    try:
        return data, signing.read_key_set(args.keys)
    except signing.SigningKeyError as exc:
        raise InputError(str(exc)) from exc


def fail(message: str, code: int = 2) -> int:
    print(f"tablerelay: {message}", file=sys.stderr)
    return code


def shown_date(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
