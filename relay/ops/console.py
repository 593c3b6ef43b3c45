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


def fail(message: str, code: int = 2) -> int:
    print(f"tablerelay: {message}", file=sys.stderr)
    return code


def shown_date(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
