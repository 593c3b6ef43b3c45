"""The work behind each ``tablerelay`` subcommand except ``roll`` (being written)."""

from __future__ import annotations

import argparse


def serve_command(args: argparse.Namespace) -> int:
    raise SystemExit("tablerelay serve: not yet available")


def room_create_command(args: argparse.Namespace) -> int:
    raise SystemExit("tablerelay room create: not yet available")


def room_list_command(args: argparse.Namespace) -> int:
    raise SystemExit("tablerelay room list: not yet available")


def token_command(args: argparse.Namespace) -> int:
    raise SystemExit("tablerelay token: not yet available")
