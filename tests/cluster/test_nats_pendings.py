"""What the NATS store keeps for open witnessed rolls (the bucket ``tablerelay_pendings``, spec/fairness.md)
on a real NATS cluster: the secret is in the bucket before its pending event is published, two nodes racing
for one seq keep two keys (the loser's never overwrites the winner's), values stored through two nodes at
once all go in, once each, closing freezes them, and retiring keeps only the pendings still open."""

from __future__ import annotations

import asyncio
from typing import Any

from relay.storage.nats.log import NatsLog
from tests.cluster.test_nats_log import logs, new_room, record  # noqa: F401 (fixture)


def pending(seq: int, commit: str) -> dict[str, Any]:
    return {**record(seq, "pending"), "roller": "a", "n": 1, "asked": ["w"], "commit": commit}


def kept(seq: int, commit: str) -> dict[str, Any]:
    return {"pending": seq, "commit": commit, "nonce": b"\x07" * 32, "values": {}, "closed": False}


async def test_a_race_for_a_seq_keeps_both_secrets_apart_and_retiring_drops_the_losers(
    logs: tuple[NatsLog, NatsLog],  # noqa: F811
) -> None:
    a, b = logs
    room = (await new_room(a)).id
    await a.state(room)
    await b.state(room)
    first, second = "a" * 64, "b" * 64
    outcomes = await asyncio.gather(
        a.append(room, [pending(1, first)], 0, [kept(1, first)]),
        b.append(room, [pending(1, second)], 0, [kept(1, second)]),
        return_exceptions=True,
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["Conflict", "int"], outcomes
    won = first if outcomes[0] == 1 else second
    assert (await a.read(room, 0, 10))[0]["commit"] == won
    stored = {k["commit"]: k for k in await a.kept_rolls(room)}
    assert sorted(stored) == [first, second], "stored before publishing, each under its own key"
    assert stored[won]["nonce"] == b"\x07" * 32
    await b.retire_kept(room, 1, [(1, won)])
    assert [k["commit"] for k in await a.kept_rolls(room)] == [won]
    await a.retire_kept(room, 1, [])
    assert await a.kept_rolls(room) == []


async def test_values_through_two_nodes_go_in_once_each_and_closing_freezes_them(
    logs: tuple[NatsLog, NatsLog],  # noqa: F811
) -> None:
    a, b = logs
    room = (await new_room(a)).id
    commit = "c" * 64
    await a.append(room, [pending(1, commit)], 0, [kept(1, commit)])
    witnesses = [f"w{i}" for i in range(8)]
    outcomes = await asyncio.gather(
        *(
            (a if i % 2 else b).keep_witness(room, 1, commit, w, bytes([i]) * 16)
            for i, w in enumerate(witnesses)
        )
    )
    assert outcomes == ["stored"] * 8, "compare-and-set: no value lost to another node's"
    assert await b.keep_witness(room, 1, commit, "w0", b"x" * 16) == "twice"
    closed = await b.close_pending(room, 1, commit)
    assert closed is not None
    assert sorted(closed["values"]) == witnesses
    assert await a.keep_witness(room, 1, commit, "late", b"y" * 16) == "closed"
    again = await a.close_pending(room, 1, commit)
    assert again is not None
    assert again["values"] == closed["values"], "closing again gives the same values"
    assert await a.keep_witness(room, 1, "d" * 64, "w9", b"z" * 16) == "missing"
