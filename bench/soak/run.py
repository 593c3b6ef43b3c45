"""The soak run: set up rooms, start the server (or use a running one), drive the clients until the deadline,
sample the server every few seconds, print a line per interval, and check the result at the end.

The checks, each a pass or a fail in the results:

- **no lost acknowledged event**: every acked seq is in its room's log afterwards, as the event that
  answered that request; every room's seqs are dense (1, 2, 3 …);
- **no internal error**: no error or critical line in the server's log, no ``internal`` error frame;
- **no protocol error** seen by a client (gaps, duplicates, hidden fields, unexpected codes or closes);
- **flat memory and descriptors**: the server's RSS and open file descriptors at the end within 5 % of
  what they were right after the warm-up (medians over a window at each end).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import random
import resource
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.soak.client import Client, Tally
from bench.soak.process import ServerProcess, get_json, open_fds, rss_bytes
from relay.core.state import ROLL_ID_WINDOW_MS
from relay.settings.config import Limits
from relay.shell import upkeep
from relay.storage.codec import decode_record
from relay.storage.sqlite.db import connect, create_room_sync
from relay.trust import tokens

FLAT = 0.05  # the largest change of RSS or descriptors after warm-up that counts as flat
STOP_GRACE = 60.0  # seconds past the deadline a client may take to notice it


@dataclass(frozen=True)
class Options:
    minutes: float = 10.0
    clients: int = 1000
    rooms: int = 200
    url: str | None = None  # a running server; else one is started on loopback with a temporary folder
    data: Path | None = None  # that server's data folder (rooms are created and verified there)
    pid: int | None = None  # that server's process, for RSS and descriptors
    warmup: float | None = None  # minutes; default: from what the server bounds (``warmup``)
    report_every: float = 60.0  # seconds between printed lines
    seed: int | None = None

    @property
    def seconds(self) -> float:
        return self.minutes * 60


def warmup(options: Options, samples: list[Sample], history: int) -> tuple[float, str]:
    """Seconds not held to the flatness checks, and why.

    Not a guess: what a loaded room holds is bounded by events and by time (docs/hardening.md), and the
    warm-up ends once every bound is reached. By events: a room's last ``history`` events, their signed
    forms and its hidden rolls' entries are kept, so those stop growing once every room has stored
    ``history`` events (the soak watches the highest seq its clients receive per room). By time: roll
    ids are kept for ``ROLL_ID_WINDOW_MS``. Then one look of the upkeep (``relay.shell.upkeep.EVERY``) drops
    what fell out of the windows. A run whose rooms never reach ``history`` events (a short one) falls
    back to a quarter of the run.
    """
    if options.warmup is not None:
        return options.warmup * 60, "set with --warmup"
    filled = next((s.t for s in samples if s.room_seq_min is not None and s.room_seq_min >= history), None)
    if filled is None:
        return min(180.0, options.seconds / 4), f"a quarter of the run: no room reached {history} events"
    window = ROLL_ID_WINDOW_MS / 1000
    return max(filled, window) + upkeep.EVERY, (
        f"every room had stored its last {history} events kept in memory at {filled / 60:.1f} min, "
        f"roll ids are kept {window / 60:.0f} min; plus one upkeep pass ({upkeep.EVERY:.0f} s)"
    )


@dataclass
class Sample:
    t: float  # seconds since the clients started
    rss: int | None
    fds: int | None
    lag_p99_ms: float | None
    connections: int | None
    acks: int
    errors: int  # client-side protocol errors plus server error lines, so far
    load: float  # the machine's 1-minute load average: loop lag includes waiting for a core
    room_seq_min: int | None = None  # the lowest of the rooms' highest seqs (``warmup``)


def _raise_fd_limit() -> None:
    """Clients and server each hold a descriptor per socket: lift the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _make_rooms(data: Path, rooms: int) -> list[tuple[str, str, str, str]]:
    """(room id, GM token, player invite, spectator invite) for ``rooms`` new rooms."""
    secret = tokens.load_secret(data)
    conn = connect(data / "tablerelay.sqlite3")
    try:
        made = []
        for i in range(rooms):
            info = create_room_sync(conn, f"soak {i}", fear_max=12, hope_max=6, max_rooms=Limits().max_rooms)
            made.append(
                (
                    info.id,
                    tokens.issue(secret, info.id, "gm", sub=tokens.new_gm_id(), name="GM"),
                    tokens.issue(secret, info.id, "player"),
                    tokens.issue(secret, info.id, "spectator"),
                )
            )
        return made
    finally:
        conn.close()


def _clients(
    options: Options, url: str, rooms: list[tuple[str, str, str, str]], tally: Tally, rng: random.Random
) -> list[Client]:
    """Spread over the rooms: each room's first client is its GM, its fifth a spectator, the rest players."""
    clients = []
    for i in range(options.clients):
        room, gm, player, spectator = rooms[i % len(rooms)]
        place = i // len(rooms)
        role, token = (
            ("gm", gm) if place == 0 else ("spectator", spectator) if place % 5 == 4 else ("player", player)
        )
        clients.append(Client(f"c{i}", url, room, role, token, tally, random.Random(rng.getrandbits(64))))
    return clients


def verify(data: Path, acks: list[tuple[str, int, str, str, str]], rooms: list[str]) -> dict[str, Any]:
    """Every acked event in the log as what answered it; every room's seqs dense."""
    conn = connect(data / "tablerelay.sqlite3")
    try:
        stored: dict[str, dict[int, dict[str, Any]]] = {}
        gaps = []
        for room in rooms:
            rows = conn.execute(
                "SELECT seq, data FROM events WHERE room = ? ORDER BY seq", (room,)
            ).fetchall()
            seqs = [int(seq) for seq, _ in rows]
            if seqs != list(range(1, len(seqs) + 1)):
                gaps.append(room)
            stored[room] = {int(seq): decode_record(blob) for seq, blob in rows}
    finally:
        conn.close()
    lost = []
    for room, seq, kind, rid, actor in acks:
        record = stored.get(room, {}).get(seq)
        if record is None or record["kind"] != kind:
            lost.append(f"{room} seq {seq} ({kind} {rid})")
        elif kind != "reveal" and (record.get("request") != rid or record["actor"]["id"] != actor):
            lost.append(f"{room} seq {seq} holds another request than {rid}")
    events = sum(len(r) for r in stored.values())
    # A roll retried after a reconnect must not be stored twice: one (participant, request id), one roll.
    rolls = Counter(
        (room, r["actor"]["id"], r.get("request"))
        for room, records in stored.items()
        for r in records.values()
        if r["kind"] == "roll"
    )
    twice = sum(1 for n in rolls.values() if n > 1)
    return {"acked": len(acks), "lost": len(lost), "lost_examples": lost[:10], "rooms_with_gaps": gaps,
            "events_stored": events, "rolls_stored_twice": twice}  # fmt: skip


def _flat(samples: list[Sample], key: str, start: float, end: float, window: float) -> dict[str, Any]:
    """The median of ``key`` just after the warm-up and at the end, and their relative change."""
    first = [getattr(s, key) for s in samples if start <= s.t <= start + window and getattr(s, key)]
    last = [getattr(s, key) for s in samples if end - window <= s.t <= end and getattr(s, key)]
    if not first or not last:
        return {"ok": None, "reason": "no samples (the server's process is unknown)"}
    before, after = statistics.median(first), statistics.median(last)
    change = (after - before) / before
    return {"ok": abs(change) <= FLAT, "after_warmup": before, "end": after, "change": round(change, 4)}


async def soak(options: Options, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the soak; the results (samples, counts, checks, ``ok``) as plain data."""
    _raise_fd_limit()
    rng = random.Random(options.seed)
    scratch = None
    server: ServerProcess | None = None
    if options.url is None:
        scratch = tempfile.TemporaryDirectory(prefix="tablerelay-soak-")
        data = Path(scratch.name)
        server = ServerProcess(data)
    else:
        if options.data is None:
            raise ValueError(
                "--url needs --data: the server's data folder, to create rooms and check its log"
            )
        data = options.data
    rooms = _make_rooms(data, options.rooms)
    tally = Tally()
    started_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    try:
        if server is not None:
            url = await server.start()
            pid: int | None = server.pid
        else:
            assert options.url is not None
            url, pid = options.url, options.pid
        split = urlsplit(url)
        host, port = split.hostname or "127.0.0.1", split.port or 80
        say(
            f"soak: {options.clients} clients in {len(rooms)} rooms against {url} for {options.minutes:g} min"
        )
        samples, server_errors = await _drive(options, url, host, port, pid, rooms, tally, rng, server, say)
        checks_data = verify(data, tally.acks, [r[0] for r in rooms])
        exit_code = await server.stop() if server is not None else None
        if server is not None:
            server_errors = server.errors
    finally:
        if server is not None and server.proc is not None and server.proc.returncode is None:
            await server.stop()
        if scratch is not None:
            scratch.cleanup()
    return _results(options, started_at, samples, tally, checks_data, server, server_errors, exit_code)


async def _drive(
    options: Options,
    url: str,
    host: str,
    port: int,
    pid: int | None,
    rooms: list[tuple[str, str, str, str]],
    tally: Tally,
    rng: random.Random,
    server: ServerProcess | None,
    say: Callable[[str], None],
) -> tuple[list[Sample], int]:
    loop = asyncio.get_running_loop()
    begin = loop.time()
    deadline = begin + options.seconds
    ramp = min(10.0, options.seconds / 5)  # clients connect over the first seconds, not all at once
    clients = _clients(options, url, rooms, tally, rng)
    tasks = [
        asyncio.create_task(c.run(begin + ramp * i / len(clients), deadline)) for i, c in enumerate(clients)
    ]
    samples: list[Sample] = []
    every = max(0.5, min(5.0, options.seconds / 40))
    next_report = options.report_every
    last_counts: Counter[str] = Counter()
    while loop.time() < deadline:
        await asyncio.sleep(min(every, max(0.0, deadline - loop.time())))
        sample = await _sample(loop.time() - begin, host, port, pid, tally, server, rooms)
        samples.append(sample)
        if sample.t + 1e-6 >= next_report or loop.time() >= deadline:
            say(_line(sample, tally, last_counts))
            last_counts = Counter(tally.counts) + Counter({"__acks": sample.acks, "__errors": sample.errors})
            next_report += options.report_every
    done, pending = await asyncio.wait(tasks, timeout=STOP_GRACE)
    for task in pending:
        task.cancel()
        tally.error("client did not stop", "a client was still running a minute past the deadline")
    for task in done:
        if task.exception() is not None:
            tally.error("client crashed", f"{type(task.exception()).__name__}: {task.exception()}")
    samples.append(await _sample(loop.time() - begin, host, port, pid, tally, server, rooms))
    return samples, server.errors if server is not None else 0


async def _sample(
    t: float,
    host: str,
    port: int,
    pid: int | None,
    tally: Tally,
    server: ServerProcess | None,
    rooms: list[tuple[str, str, str, str]],
) -> Sample:
    lag = connections = None
    try:
        health = await get_json(host, port, "/healthz")
        lag = float(health["loop_lag"]["p99_ms"])
        connections = int(health["connections"])
    except (OSError, TimeoutError, ValueError, KeyError) as exc:
        tally.error("healthz failed", f"{type(exc).__name__}: {exc}")
    server_errors = server.errors if server is not None else 0
    return Sample(
        t=round(t, 2),
        rss=rss_bytes(pid) if pid is not None else None,
        fds=open_fds(pid) if pid is not None else None,
        lag_p99_ms=lag,
        connections=connections,
        acks=tally.counts["acks"],
        errors=sum(tally.errors.values()) + server_errors,
        load=round(os.getloadavg()[0], 2),
        room_seq_min=min((tally.room_seq.get(room[0], 0) for room in rooms), default=None),
    )


def _line(sample: Sample, tally: Tally, last: Counter[str]) -> str:
    rss = f"{sample.rss / 2**20:.1f} MiB" if sample.rss is not None else "?"
    lag = f"{sample.lag_p99_ms:.1f} ms" if sample.lag_p99_ms is not None else "?"
    acks = sample.acks - last["__acks"]
    errors = sample.errors - last["__errors"]
    extra = ", ".join(
        f"{name} {tally.counts[name] - last[name]}"
        for name in ("reconnects", "slow pauses", "malformed frames", "closed 4008", "closed 1009")
    )
    return (
        f"{sample.t / 60:5.1f} min: RSS {rss}, fds {sample.fds}, loop lag p99 {lag}, "
        f"connections {sample.connections}, acks {acks:,}, errors {errors} ({extra}), load {sample.load}"
    )


def _results(
    options: Options,
    started_at: str,
    samples: list[Sample],
    tally: Tally,
    verified: dict[str, Any],
    server: ServerProcess | None,
    server_errors: int,
    exit_code: int | None,
) -> dict[str, Any]:
    # The last sample under load: those at the deadline and after it see the clients closing their sockets.
    under = [s.t for s in samples if s.t < options.seconds - 0.5]
    end = under[-1] if under else options.seconds
    warm, warm_basis = warmup(options, samples, Limits().history)
    # Medians over a minute at each end (a quarter of the measured time in a short run), so that a few
    # sockets reconnecting at the moment of one sample do not count as growth.
    step = samples[1].t - samples[0].t if len(samples) > 1 else 5.0
    window = max(3 * step, min(60.0, (options.seconds - warm) / 4))
    internal = tally.errors["error internal"] + server_errors
    checks = {
        "no lost acknowledged event": {
            "ok": verified["lost"] == 0 and not verified["rooms_with_gaps"],
            **verified,
        },
        "no roll stored twice": {
            "ok": verified["rolls_stored_twice"] == 0,
            "rolls_stored_twice": verified["rolls_stored_twice"],
        },
        "no internal error": {
            "ok": internal == 0,
            "server_error_lines": server_errors,
            "internal_frames": tally.errors["error internal"],
        },
        "no protocol error seen by a client": {"ok": sum(tally.errors.values()) == 0, **dict(tally.errors)},
        "RSS flat after warm-up": _flat(samples, "rss", warm, end, window),
        "open descriptors flat after warm-up": _flat(samples, "fds", warm, end, window),
    }
    if server is not None:
        checks["server stopped cleanly"] = {"ok": exit_code == 0, "exit_code": exit_code}
    under_load = [s.lag_p99_ms for s in samples if s.t >= warm and s.lag_p99_ms is not None]
    return {
        "started": started_at,
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(options).items()},
        "warmup_seconds": warm,
        "warmup_basis": warm_basis,
        "samples": [asdict(s) for s in samples],
        "counts": dict(tally.counts),
        "errors": dict(tally.errors),
        "error_samples": tally.samples,
        "server_error_lines": server.error_lines if server is not None else [],
        "trims": server.trims if server is not None else [],
        "memory_sites": server.sites if server is not None else [],
        "lag_p99_ms_max_after_warmup": max(under_load) if under_load else None,
        "checks": checks,
        "ok": all(c["ok"] is not False for c in checks.values()),
        "finished": time.time(),
    }
