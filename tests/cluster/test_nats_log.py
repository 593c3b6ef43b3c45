"""The NATS JetStream event log itself, two instances (two "nodes") on the real 3-server cluster."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

import nats.js.errors
import pytest
from nats.aio.msg import Msg

from relay.core.info import RoomInfo
from relay.storage.base import Conflict, RoomLimitReached
from relay.storage.nats.acks import ACK_SWEEP
from relay.storage.nats.log import APPEND_DEADLINE, WRONG_LAST_SEQUENCE, NatsLog
from relay.storage.nats.stream import PUBLISH_TIMEOUT, STREAM, encode_message, stream_seq_of, subject
from tests.cluster.natsd import NatsCluster


def record(seq: int, kind: str = "roll") -> dict[str, Any]:
    return {
        "seq": seq,
        "ts": 1_700_000_000_000 + seq,
        "kind": kind,
        "epoch": "e",
        "actor": {"id": "a", "name": "A", "role": "gm"},
        "visibility": "public",
    }


@pytest.fixture
async def logs(nats: NatsCluster) -> AsyncIterator[tuple[NatsLog, NatsLog]]:
    a = await NatsLog.connect(nats.store)
    b = await NatsLog.connect(nats.store)
    yield a, b
    await asyncio.gather(a.close(), b.close())


async def new_room(log: NatsLog) -> RoomInfo:
    return await log.create_room("log test", fear_max=12, hope_max=6, max_rooms=100_000)


async def test_appends_chain_and_the_loser_of_a_race_gets_conflict(logs: tuple[NatsLog, NatsLog]) -> None:
    a, b = logs
    room = await new_room(a)
    await a.state(room.id)
    await b.state(room.id)
    first = a.append(room.id, [record(1), record(2)], 0)
    second = a.append(room.id, [record(3)], 2)  # made while the first is in flight: chained behind it
    assert (await first, await second) == (2, 3)
    with pytest.raises(Conflict) as lost:
        await b.append(room.id, [record(1)], 0)
    assert lost.value.actual == 3, "the conflict names the room's real last seq"
    # Appends made before the failure's callbacks have run are refused too (they may be built on the failed
    # one); the server appends again only from those callbacks or later.
    with pytest.raises(Conflict):
        await b.append(room.id, [record(4)], 3)
    await asyncio.sleep(0)
    assert await b.append(room.id, [record(4)], 3) == 4
    assert [r["seq"] for r in await a.read(room.id, 0, 100)] == [1, 2, 3, 4]
    assert [r["seq"] for r in await a.read(room.id, 2, 1)] == [3], "a read starting inside a message"
    assert (await b.state(room.id)).seq == 4
    assert await a.last_seq(room.id) == 4


async def test_each_node_is_given_the_others_events_once_in_order_and_never_its_own(
    logs: tuple[NatsLog, NatsLog],
) -> None:
    a, b = logs
    room = await new_room(a)
    got: dict[str, list[int]] = {"a": [], "b": []}
    held = {"a": 0, "b": 0}  # the last seq each node holds: its own appends and what it was given

    def given(name: str, records: list[Any]) -> None:
        got[name].extend(r["seq"] for r in records)
        held[name] = max(held[name], records[-1]["seq"])

    for name, log in (("a", a), ("b", b)):
        state = await log.state(room.id)
        log.follow(room.id, state.seq, functools.partial(given, name))
    # Appends alternate between the nodes (b stores seqs 1, 4, 7, ...). Each node appends on top of the
    # events it holds, as the server does (relay/shell/cluster/retries.py waits for the other node's events
    # after a lost race): an append built on a seq this node was never given is not a server's, and its
    # success would make the node take the events before it as already given.
    writers = {"a": a, "b": b}
    for turn in range(20):
        name = "a" if turn % 3 else "b"
        async with asyncio.timeout(10):
            while held[name] < turn:
                await asyncio.sleep(0.005)
        held[name] = await writers[name].append(room.id, [record(turn + 1)], turn)
    await asyncio.sleep(0.5)
    written_by_b = {t + 1 for t in range(20) if t % 3 == 0}
    assert got["a"] == sorted(written_by_b), "a is given exactly b's appends, in order"
    assert got["b"] == sorted(set(range(1, 21)) - written_by_b), "b is given exactly a's appends"


async def test_a_publish_retried_with_its_msg_id_is_stored_once_and_recognised(
    logs: tuple[NatsLog, NatsLog],
) -> None:
    """A try whose PubAck was lost (an election) is sent again with the same Msg-Id and expected sequence.
    JetStream stores it once and answers the retry with the first PubAck, or, when it checks the expected
    sequence first, with wrong-last-sequence: then the message right after the expected one is ours, which
    is how the log tells its own stored append from a lost race."""
    a, _ = logs
    room = await new_room(a)
    await a.state(room.id)
    payload = encode_message([record(1)])
    msg_id = "retry-test-" + room.id
    headers = {"Nats-Msg-Id": msg_id, "Nats-Expected-Last-Subject-Sequence": "0"}
    first = await a.js.publish(subject(room.id), payload, headers=dict(headers))
    code: int | None = None
    try:
        again = await a.js.publish(subject(room.id), payload, headers=dict(headers))
    except nats.js.errors.APIError as exc:
        code = exc.err_code
    else:
        assert again.duplicate is True
        assert again.seq == first.seq, "the retry is answered with the first PubAck"
    assert code in (None, WRONG_LAST_SEQUENCE)
    lane = a._lane(room.id)
    assert await a._stored_as(lane, msg_id, 0) == first.seq
    assert await a._stored_as(lane, "someone-else", 0) is None
    assert [r["seq"] for r in await a.read(room.id, 0, 10)] == [1]
    info = await a.js.stream_info(STREAM, subjects_filter=subject(room.id))
    assert info.state.subjects == {subject(room.id): 1}


async def test_rooms_are_listed_by_every_node_and_limited(logs: tuple[NatsLog, NatsLog]) -> None:
    a, b = logs
    room = await new_room(a)
    assert await b.get_room(room.id) == room
    assert room.id in {r.id for r in await b.list_rooms()}
    assert await b.get_room("no-such-room") is None
    assert await b.get_room("not a subject token!") is None
    with pytest.raises(RoomLimitReached):
        await b.create_room("one too many", fear_max=12, hope_max=6, max_rooms=1)


async def test_a_rooms_dice_seeds_are_the_same_for_every_node_and_go_with_the_room(
    logs: tuple[NatsLog, NatsLog],
) -> None:
    a, b = logs
    room = await new_room(a)
    mine, theirs = bytes(range(32)), bytes(range(32, 64))
    assert await a.ensure_seed(room.id, 1, mine) == mine
    assert await b.ensure_seed(room.id, 1, theirs) == mine, "the first stored wins on every node"
    assert await b.ensure_seed(room.id, 2, theirs) == theirs
    assert await a.seeds(room.id) == {1: mine, 2: theirs}
    assert await b.seeds(room.id, 2) == {2: theirs}
    assert await a.read(room.id, 0, 10) == [], "no seed is an event"
    assert await a.delete_room(room.id) is True
    assert await b.seeds(room.id) == {}


def test_the_stream_seq_is_read_from_either_form_of_a_delivered_messages_reply_subject() -> None:
    # What nats-py's Msg.metadata reads, without building it: the old form (this cluster's servers send it)
    # and the form with a domain and an account hash.
    old = "$JS.ACK.TABLERELAY_EVENTS.cons.1.4711.9.1795582400201992186.0"
    new = "$JS.ACK._.ACCHASH.TABLERELAY_EVENTS.cons.1.4711.9.1795582400201992186.0.rnd"
    for reply in (old, new):
        assert stream_seq_of(reply) == 4711
        assert stream_seq_of(reply) == Msg(None, reply=reply).metadata.sequence.stream  # type: ignore[arg-type]


async def test_a_publish_whose_puback_is_late_is_sent_again_and_stored_once(nats: NatsCluster) -> None:
    # The two servers that do not lead the stream paused: no quorum, so no PubAck comes until they go on.
    # The leader keeps its term (pausing it would start an election, slow enough to reach the append's
    # deadline on a busy machine), and the log's connection is to it, so it stays open.
    probe = await NatsLog.connect(nats.store, follow=False)
    try:
        info = await probe.js.stream_info(STREAM)
    finally:
        await probe.close()
    assert info.cluster is not None
    leader = nats.by_name(str(info.cluster.leader))
    others = [server for server in nats.servers if server is not leader]
    log = await NatsLog.connect(leader.url)
    try:
        room = await new_room(log)
        await log.state(room.id)
        assert await log.append(room.id, [record(1)], 0) == 1
        for server in others:
            server.pause()
        try:
            pending = log.append(room.id, [record(2), record(3)], 1)
            await asyncio.sleep(PUBLISH_TIMEOUT + ACK_SWEEP + 0.5)
            assert not pending.done(), "not acknowledged without a quorum"
        finally:
            for server in others:
                server.resume()
        assert await asyncio.wait_for(pending, APPEND_DEADLINE) == 3
        assert next(log._acks.tokens) > 3, "the late publish was sent again (its first PubAck never counted)"
        assert [r["seq"] for r in await log.read(room.id, 0, 100)] == [1, 2, 3], "stored once"
    finally:
        await log.close()


class _ReadsTimeOut(NatsLog):
    """The log as it is, but finding out what became of a lost race times out, as it does while the
    stream elects a leader (the moment an election gives, made to happen here on every try)."""

    async def _stored_as(self, lane: Any, msg_id: str, after: int) -> int | None:
        raise TimeoutError("nats: timeout")


async def test_a_lost_race_whose_outcome_cannot_be_read_still_answers_and_frees_the_lane(
    nats: NatsCluster,
) -> None:
    # A publish refused for a stale expected sequence leads the log to read the message after it and the
    # tail. When those reads fail too (an election), the append must fail, not wait forever: before, the
    # failure escaped the publish, the message's requesters were never answered (a client's roll hung in
    # the leader-kill test) and the lane kept counting the publish as in flight.
    a = await _ReadsTimeOut.connect(nats.store, follow=False)  # no stream delivery: its tail stays stale
    b = await NatsLog.connect(nats.store)
    try:
        room = await new_room(a)
        await a.state(room.id)
        assert await a.append(room.id, [record(1)], 0) == 1
        await b.state(room.id)
        assert await b.append(room.id, [record(2)], 1) == 2
        lost = a.append(room.id, [record(2)], 1)  # the stream has 2 already; a does not know it
        await asyncio.wait({lost}, timeout=APPEND_DEADLINE)
        assert lost.done(), "the requesters are answered"
        assert isinstance(lost.exception(), TimeoutError)
        lane = a._lanes[room.id]
        assert not lane.own, "the publish is not counted as in flight any more"
        assert lane.tail_seq == -1, "the tail is read again before the next append"
        await asyncio.sleep(0)
        assert await a.append(room.id, [record(3)], 2) == 3, "the lane goes on"
        assert [r["seq"] for r in await b.read(room.id, 0, 100)] == [1, 2, 3]
    finally:
        await asyncio.gather(a.close(), b.close())


async def test_an_unfollowed_room_is_let_go_and_followed_again_from_its_state(
    logs: tuple[NatsLog, NatsLog],
) -> None:
    a, b = logs
    room = await new_room(a)
    await a.state(room.id)
    got: list[int] = []
    b.follow(room.id, (await b.state(room.id)).seq, lambda records: got.extend(r["seq"] for r in records))
    assert await a.append(room.id, [record(1)], 0) == 1
    for _ in range(50):
        if got:
            break
        await asyncio.sleep(0.02)
    assert got == [1]
    b.unfollow(room.id)
    assert room.id not in b._lanes, "nothing is kept for the room"
    assert await a.append(room.id, [record(2), record(3)], 1) == 3
    await asyncio.sleep(0.3)
    assert got == [1], "nothing is delivered for a room the server let go"
    assert room.id not in b._lanes, "nor is it kept when its messages arrive"
    state = await b.state(room.id)
    assert state.seq == 3, "the store has what came meanwhile"
    b.follow(room.id, state.seq, lambda records: got.extend(r["seq"] for r in records))
    assert await a.append(room.id, [record(4)], 3) == 4
    for _ in range(50):
        if got[-1] == 4:
            break
        await asyncio.sleep(0.02)
    assert got == [1, 4], "followed again from the state it was loaded with"
