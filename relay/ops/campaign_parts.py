"""What ``room import``, ``room archive`` and ``room delete`` decide whatever the store holds the room:
the import's closing sentence, the archive event, and the confirmation before a delete.

``relay.ops.campaign`` runs the commands on the SQLite store and ``relay.ops.nats_campaign`` on the cluster
store; both build on these.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from relay.core.info import RoomInfo
from relay.core.state import RoomState
from relay.ops.console import fail, shown_date

#: The participant the command line acts as when it changes a room.
OPERATOR = {"id": "operator", "name": "Operator (command line)", "role": "gm"}


def imported(info: RoomInfo, count: int, keys_file: str | None) -> str:
    """What a successful import says, naming the keys that vouched for the file."""
    if keys_file:
        source = f"the key set in {keys_file}"
    else:
        # A file's own keys prove only that the file is whole; whose they are is what --keys answers.
        source = (
            "the file's own keys (to know the file came from a given server, import with "
            "--keys and that server's /.well-known/tablerelay-keys.json)"
        )
    head = f"Imported room {info.name!r} ({info.id}) with {count} events"
    return f"{head}; every signature verified with {source}."


def archive_record(state: RoomState, info: RoomInfo, now: int) -> dict[str, Any]:
    return {
        "seq": state.seq + 1,
        "epoch": info.epoch,
        "ts": now,
        "kind": "archive",
        "actor": dict(OPERATOR),
        "visibility": "public",
    }


def confirm_delete(
    info: RoomInfo, seq: int, yes: bool, ask: Callable[[str], str], note: str = ""
) -> int | None:
    """None when the delete may go ahead; else the exit status (the reason is printed)."""
    if yes:
        return None
    if not sys.stdin.isatty():
        return fail(
            "room delete asks for confirmation and there is no terminal to ask on; pass --yes "
            "to delete without asking (for scripts)."
        )
    print(
        f"This deletes room {info.name!r} ({info.id}, created {shown_date(info.created)}) and its {seq} "
        f"events for good.{note} Export it first (tablerelay room export ROOM --stored) to keep a copy."
    )
    try:
        answer = ask(f"Type the room id ({info.id}) to delete it: ")
    except EOFError:
        answer = ""
    if answer.strip() != info.id:
        print("Nothing was deleted.")
        return 1
    return None
