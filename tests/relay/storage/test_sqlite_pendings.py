"""What the SQLite store keeps for open witnessed rolls (EventLog.append's ``kept``, spec/fairness.md), with
each of the three writers: the secret is stored in the same transaction as its pending event (a refused
append stores neither), values go in once each until the copy is closed, closing returns every value, and
retiring keeps only the pendings still open. Never in the events."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgpack
import pytest

from relay.storage.base import Conflict
from tests.relay.storage.test_sqlite_log import ev, make, writer  # noqa: F401 (the writers' fixture)


def pending(seq: int) -> dict[str, Any]:
    record = ev(seq, "pending")
    record.update(roller="p1", n=1, asked=["p2"], commit=f"{seq:064x}")
    return record


def kept(seq: int) -> dict[str, Any]:
    return {"pending": seq, "commit": f"{seq:064x}", "nonce": b"\x07" * 32, "values": {}, "closed": False}


async def test_the_secret_is_stored_with_its_pending_and_never_without_it(tmp_path: Path) -> None:
    log = await make(tmp_path)
    try:
        info = await log.create_room("Kept", fear_max=12, hope_max=6, max_rooms=10)
        await log.append(info.id, [ev(1)], 0)
        assert await log.append(info.id, [pending(2)], 1, [kept(2)]) == 2
        with pytest.raises(Conflict):  # a stale append: neither its events nor its secret are stored
            await log.append(info.id, [pending(2)], 1, [kept(9)])
        assert [k["pending"] for k in await log.kept_rolls(info.id)] == [2]
        events = await log.read(info.id, 0, 10)
        assert [e["kind"] for e in events] == ["join", "pending"]
        assert all(b"\x07" * 32 not in msgpack.packb(e, use_bin_type=True) for e in events), "no nonce"
    finally:
        await log.close()


async def test_values_go_in_once_each_until_closed_and_retiring_keeps_the_open_ones(tmp_path: Path) -> None:
    log = await make(tmp_path)
    try:
        room = (await log.create_room("Kept", fear_max=12, hope_max=6, max_rooms=10)).id
        await log.append(room, [pending(1)], 0, [kept(1)])
        await log.append(room, [pending(2)], 1, [kept(2)])
        commit = f"{1:064x}"
        assert await log.keep_witness(room, 1, commit, "p2", b"a" * 16) == "stored"
        assert await log.keep_witness(room, 1, commit, "p2", b"b" * 16) == "twice"
        assert await log.keep_witness(room, 1, "0" * 64, "p3", b"c" * 16) == "missing", "another pending's"
        both = await asyncio.gather(*(log.close_pending(room, 1, commit) for _ in range(2)))
        assert [b["values"] if b else None for b in both] == [{"p2": b"a" * 16}] * 2
        assert all(b is not None and b["closed"] for b in both)
        assert await log.keep_witness(room, 1, commit, "p3", b"c" * 16) == "closed"
        await log.retire_kept(room, 2, [(2, f"{2:064x}")])
        assert [k["pending"] for k in await log.kept_rolls(room)] == [2]
        assert await log.keep_witness(room, 1, commit, "p3", b"c" * 16) == "missing", "its roll is stored"
        assert await log.close_pending(room, 1, commit) is None
        assert await log.delete_room(room)
        assert await log.kept_rolls(room) == []
    finally:
        await log.close()
