"""The cluster store's dice seeds (spec/fairness.md): the key-value bucket ``tablerelay_seeds``, one key per
seed (``ROOM.N`` -> the 32 secret bytes), so every node of a room reads the same open seed. Kept apart from
the event stream: a seed is in no event until its ``seed_reveal``."""

from __future__ import annotations

import nats.js.errors
from nats.js import JetStreamContext

from relay.storage.nats.connect import LazyBucket, bucket_subjects

SEEDS_BUCKET = "tablerelay_seeds"


class SeedVault(LazyBucket):
    """The seeds bucket, made on first use (a store that never rolls fairly never has one)."""

    def __init__(self, js: JetStreamContext, replicas: int) -> None:
        super().__init__(js, SEEDS_BUCKET, replicas)

    async def ensure(self, room: str, n: int, candidate: bytes) -> bytes:
        """Seed ``n`` of ``room``: ``candidate`` if no node stored one first, else the one stored."""
        kv = await self.bucket()
        key = f"{room}.{n}"
        try:
            await kv.create(key, candidate)
        except nats.js.errors.KeyWrongLastSequenceError:
            entry = await kv.get(key)
            return bytes(entry.value or b"")
        return candidate

    async def stored(self, room: str, first: int) -> dict[int, bytes]:
        """The room's seeds numbered ``first`` and later."""
        kv = await self.bucket()
        prefix = f"$KV.{SEEDS_BUCKET}.{room}."
        found: dict[int, bytes] = {}
        for subject in await bucket_subjects(self.js, SEEDS_BUCKET, prefix + ">"):
            number = subject[len(prefix) :]
            if number.isdigit() and int(number) >= first:
                entry = await kv.get(f"{room}.{number}")
                if entry.value:
                    found[int(number)] = bytes(entry.value)
        return found

    async def remove(self, room: str) -> None:
        """Every seed of a deleted room."""
        await self.bucket()
        await self.js.purge_stream(f"KV_{SEEDS_BUCKET}", subject=f"$KV.{SEEDS_BUCKET}.{room}.>")
