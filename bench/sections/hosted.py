"""A hosted relay's real day: thousands of small tables on one relay process, and a restart under them.

Tables of six (a GM, four players, a spectator), every member a real ``TableRelay`` from ``clients/js``
running in Node (``bench/receivers/hosted.mjs``: its reconnect backoff, resume and retries of rolls in
flight), every socket bound to a source address of its own in 127.0.0.0/8, the clients split over several
Node processes. Each table acts on its own schedule (exponential gaps, on average one action per
``mean_s``): rolls of every seed system and both dice dialects, public and GM-only (sealed for the others),
the GM's reveals, Fear gains and spends. Keepalive is on at both ends (the relay's pings, the client's
heartbeat).

Measured each second: intent → last member of the table (p50, p99, max), the server's CPU share, RSS,
event-loop lag (``/healthz``), descriptors. The same tables and schedule then go through plain sockets to
the bare ``websockets`` per-room broadcast peer (``bench/peers/bare_ws.py``; every roll from one socket
per table, so the peer's numbering of a room's messages is the order they were sent).

The restart: with every socket connected and tables rolling, SIGTERM the relay and start it again on the
same port and data folder. Measured: from the new process listening to every client welcomed again (its
resume applied); then, with the rolling stopped and every request answered, each client's seqs against the
room's log (lost, duplicated), and each room's stored rolls against the ids its clients had acknowledged
(a roll in flight at the close, sent again with the same id by the client, stored once).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.sections.latency import percentile
from bench.tools import servers
from bench.tools.harness import (
    ROOT,
    VENV_BIN,
    BenchError,
    Clients,
    ServerProcess,
    close_all,
    raise_nofile,
    rss_kib,
    start_server,
)
from bench.tools.machine import listen_overflows, loadavg
from bench.tools.profile import sampled_if_asked
from relay.settings.config import load
from relay.storage.sqlite.db import connect as db_connect
from relay.storage.sqlite.db import create_room_sync
from relay.trust import tokens

GENERATOR = ROOT / "bench" / "receivers" / "hosted.mjs"
PER_SHARD = 4500  # clients per Node process: 18,000 sockets in four, each well under 20,000 descriptors
MEMBERS = 6
#: The relay as ``tablerelay serve`` runs it, its embedded default; only the room cap lifted (3,000 rooms
#: in one data folder), logs as JSON for the harness, and the drain's bound raised as docs/deployment.md
#: tells a host of many thousands of sockets to (each socket gets a close handshake: 6,000 took 22 s on a
#: busy 2-core machine, past the default 20 s). Its per-address limit stays the default (256): every client
#: socket comes from an address of its own, as a hosted relay's users do.
ENV = {"TABLERELAY_MAX_ROOMS": "100000", "TABLERELAY_LOG_FORMAT": "json", "TABLERELAY_DRAIN_TIMEOUT": "60"}
STOP_TIMEOUT = 75.0  # before the harness kills the relay: above the drain's bound, as a service manager's
#: ``BENCH_HOSTED_PROFILE=1``: py-spy samples the relay in the steady run and the storm (a diagnosis).
PROFILE = "BENCH_HOSTED_PROFILE"


@dataclass
class Table:
    room: str
    tokens: list[str]  # GM, four players, spectator


def make_tables(data: Path, count: int) -> list[Table]:
    """``count`` rooms in the data folder of a running relay, each with its six members' tokens."""
    secret = tokens.load_secret(data, None)
    config = load(overrides={"data": data})
    conn = db_connect(config.db_path, config.synchronous)
    out = []
    try:
        for i in range(count):
            info = create_room_sync(conn, f"table {i}", fear_max=12, hope_max=6, max_rooms=100_000)
            issued = [tokens.issue(secret, info.id, "gm", name="GM")]
            issued += [
                tokens.issue(secret, info.id, "player", sub=f"p{k}", name=f"Player {k}") for k in range(4)
            ]
            issued.append(tokens.issue(secret, info.id, "spectator", sub="watcher", name="Watcher"))
            out.append(Table(info.id, issued))
    finally:
        conn.close()
    return out


@dataclass
class Relay:
    """One relay process on a data folder, restartable on the same port (a deploy's stop and start)."""

    data: Path
    log_dir: Path
    env: dict[str, str]
    port: int = 0
    process: ServerProcess | None = None
    lives: int = 0
    #: Another tree's ``relay/`` and ``rules/`` run ahead of the editable install (``bench.studies``'
    #: variants: an export of an earlier commit); None: this working tree.
    source: Path | None = None

    async def start(self) -> float:
        """Start it; returns when it logged ``listening`` (the wall-clock time of that line)."""
        self.lives += 1
        argv = [str(VENV_BIN / "tablerelay"), "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        argv += ["--data", str(self.data)]
        log = self.log_dir / f"hosted-relay-{self.lives}.log"
        env = self.env if self.source is None else {**self.env, "PYTHONPATH": str(self.source)}
        self.process = await start_server(
            "relay", argv, log, env=env, data=self.data, cwd=self.source or ROOT
        )
        self.port = self.process.port
        return _listening_time(log)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        if self.process is None or self.process.proc.returncode is not None:
            return
        self.process.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.proc.wait(), timeout)
        except TimeoutError:
            self.process.proc.kill()
            await self.process.proc.wait()


def _listening_time(log: Path) -> float:
    for line in log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            data = json.loads(line)
            if data.get("event") == "listening":
                stamp = data.get("timestamp")
                if isinstance(stamp, str):
                    with contextlib.suppress(ValueError):
                        from datetime import datetime

                        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    return time.time()


@dataclass
class Shard:
    """One ``hosted.mjs`` process; its per-second samples kept apart from its other lines."""

    clients: Clients
    samples: list[dict[str, Any]] = field(default_factory=list)
    other: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None

    async def route(self) -> None:
        while True:
            line = await self.clients.lines.get()
            if line.get("ev") == "sample":
                self.samples.append(line)
            else:
                await self.other.put(line)
            if line.get("ev") == "exit":
                return

    async def expect(self, event: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"{self.clients.name}: no {event!r} within {timeout:.0f} s")
            try:
                line = await asyncio.wait_for(self.other.get(), left)
            except TimeoutError:
                continue
            if line.get("ev") == event:
                return line
            if line.get("ev") in ("fail", "exit"):
                tail = self.clients.stderr.read_text(errors="replace")[-2000:]
                raise BenchError(f"{self.clients.name}: {str(line)[:2000]}\n{tail}")

    def send(self, **command: Any) -> None:
        self.clients.send(**command)


async def start_shards(run_dir: Path, tag: str, count: int) -> list[Shard]:
    shards = []
    for i in range(count):
        name = f"{tag}-{i}"
        stderr = run_dir / f"{name}.stderr"
        with stderr.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                "node",
                str(GENERATOR),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                cwd=ROOT,
                preexec_fn=raise_nofile,
                limit=1 << 27,  # the report carries every client's seqs on one line
            )
        clients = Clients(name, proc, stderr)
        clients.start_reading()
        shard = Shard(clients)
        shard.task = asyncio.create_task(shard.route())
        shards.append(shard)
    return shards


async def stop_shards(shards: list[Shard]) -> None:
    for shard in shards:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, AssertionError):
            shard.send(cmd="quit")
    await close_all([s.clients for s in shards])
    for shard in shards:
        if shard.task is not None:
            shard.task.cancel()


def _chunks(items: list[Table], parts: int) -> Iterator[tuple[int, list[Table]]]:
    size = math.ceil(len(items) / parts)
    for i in range(parts):
        yield i * size, items[i * size : (i + 1) * size]


async def open_tables(
    shards: list[Shard], kind: str, url: str, tables: list[Table], mean_s: float, seed: int
) -> int:
    """Connect every member of every table; the number connected (a failure is a BenchError)."""
    for shard, (first, part) in zip(shards, _chunks(tables, len(shards)), strict=True):
        shard.send(
            cmd="open",
            kind=kind,
            url=url,
            tables=[{"room": t.room, "tokens": t.tokens} for t in part],
            first=first * MEMBERS,
            meanMs=mean_s * 1000,
            seed=seed + first,
        )
    opened = await asyncio.gather(*(s.expect("open", 60 + len(tables) / 10) for s in shards))
    failed = sum(o["failed"] for o in opened)
    if failed:
        raise BenchError(f"hosted {kind}: {failed} of {len(tables) * MEMBERS} clients could not connect")
    return sum(int(o["n"]) for o in opened)


class Watch:
    """The server's figures each second: CPU share, RSS, descriptors, (the relay) /healthz's loop lag."""

    def __init__(self, pid: int, port: int | None) -> None:
        self.pid, self.port = pid, port
        self.rows: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None

    def follow(self, pid: int) -> None:
        self.pid = pid

    def __enter__(self) -> Watch:
        self._task = asyncio.create_task(self._run())
        return self

    def __exit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        last: tuple[int, float, float] | None = None
        while True:
            now = time.time()
            with contextlib.suppress(OSError, ValueError, IndexError, BenchError):
                cpu = _cpu_tree(self.pid)
                row: dict[str, Any] = {"t": now, "rss_mib": rss_kib(self.pid) / 1024, "fds": _fds(self.pid)}
                if last is not None and last[0] == self.pid and now > last[1]:
                    row["cpu"] = (cpu - last[2]) / (now - last[1])
                last = (self.pid, now, cpu)
                if self.port is not None:
                    lag = await _healthz(self.port)
                    if lag is not None:
                        row["lag_p99_ms"] = lag.get("p99_ms")
                        row["lag_max_ms"] = lag.get("max_ms")
                self.rows.append(row)
            await asyncio.sleep(max(0.05, 1.0 - (time.time() - now)))


def _cpu_tree(pid: int) -> float:
    total = _cpu(pid)
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    total += _cpu(int(child))
    return total


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def _healthz(port: int) -> dict[str, Any] | None:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
    except (OSError, TimeoutError):
        return None
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        raw = await asyncio.wait_for(reader.read(), 2)
        body = raw.split(b"\r\n\r\n", 1)[1]
        lag = json.loads(body).get("loop_lag")
        return lag if isinstance(lag, dict) else None
    except (OSError, TimeoutError, ValueError, IndexError):
        return None
    finally:
        writer.close()


def series(shards: list[Shard], watch: Watch, t0: float, t1: float) -> list[dict[str, Any]]:
    """Per second from ``t0`` to ``t1``: the latencies that completed in it and the server's row."""
    out = []
    for second in range(int(t1 - t0) + 1):
        lo, hi = t0 + second, t0 + second + 1
        lat = [x for s in shards for row in s.samples if lo <= row["t"] / 1000 < hi for x in row["lat"]]
        rows = [r for r in watch.rows if lo <= r["t"] < hi]
        point: dict[str, Any] = {"s": second, "rolls": len(lat)}
        if lat:
            point.update(p50=percentile(lat, 50), p99=percentile(lat, 99), max=max(lat))
        if rows:
            point.update({k: v for k, v in rows[-1].items() if k != "t"})
        out.append(point)
    return out


def summary(shards: list[Shard], watch: Watch, t0: float, t1: float) -> dict[str, Any]:
    lat = [x for s in shards for row in s.samples if t0 <= row["t"] / 1000 < t1 for x in row["lat"]]
    rows = [r for r in watch.rows if t0 <= r["t"] < t1]
    cpu = [r["cpu"] for r in rows if "cpu" in r]
    lags = [r["lag_p99_ms"] for r in rows if r.get("lag_p99_ms") is not None]
    return {
        "rolls": len(lat),
        "rolls_per_second": len(lat) / max(1e-9, t1 - t0),
        "p50_ms": percentile(lat, 50) if lat else None,
        "p99_ms": percentile(lat, 99) if lat else None,
        "max_ms": max(lat) if lat else None,
        "cpu_share": sum(cpu) / len(cpu) if cpu else None,
        "cpu_peak": max(cpu) if cpu else None,
        "rss_mib": max((r["rss_mib"] for r in rows), default=None),
        "rss_end_mib": rows[-1]["rss_mib"] if rows else None,
        "fds": max((r["fds"] for r in rows), default=None),
        # /healthz's window is the last minute: its last reading covers the end of the steady run.
        "loop_lag_p99_ms": lags[-1] if lags else None,
        "loop_lag_max_ms": next((r["lag_max_ms"] for r in reversed(rows) if r.get("lag_max_ms")), None),
    }


def check_log(db: Path, reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Every client's seqs against its room's log, each room's stored rolls against its acked ids, and the
    joins and leaves stored (one join per member as the tables open, and whatever the restart added)."""
    conn = sqlite3.connect(db)
    try:
        last = dict(conn.execute("SELECT room, MAX(seq) FROM events GROUP BY room").fetchall())
        rolls = dict(conn.execute("SELECT room, COUNT(*) FROM events WHERE kind = 'roll' GROUP BY room"))
        comings = dict(
            conn.execute("SELECT kind, COUNT(*) FROM events WHERE kind IN ('join', 'leave') GROUP BY kind")
        )
    finally:
        conn.close()
    lost = dups = behind = clients = 0
    examples: list[dict[str, Any]] = []
    acked: dict[str, int] = {}
    for report in reports:
        for c in report["clients"]:
            clients += 1
            seqs = c["seqs"]
            dups += len(seqs) - len(set(seqs))
            top = int(last.get(c["room"], 0))
            base = int(c["base"] or 0)
            missing = set(range(base + 1, top + 1)) - set(seqs)
            if missing and not examples:
                examples.append(
                    {
                        "room": c["room"],
                        "role": c["role"],
                        "base": base,
                        "top": top,
                        "missing": sorted(missing)[:20],
                    }
                )
            lost += len(missing)
            behind += bool(missing)
        for room, ids in report["rolls"].items():
            acked[room] = acked.get(room, 0) + len(ids)
    stored_twice = sum(max(0, int(rolls.get(room, 0)) - n) for room, n in acked.items())
    unstored = sum(max(0, n - int(rolls.get(room, 0))) for room, n in acked.items())
    inflight = [i for r in reports for i in r["inflight"]]
    acked_ids = {i for r in reports for ids in r["rolls"].values() for i in ids}
    return {
        "clients": clients,
        "events": sum(int(v) for v in last.values()),
        "lost": lost,
        "clients_missing_events": behind,
        "duplicates": dups,
        "rolls_acked": sum(acked.values()),
        "rolls_stored": sum(int(v) for v in rolls.values()),
        "rolls_stored_beyond_acked": stored_twice,
        "rolls_acked_not_stored": unstored,
        "inflight_retried": len(inflight),
        "inflight_acked": sum(1 for i in inflight if i in acked_ids),
        "errors": _merge([r["errors"] for r in reports]),
        "joins": int(comings.get("join", 0)),
        "leaves": int(comings.get("leave", 0)),
        "examples": examples,
    }


def _merge(counts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return out


async def relay_run(
    run_dir: Path,
    *,
    tables: int,
    seconds: float,
    after_s: float,
    mean_s: float,
    restart: bool = True,
    seed: int = 37,
    extra_env: dict[str, str] | None = None,
    source: Path | None = None,
) -> dict[str, Any]:
    """The relay under ``tables`` tables for ``seconds``, then (``restart``) a SIGTERM and a start under
    them, ``after_s`` more seconds of rolling, and the log checked against every client. ``extra_env``
    adds settings to the relay's environment (experiments: ``TABLERELAY_FULL_GC=0``); ``source`` runs
    another tree's relay (``Relay.source``)."""
    data = Path(tempfile.mkdtemp(prefix="tablerelay-hosted-", dir=run_dir))
    relay = Relay(data, run_dir, {**ENV, **(extra_env or {})}, source=source)
    shards: list[Shard] = []
    try:
        await relay.start()
        made = make_tables(data, tables)
        shards = await start_shards(run_dir, "hosted-relay", max(2, math.ceil(tables * MEMBERS / PER_SHARD)))
        t_open = time.monotonic()
        connected = await open_tables(shards, "relay", f"ws://127.0.0.1:{relay.port}/ws", made, mean_s, seed)
        open_s = time.monotonic() - t_open
        out: dict[str, Any] = {"tables": tables, "clients": connected, "open_seconds": round(open_s, 1)}
        with Watch(relay.pid, relay.port) as watch:
            t0 = time.time()
            for shard in shards:
                shard.send(cmd="go")
            async with sampled_if_asked(PROFILE, relay.pid, run_dir / "hosted-steady.raw") as sampled:
                await asyncio.sleep(seconds)
            if sampled is not None:
                out["profile_steady"] = sampled.result
            t1 = time.time()
            out["steady"] = summary(shards, watch, t0 + min(5.0, seconds / 4), t1)
            if restart:
                out["restart"] = await _restart(relay, shards, watch)
                await asyncio.sleep(after_s)
            t2 = time.time()
            for shard in shards:
                shard.send(cmd="pause")
            for shard in shards:
                shard.send(cmd="settle", timeout=60_000)
            settled = await asyncio.gather(*(s.expect("settled", 90) for s in shards))
            out["series"] = series(shards, watch, t0, t2)
        for shard in shards:
            shard.send(cmd="report")
        reports = await asyncio.gather(*(s.expect("report", 120) for s in shards))
        # Read while the relay still runs: its own stop writes each member's leave, after the reports.
        out["pending_at_end"] = sum(s["pending"] for s in settled)
        out["check"] = check_log(load(overrides={"data": data}).db_path, reports)
        await relay.stop()
        out["load"] = loadavg()
        return out
    finally:
        await stop_shards(shards)
        await relay.stop()
        shutil.rmtree(data, ignore_errors=True)


async def _restart(relay: Relay, shards: list[Shard], watch: Watch) -> dict[str, Any]:
    """SIGTERM the relay under load, start it again on the same port and data, and wait for every client."""
    overflows = listen_overflows()
    t_term = time.time()
    for shard in shards:
        shard.send(cmd="storm", since=int(t_term * 1000))
    await relay.stop()
    t_down = time.time()
    assert relay.process is not None
    drained = relay.process.proc.returncode  # 0: the drain ended within its bound; 1: past it
    t_listen = await relay.start()
    watch.follow(relay.pid)
    async with sampled_if_asked(PROFILE, relay.pid, relay.log_dir / "hosted-storm.raw") as sampled:
        backs = await asyncio.gather(*(s.expect("back", 300) for s in shards))
    t_back = max(b["last"] for b in backs) / 1000
    await asyncio.sleep(2)
    overflows = {k: v - overflows.get(k, 0) for k, v in listen_overflows().items()}
    storm = [r for r in watch.rows if r["t"] >= t_listen - 0.5 and r["t"] <= t_back + 2]
    return {
        "drain_seconds": round(t_down - t_term, 2),
        "drain_exit": drained,
        "down_seconds": round(t_listen - t_term, 2),
        "back_seconds": round(t_back - t_listen, 2),
        "welcomes": sum(int(b["welcomes"]) for b in backs),
        "clients": sum(int(b["n"]) for b in backs),
        "cpu_peak": max((r.get("cpu", 0.0) for r in storm), default=None),
        "rss_peak_mib": max((r["rss_mib"] for r in storm), default=None),
        "fds_peak": max((r["fds"] for r in storm), default=None),
        "lag_max_ms": max((r.get("lag_max_ms") or 0 for r in storm), default=None),
        # The kernel's count for the whole machine (other processes' listeners too): handshakes dropped
        # because a listening socket's accept queue was full.
        "listen_overflows": overflows.get("ListenOverflows"),
        "listen_drops": overflows.get("ListenDrops"),
        **({"profile": sampled.result} if sampled is not None else {}),
    }


async def bare_run(
    run_dir: Path,
    calibration: servers.Calibration,
    *,
    tables: int,
    seconds: float,
    mean_s: float,
    seed: int = 37,
) -> dict[str, Any]:
    """The same tables and schedule against the bare websockets per-room broadcast peer."""
    server = await servers.start("bare", run_dir, calibration, "hosted")
    shards: list[Shard] = []
    try:
        made = [Table(f"t{i}", []) for i in range(tables)]
        shards = await start_shards(run_dir, "hosted-bare", max(2, math.ceil(tables * MEMBERS / PER_SHARD)))
        connected = await open_tables(
            shards, "bare", f"ws://127.0.0.1:{server.process.port}", made, mean_s, seed
        )
        with Watch(server.pid, None) as watch:
            t0 = time.time()
            for shard in shards:
                shard.send(cmd="go")
            await asyncio.sleep(seconds)
            t1 = time.time()
            out = {
                "tables": tables,
                "clients": connected,
                "steady": summary(shards, watch, t0 + min(5.0, seconds / 4), t1),
                "series": series(shards, watch, t0, t1),
            }
        out["load"] = loadavg()
        return out
    finally:
        await stop_shards(shards)
        await server.stop()


async def measure(
    run_dir: Path,
    calibration: servers.Calibration,
    *,
    tables: int,
    seconds: float,
    after_s: float,
    mean_s: float = 10.0,
) -> dict[str, Any]:
    """The section: the relay (with its restart), then the bare peer under the same load."""
    started = time.monotonic()
    load_before = loadavg()
    relay = await relay_run(run_dir, tables=tables, seconds=seconds, after_s=after_s, mean_s=mean_s)
    bare = await bare_run(run_dir, calibration, tables=tables, seconds=seconds, mean_s=mean_s)
    r, b = relay["steady"], bare["steady"]
    return {
        "tables": tables,
        "members": MEMBERS,
        "seconds": seconds,
        "mean_s": mean_s,
        "relay": relay,
        "bare": bare,
        "p99_ratio": r["p99_ms"] / b["p99_ms"] if r["p99_ms"] and b["p99_ms"] else None,
        "rss_ratio": r["rss_mib"] / b["rss_mib"] if r["rss_mib"] and b["rss_mib"] else None,
        "load_before": load_before,
        "wall_seconds": round(time.monotonic() - started, 1),
    }
