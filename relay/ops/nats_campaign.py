"""``room import``, ``room archive`` and ``room delete`` on a NATS (cluster) store (``--store nats://...``).

The checks before storing are ``relay.ops.campaign``'s; what differs is where the room lives:

- Import stores the events through the log's ordinary conditional appends (the first expects an empty
  subject), so seqs and record bytes are exactly the export's, then adds the directory entry. The room's
  dice seeds go into the seeds bucket before its events, first stored first kept (``ensure_seed``), so no
  node can load the room before them.
- Archive appends an ``archive`` event conditional on the room's last seq. Every node serving the room
  follows the stream, applies it and refuses writes from then on; no node needs to be asked.
- Delete cannot tell whether nodes are serving the room (any node may hold it in memory), so it deletes
  only an archived room: archived, nothing more is written to its log, and a node still holding it just
  keeps showing the history it has until its clients leave. Deleting an active room is refused, --yes or
  not; archive it first.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from relay.ops.campaign_parts import archive_record, confirm_delete, imported
from relay.ops.console import fail, shown_date
from relay.ops.room_move import Move
from relay.storage import stores
from relay.storage.base import Conflict, EventLog, Record, RoomExists, RoomLimitReached


def _run(config: Any, work: Callable[[EventLog], Any]) -> Any:
    try:
        return stores.run_on(config, work)
    except stores.StoreUnusable as exc:
        return fail(str(exc), 1)


def import_room(config: Any, file: str, records: list[Record], keys_file: str | None, move: Move) -> int:
    info = move.info

    async def work(log: EventLog) -> int:
        try:
            if await log.get_room(info.id) is not None:  # its seeds are not this file's to touch
                raise RoomExists(info.id)
            seeds = move.seeds_to_store()
            for n, secret in sorted(seeds.items()):
                stored = await log.ensure_seed(info.id, n, secret)
                if stored != secret and n in move.seeds:
                    why = f"the store already holds another dice seed {n} for room {info.id}"
                    return fail(f"{file} was not imported: {why}.", 1)
                seeds[n] = stored  # a seed an earlier, failed import drew for the next seed: as good
            extra = move.records(seeds)
            await log.import_room(info, [*records, *extra], max_rooms=config.limits.max_rooms, kept=move.kept)
        except RoomExists:
            existing = await log.get_room(info.id)
            shown = f" ({existing.name!r}, created {shown_date(existing.created)})" if existing else ""
            return fail(
                f"room {info.id} already exists in the store{shown}; nothing was imported. Delete it first "
                f"(tablerelay room delete {info.id}) if the file should replace it.",
                1,
            )
        except (RoomLimitReached, ValueError) as exc:
            return fail(f"{file} was not imported: {exc}", 1)
        print(imported(info, len(records), keys_file))
        said = move.said()
        if said:
            print(said)
        return 0

    return int(_run(config, work))


def archive_room(config: Any, room: str) -> int:
    async def work(log: EventLog) -> int:
        info = await log.get_room(room)
        if info is None:
            return fail(f"there is no room {room!r} in the store; see: tablerelay room list --store ...")
        state = await log.state(info.id)
        if state.archived:
            print(f"Room {info.id} is already archived.")
            return 0
        now = int(datetime.datetime.now(tz=datetime.UTC).timestamp() * 1000)
        try:
            await log.append(info.id, [archive_record(state, info, now)], state.seq)
        except Conflict:
            return fail("the room changed while it was being archived; run the command again.", 1)
        print(f"Room {info.name!r} ({info.id}) is archived: read-only on every node, history still viewable.")
        return 0

    return int(_run(config, work))


def delete_room(config: Any, room: str, yes: bool, ask: Callable[[str], str]) -> int:
    async def work(log: EventLog) -> int:
        info = await log.get_room(room)
        if info is None:
            return fail(f"there is no room {room!r} in the store; see: tablerelay room list --store ...")
        state = await log.state(info.id)
        if not state.archived:
            return fail(
                f"room {info.id} is not archived. On a NATS store any node may be serving it and would go on "
                f"writing to a log that is gone; archive it first (tablerelay room archive {info.id}), "
                "then delete it.",
                1,
            )
        # The prompt is asked outside any NATS wait: the connection is idle meanwhile, which it tolerates.
        refused = confirm_delete(
            info,
            state.seq,
            yes,
            ask,
            " Nodes still holding it keep showing its history until its clients leave.",
        )
        if refused is not None:
            return refused
        await log.delete_room(info.id)
        print(f"Deleted room {info.name!r} ({info.id}) and its {state.seq} events from the store.")
        return 0

    return int(_run(config, work))
