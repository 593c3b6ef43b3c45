"""The cluster store's open witnessed rolls (spec/fairness.md): the key-value bucket ``tablerelay_pendings``,
one key per pending event (``ROOM.SEQ.COMMIT`` -> what ``relay.core.fair.kept`` keeps, as MessagePack), so
any node can complete a roll whose node died, with the witness values stored through any node.

The commit is in the key because two nodes racing for the same seq each store their secret before
publishing their pending event: only one pending wins the seq, and the loser's key must not overwrite the
winner's. Values and closing are compare-and-set updates of the key's revision, so a value stored through
one node and the roll made on another never cross: once closed, the values are final. Kept apart from the
event stream: nothing here is in any event until the roll's reveal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext

from relay.settings.logs import get_logger
from relay.storage.base import Record, witness_into
from relay.storage.codec import decode_record, encode_record
from relay.storage.nats.connect import LazyBucket, bucket_subjects, patiently

logger = get_logger("relay.log.nats")
PENDINGS_BUCKET = "tablerelay_pendings"
#: Compare-and-set tries before giving up (each failed try means another node's value went in).
CAS_TRIES = 50


class PendingVault(LazyBucket):
    """The pendings bucket, made on first use (a store that never witnesses a roll never has one)."""

    def __init__(self, js: JetStreamContext, replicas: int) -> None:
        super().__init__(js, PENDINGS_BUCKET, replicas)

    @staticmethod
    def key(room: str, pending: int, commit: str) -> str:
        return f"{room}.{pending}.{commit}"

    async def put(self, room: str, kept: Record) -> None:
        """Store what an open roll keeps, before its pending event is published."""
        kv = await self.bucket()
        key, data = self.key(room, kept["pending"], kept["commit"]), encode_record(kept)
        # A bucket another node has just made may not answer for a moment (no responders yet).
        await patiently(lambda: kv.put(key, data))

    async def _change(
        self, room: str, pending: int, commit: str, value: tuple[str, bytes] | None
    ) -> tuple[str, Record | None]:
        """Add a witness's ``value``, or close (None): the outcome and the kept map after it."""
        kv = await self.bucket()
        key = self.key(room, pending, commit)
        for _ in range(CAS_TRIES):
            try:
                entry = await kv.get(key)
            except nats.js.errors.NotFoundError:
                return "missing", None
            if not entry.value or entry.revision is None:
                return "missing", None
            kept = decode_record(entry.value)
            if value is not None:
                outcome = witness_into(kept, *value)
                if outcome != "stored":
                    return outcome, kept
            elif kept.get("closed"):
                return "closed", kept
            else:
                kept["closed"], outcome = True, "closed"
            try:
                await kv.update(key, encode_record(kept), last=entry.revision)
            except nats.js.errors.KeyWrongLastSequenceError:
                continue  # another node changed it meanwhile: read it again
            return outcome, kept
        raise RuntimeError(f"pending {pending} of room {room}: too many concurrent changes")

    async def witness(self, room: str, pending: int, commit: str, participant: str, value: bytes) -> str:
        outcome, _ = await self._change(room, pending, commit, (participant, value))
        return outcome

    async def close(self, room: str, pending: int, commit: str) -> Record | None:
        _, kept = await self._change(room, pending, commit, None)
        return kept

    async def watch(self, deliver: Callable[[str, Record], None]) -> asyncio.Task[None]:
        """Hand every change of a kept roll (new values, closing) to ``deliver(room, kept)``."""
        kv = await patiently(self.bucket)
        watcher = await kv.watchall(ignore_deletes=True)

        async def run() -> None:
            while True:
                try:
                    entry = await watcher.updates(timeout=3600)  # type: ignore[no-untyped-call]
                except nats.errors.TimeoutError:
                    continue
                if entry is None or not entry.value:  # None: the end of what was there when it began
                    continue
                room = entry.key.rsplit(".", 2)[0]
                try:
                    deliver(room, decode_record(entry.value))
                except Exception:
                    logger.exception("kept_delivery_failed", room=room)

        return asyncio.get_running_loop().create_task(run())

    async def _keys(self, room: str) -> list[str]:
        await self.bucket()
        prefix = f"$KV.{PENDINGS_BUCKET}."
        return [
            s[len(prefix) :] for s in await bucket_subjects(self.js, PENDINGS_BUCKET, f"{prefix}{room}.>")
        ]

    async def stored(self, room: str) -> list[Record]:
        kv = await self.bucket()
        found: list[Record] = []
        for key in await self._keys(room):
            try:
                entry = await kv.get(key)
            except nats.js.errors.NotFoundError:
                continue
            if entry.value:
                found.append(decode_record(entry.value))
        return found

    async def retire(self, room: str, upto: int, keep: Collection[tuple[int, str]]) -> None:
        still = set(keep)
        for key in await self._keys(room):
            _, pending, commit = key.rsplit(".", 2)
            if pending.isdigit() and int(pending) <= upto and (int(pending), commit) not in still:
                # The subject purged whole: a deleted key's marker would stay listed for ever.
                await self.js.purge_stream(f"KV_{PENDINGS_BUCKET}", subject=f"$KV.{PENDINGS_BUCKET}.{key}")

    async def remove(self, room: str) -> None:
        """Everything kept for a deleted room."""
        await self.bucket()
        await self.js.purge_stream(f"KV_{PENDINGS_BUCKET}", subject=f"$KV.{PENDINGS_BUCKET}.{room}.>")
