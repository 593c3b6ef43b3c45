"""Reaching the NATS store as NATS conventions say: a password in the address, one server without a cluster,
and a store that cannot be used refused with one sentence."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

import nats
import nats.js.errors
import pytest

from relay.storage.nats.connect import BucketUnsettled, StoreError, ensure_bucket, patiently
from relay.storage.nats.log import NatsLog
from relay.storage.nats.stream import STREAM
from tests.cluster.conftest import signing_key_pem
from tests.cluster.natsd import NatsServer, free_port
from tests.console import serve_refusal, tablerelay_bin
from tests.e2e.servers import server_env

T = TypeVar("T")


class Attempts(Generic[T]):
    """An attempt for ``patiently`` that counts its calls; ``retrying`` is set at the second."""

    def __init__(self, attempt: Callable[[], Awaitable[T]]) -> None:
        self.attempt = attempt
        self.count = 0
        self.retrying = asyncio.Event()

    def __call__(self) -> Awaitable[T]:
        self.count += 1
        if self.count == 2:
            self.retrying.set()
        return self.attempt()


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[NatsServer]:
    """One JetStream server (no cluster) that wants a user and password."""
    server = NatsServer(
        "solo", tmp_path, free_port(), 0, [], extra='authorization { user: "gm", password: "s3cret" }\n'
    )
    server.start()
    server.wait_ready(time.monotonic() + 20)
    yield server
    server.stop()


async def test_a_password_in_the_address_and_one_replica_on_one_server(guarded: NatsServer) -> None:
    store = f"nats://gm:s3cret@127.0.0.1:{guarded.port}"
    log = await NatsLog.connect(store)
    try:
        assert log.replicas == 1, "one server holds one replica"
        info = await log.js.stream_info(STREAM)
        assert info.config.num_replicas == 1
        room = await log.create_room("solo", fear_max=12, hope_max=6, max_rooms=10)
        assert (await log.state(room.id)).seq == 0
    finally:
        await log.close()
    with pytest.raises(StoreError) as refused:
        await NatsLog.connect(f"nats://gm:wrong@127.0.0.1:{guarded.port}")
    message = str(refused.value)
    assert "wrong" not in message, "a password never appears in a message"
    assert message.startswith("Cannot reach the NATS servers"), message
    assert message.endswith("."), message


def test_serve_refuses_a_store_it_cannot_use_with_one_sentence(tmp_path: Path) -> None:
    env = server_env("s" * 32, {"TABLERELAY_SIGNING_KEY": signing_key_pem()})
    for store, words in (
        ("redis://127.0.0.1:6379", "nats://"),
        (f"nats://127.0.0.1:{free_port()}", "Cannot reach the NATS servers"),
    ):
        line = serve_refusal(tmp_path, env, "--store", store)
        assert words in line, line


@pytest.mark.parametrize(
    "args",
    [
        ["backup", "/tmp/no-such-backup.sqlite3"],
    ],
)
def test_commands_of_the_sqlite_store_only_refuse_a_nats_store(tmp_path: Path, args: list[str]) -> None:
    env = server_env("s" * 32, {"TABLERELAY_STORE": f"nats://127.0.0.1:{free_port()}"})
    done = subprocess.run(
        [tablerelay_bin(), *args, "--data", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode in (1, 2), done.stdout + done.stderr
    assert "SQLite store only" in done.stderr, done.stderr
    assert not (tmp_path / "tablerelay.sqlite3").exists(), "nothing was done to a local file instead"


@pytest.mark.parametrize("args", [["room", "delete", "abc", "--yes"], ["room", "archive", "abc"]])
def test_life_cycle_commands_say_an_unreachable_nats_store_cannot_be_reached(
    tmp_path: Path, args: list[str]
) -> None:
    env = server_env("s" * 32, {"TABLERELAY_STORE": f"nats://127.0.0.1:{free_port()}"})
    done = subprocess.run(
        [tablerelay_bin(), *args, "--data", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Cannot reach the NATS servers" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "tablerelay.sqlite3").exists(), "nothing was done to a local file instead"


async def test_setting_up_waits_out_a_bucket_that_has_no_leader_yet(guarded: NatsServer) -> None:
    # What a node starting beside another, or right after the cluster, meets: a put to a KV bucket whose
    # stream is not there (or not led) yet gets no answer. ``patiently`` (the store's connect and the
    # presence buckets use it) tries again until it is; something that never comes is given up on.
    nc = await nats.connect(f"nats://gm:s3cret@127.0.0.1:{guarded.port}")
    try:
        js = nc.jetstream(timeout=2)
        with pytest.raises(nats.js.errors.NoStreamResponseError):
            await js.publish("$KV.later.key", b"1")

        # Without a clock: the attempts are counted, and the bucket is made only once ``patiently`` has
        # been refused and is trying again, so its success can only come from waiting.
        later = Attempts(lambda: js.publish("$KV.later.key", b"1"))
        never = Attempts(lambda: js.publish("$KV.never.key", b"1"))

        async def make_it() -> None:
            await later.retrying.wait()
            await js.create_key_value(bucket="later", history=1)

        maker = asyncio.create_task(make_it())
        ack = await patiently(later, timeout=10)
        await maker
        assert ack.stream == "KV_later"
        assert later.count >= 2, "it was refused, waited for the bucket and tried again"
        assert (await (await js.key_value("later")).get("key")).value == b"1"
        with pytest.raises(nats.js.errors.NoStreamResponseError):
            await patiently(never, timeout=0.5)
        # Each try again follows a sleep of a quarter second: past its timeout it gives up within two more.
        assert 2 <= never.count <= 0.5 / 0.25 + 2, "it tried again, then gave up"
    finally:
        await nc.close()


async def test_a_bucket_refused_and_not_found_is_waited_for_then_named(guarded: NatsServer) -> None:
    # A node whose create timed out under load, or that raced another node making the same bucket, can be
    # refused (the stream is being made) and then not find it yet: that passes, so setting up waits it out.
    # Here a stream already holding the bucket's subjects makes JetStream refuse, for as long as it stays.
    nc = await nats.connect(f"nats://gm:s3cret@127.0.0.1:{guarded.port}")
    try:
        js = nc.jetstream(timeout=2)
        await js.add_stream(name="squatter", subjects=["$KV.held.>"])
        with pytest.raises(BucketUnsettled) as unsettled:
            await ensure_bucket(js, "held", 1)
        assert str(unsettled.value).startswith("the bucket held could not be made ("), str(unsettled.value)

        held = Attempts(lambda: ensure_bucket(js, "held", 1))

        async def leave() -> None:
            await held.retrying.wait()  # refused once, trying again
            await js.delete_stream("squatter")

        leaving = asyncio.create_task(leave())
        kv = await patiently(held, timeout=10)
        await leaving
        assert held.count >= 2, "it was refused, waited for the way to clear and tried again"
        await kv.put("key", b"1")
        assert (await (await js.key_value("held")).get("key")).value == b"1"
        await js.add_stream(name="squatter", subjects=["$KV.kept.>"])
        with pytest.raises(BucketUnsettled):
            await patiently(lambda: ensure_bucket(js, "kept", 1), timeout=0.5)
    finally:
        await nc.close()
