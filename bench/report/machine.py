"""The page's Machine and Method sections: what a run measured on, and how it measured."""

from __future__ import annotations

import json
from typing import Any

from bench.report.common import table

SERVER_LIBS = ("websockets", "msgpack", "python-socketio", "python-engineio", "aiohttp")
CLIENT_LIBS = ("ws (node)", "socket.io-client (node)", "@msgpack/msgpack (node)")


def machine_section(results: dict[str, Any]) -> str:
    m = results["machine"]
    pk = m["packages"]
    rows = [
        ("tablerelay revision", f"`{m.get('revision', 'unknown')}`"),
        ("CPU", f"{m['cpu']}, {m['cores']} cores"),
        ("memory", f"{m['memory_gib']} GiB"),
        ("kernel", m["kernel"]),
        ("Python", m["python"]),
        ("Node", m["node"]),
        ("descriptor limit (soft/hard)", m["nofile"]),
        (
            "server libraries",
            ", ".join(f"{name} {pk[name]}" for name in SERVER_LIBS),
        ),
        (
            "client libraries",
            ", ".join(f"{name.removesuffix(' (node)')} {pk[name]}" for name in CLIENT_LIBS),
        ),
        ("load average at start (1, 5, 15 min)", ", ".join(str(x) for x in m["load_at_start"])),
    ]
    load_rows = [
        (
            name,
            ", ".join(str(x) for x in v["before"]),
            ", ".join(str(x) for x in v["after"]),
            f"{results['timings'].get(name, 0):g} s",
            f"{v['python_ms']:g} ms" if "python_ms" in v else "–",
        )
        for name, v in results.get("load", {}).items()
    ]
    speeds = [v["python_ms"] for v in results.get("load", {}).values() if "python_ms" in v]
    varied = (
        f" In this run the reading went from {min(speeds):g} to {max(speeds):g} ms: the machine's speed"
        " changed while it ran, so absolute figures of different sections do not compare; ratios within"
        " a section do."
        if speeds and max(speeds) > 1.25 * min(speeds)
        else ""
    )
    peak = max([m["load_at_start"][0]] + [v["before"][0] for v in results.get("load", {}).values()])
    shared = (
        f" (in this run the one-minute load reached {peak:g} on {m['cores']} cores)" if peak > 3.5 else ""
    )
    return f"""## Machine

{table(["", ""], rows, "ll")}

The load average around each section is below. It counts the suite's own processes too: a server and
its receivers keep about two runnable processes busy, so a one-minute load well above 2–3 means other
work shared the machine{shared}. With more runnable processes than cores every process gets a slice, so
absolute figures drop and get noisier; the ratios compare servers measured minutes apart under similar
load, and the CPU-per-delivery figures (CPU time, not wall time) are the least affected.

The machines of this kind are not all equally fast, and a section measured again on another day may have
run on a slower or faster one: "Python speed" is how long a fixed piece of pure Python (300,000 loop
steps, `bench.tools.machine.python_speed`) took just before the section. Absolute rates scale with it; every
ratio on this page compares servers measured in the same section, on the same machine ("–": measured
before this reading existed). It is a snapshot: on some days the machine's speed flips between about 13
and 22 ms from one second to the next (table of changes), and a section that read fast may still have run
slow.{varied}

{table(["section", "load before", "load after", "took", "Python speed"], load_rows)}
"""


def method_section(results: dict[str, Any]) -> str:
    cal = results["calibration"]
    return f"""## Method

- **Three servers, one harness.** Each measurement starts a fresh server process: tablerelay
  (`tablerelay serve`, SQLite in a fresh data folder, default durability, info logs to a file, on uvloop,
  its default event loop), a bare `websockets` server on the same loop, so a ratio compares servers and
  not loops (`bench/peers/loop.py`; `BENCH_PEER_LOOP=asyncio` puts the peers on asyncio's own loop)
  (`bench/peers/bare_ws.py`: answers every message with one `broadcast()` of the
  relay's own roll event, {cal["frame_size"]} bytes as the relay sent it, only its seq patched in as a
  4-byte integer, so receivers that decode read the same map on both: no parsing, storage or dice; the
  floor of our stack) and python-socketio on aiohttp
  (`bench/peers/socketio_server.py`: `emit` to a room of the same roll event as a JSON object,
  {cal["json_size"]} bytes of JSON, the way Socket.IO ships objects; Socket.IO is the protocol a Foundry VTT
  server speaks to its clients). All clients are one Node program, `bench/receivers/harness.mjs`, in
  processes separate from the server: `ws` clients for the relay and the bare server, `socket.io-client`
  (WebSocket transport only) for python-socketio. Everything runs over loopback.
- **The roll.** `{json.dumps(cal["intent"])}`, labelled "{cal["label"]}", public: a Draw Steel power roll with
  Might 2 and an edge. Its event frame is {cal["frame_size"]} bytes of MessagePack; the relay's first run of
  each suite captures one and the peers broadcast it: its bytes (bare), its content as JSON
  (python-socketio).
- **Rooms and members.** Relay receivers join as one spectator participant per room with many sockets (a
  token with a fixed `sub`), so opening thousands of sockets does not also store and broadcast thousands of
  `join` events; every socket still receives every event. The driver is the room's GM; rollers are
  players, one participant each.
- **Limits lifted for the relay** (through its environment variables, nothing else changed): the
  per-socket rate limit (`TABLERELAY_RATE`, `TABLERELAY_BURST`: a driver sends hundreds of rolls per
  second on one socket), and the room and member caps (`TABLERELAY_MAX_ROOMS`, `TABLERELAY_MAX_MEMBERS`).
  Bursts stay below the relay's 1,024-frame send queue, so its slow-client guard never fires.
- **Fair dice on, as shipped** (since they became the default): every relay roll is made from its room's
  committed seed and carries its `fair` map. The drivers send no roller seed and nobody witnesses, so each
  roll is unwitnessed (the fair dice section measures roller seeds and witnesses). The seed's reveal every
  250 rolls is put off (`TABLERELAY_SEED_ROLLS`), since those two events more per 250 rolls would be counted
  as deliveries; a window's first roll commits the seed during the warm-up.
- **Ratios in the same run.** Every ratio compares servers measured in the same run of the suite, on the
  same machine, with the same client processes; absolute figures are printed beside them.
- **Every wait is bounded.** Each load loop stops after a fixed number of events or seconds; a run that
  does not finish in time fails with the process and log that stalled.
- **Profiles.** After the measured runs, py-spy samples the relay (out of process, `--nonblocking`) during
  an extra fan-out burst and an extra append run; a tracemalloc run of the relay shows where connection
  memory goes. These diagnostic runs are not part of any figure.
"""
