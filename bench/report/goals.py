"""The page's Goals section: each of the issue's goals against this run, and where one is not met, what
bounds it, read from the sections' figures and profiles."""

from __future__ import annotations

import statistics
from typing import Any

from bench.report.common import (
    GOAL_APPENDS,
    GOAL_FANOUT_BARE,
    GOAL_FANOUT_SOCKETIO,
    GOAL_LATENCY_P99,
    GOAL_MEMORY_KIB,
    GOAL_ROOMS_APPENDS,
    GOAL_SIGNING,
    GOAL_SMALL_CHAIN_BARE,
    GOAL_TABLES_BARE,
    GOAL_TABLES_P99,
    SIGNING_NOISE,
    find,
    table,
    verdict,
)
from bench.report.fairness import fairness_goal_rows
from bench.report.memory import HISTORY_RETAINED, retained_history
from bench.report.signing import per_delivery_us, signing_pairs, spread
from bench.report.tables import TABLES_CHILD, TABLES_PARTS, tables_split


def goals_section(goals: dict[str, Any], results: dict[str, Any]) -> str:
    def row(name: str, want: str, key: str, fmt: str, ok: Any) -> tuple[str, str, str, str]:
        value = goals.get(key)
        return (
            name,
            want,
            fmt.format(value) if value is not None else "–",
            verdict(None if value is None else ok(value)),
        )

    rows = [
        row(
            "fan-out at N = 1,000 (bursts) vs bare websockets",
            f"≥ {GOAL_FANOUT_BARE}×",
            "fanout_bare",
            "{:.2f}×",
            lambda v: v >= GOAL_FANOUT_BARE,
        ),
        row(
            "fan-out at N = 1,000 (bursts) vs python-socketio",
            f"≥ {GOAL_FANOUT_SOCKETIO:g}×",
            "fanout_socketio",
            "{:.2f}×",
            lambda v: v >= GOAL_FANOUT_SOCKETIO,
        ),
        row(
            "the same, one roll at a time: vs bare websockets",
            f"≥ {GOAL_FANOUT_BARE}×",
            "chain_fanout_bare",
            "{:.2f}×",
            lambda v: v >= GOAL_FANOUT_BARE,
        ),
        row(
            "the same, one roll at a time: vs python-socketio",
            f"≥ {GOAL_FANOUT_SOCKETIO:g}×",
            "chain_fanout_socketio",
            "{:.2f}×",
            lambda v: v >= GOAL_FANOUT_SOCKETIO,
        ),
        row(
            "latency p99 vs bare websockets, same delivery rate",
            f"≤ {GOAL_LATENCY_P99}×",
            "latency_p99",
            "{:.2f}×",
            lambda v: v <= GOAL_LATENCY_P99,
        ),
        row(
            "resident memory per idle connection",
            f"≤ {GOAL_MEMORY_KIB:g} KiB",
            "memory_kib",
            "{:.1f} KiB",
            lambda v: v <= GOAL_MEMORY_KIB,
        ),
        row(
            "acked rolls/s, 100 rollers in one room",
            f"≥ {GOAL_APPENDS:,.0f}/s",
            "appends",
            "{:,.0f}/s",
            lambda v: v >= GOAL_APPENDS,
        ),
        row(
            "acked rolls/s (100 rollers), signing on ÷ off",
            f"≥ {GOAL_SIGNING}×",
            "signing_appends",
            "{:.2f}×",
            lambda v: v >= GOAL_SIGNING,
        ),
        row(
            "fan-out at N = 1,000 (bursts), signing on ÷ off",
            f"≥ {GOAL_SIGNING}×",
            "signing_fanout",
            "{:.2f}×",
            lambda v: v >= GOAL_SIGNING,
        ),
    ]
    rows += [
        row(
            "many tables (1,000 rooms × 6): deliveries/s vs bare websockets",
            f"≥ {GOAL_TABLES_BARE}×",
            "tables_bare",
            "{:.2f}×",
            lambda v: v >= GOAL_TABLES_BARE,
        ),
        row(
            "many tables: p99 intent → last member vs bare websockets",
            f"≤ {GOAL_TABLES_P99}×",
            "tables_p99",
            "{:.2f}×",
            lambda v: v <= GOAL_TABLES_P99,
        ),
        row(
            "acked rolls/s, 100 rooms × 1 roller",
            f"≥ {GOAL_ROOMS_APPENDS:,.0f}/s",
            "rooms_appends",
            "{:,.0f}/s",
            lambda v: v >= GOAL_ROOMS_APPENDS,
        ),
        row(
            "one roll at a time into a room of 100 vs bare websockets",
            f"≥ {GOAL_SMALL_CHAIN_BARE}×",
            "small_chain_bare",
            "{:.2f}×",
            lambda v: v >= GOAL_SMALL_CHAIN_BARE,
        ),
    ]
    # Fair dice's rows are there before its first recorded run too: the goal stands beside "not measured".
    rows += fairness_goal_rows(goals)
    if any(key.startswith("hosted_") for key in goals):
        size = f"{goals.get('hosted_tables', 0):,} tables of 6"
        rows += [
            row(
                f"{size}: p99 intent → last member",
                "≤ 50 ms",
                "hosted_p99_ms",
                "{:.0f} ms",
                lambda v: v <= 50,
            ),
            row(
                f"{size}: p99 vs bare websockets", "≤ 1.5×", "hosted_p99_bare", "{:.2f}×", lambda v: v <= 1.5
            ),
            row(f"{size}: relay RSS", "≤ 600 MiB", "hosted_rss_mib", "{:.0f} MiB", lambda v: v <= 600),
            row(
                f"{size}, restarted: every client back after listening",
                "≤ 30 s",
                "hosted_back_s",
                "{:.1f} s",
                lambda v: v <= 30,
            ),
            row(
                f"{size}, restarted: events lost or duplicated",
                "0",
                "hosted_lost",
                "{:.0f}",
                lambda v: v == 0,
            ),
        ]
    intro = (
        "The issue's goals for the relay, each checked against a peer measured in this same run "
        "(the sections below have the tables, the method and the profiles):"
    )
    text = "## Goals\n\n" + intro + "\n\n" + table(["goal", "target", "this run", ""], rows, "lrrl") + "\n"
    why = _why_not(goals, results)
    if why:
        text += "\nWhere a goal is not met, what bounds it:\n\n" + "\n".join(why) + "\n"
    return text


def _why_not(goals: dict[str, Any], results: dict[str, Any]) -> list[str]:
    sections = results["sections"]
    out = []
    fan = sections.get("fanout") or []
    relay, bare = find(fan, kind="relay", members=1000), find(fan, kind="bare", members=1000)
    for prefix, what in (("", "bursts"), ("chain_", "one roll at a time")):
        value = goals.get(f"{prefix}fanout_bare")
        if value is not None and value < GOAL_FANOUT_BARE and relay and bare:
            out.append(
                f"- Fan-out vs bare websockets ({what}): per delivery the relay used "
                f"{relay[f'{prefix}server_cpu_us']:.1f} µs of CPU and the bare server "
                f"{bare[f'{prefix}server_cpu_us']:.1f} µs; both are dominated by one `send()` per socket per "
                "write (section 1), the relay adding each roll's own path (rules, commit, ack). With one "
                "roll in flight, wall time also counts every hop a roll makes between processes and threads "
                "(driver, server, receivers, driver); the relay's commit adds no hop of its own (it runs on "
                "the event loop), but its fixed cost per roll is wall time there."
            )
        value = goals.get(f"{prefix}fanout_socketio")
        sio = find(fan, kind="socketio", members=1000)
        if value is not None and value < GOAL_FANOUT_SOCKETIO and relay and sio:
            floor = ""
            if bare and sio.get(f"{prefix}rate"):
                # What a server doing nothing but the sends reaches against the same peer in the same run.
                floor = (
                    f" The bare websockets server, which does nothing but those sends, was "
                    f"{bare[f'{prefix}rate'] / sio[f'{prefix}rate']:.2f}× python-socketio in the same run."
                )
            out.append(
                f"- Fan-out vs python-socketio ({what}): {value:.2f}×. Per delivery the relay used "
                f"{relay[f'{prefix}server_cpu_us']:.1f} µs of CPU and python-socketio "
                f"{sio[f'{prefix}server_cpu_us']:.1f} µs. With one roll in flight the relay makes one "
                "`send()` per socket per event, which is nearly all of what the bare server spends per "
                "delivery, so the system call, not the relay's Python, sets its floor and caps the ratio "
                f"(section 1's profile: most samples are in the transport's `write`).{floor}"
            )
    value = goals.get("latency_p99")
    if value is not None and value > GOAL_LATENCY_P99:
        out.append(
            "- Latency p99: the relay's extra path per roll (rules, the SQLite commit, "
            "the ack) and scheduling on the shared machine (section 2)."
        )
    memory_data = sections.get("memory") or {}
    value = goals.get("memory_kib")
    if value is not None and value > GOAL_MEMORY_KIB:
        bare_run = find(memory_data.get("runs", []), kind="bare")
        trace = (memory_data.get("traced") or {}).get("trace")
        held = retained_history(trace)
        reason = (
            f"each idle connection keeps the history of its welcome alive ({held / 1024:,.1f} KiB per "
            "connection of decoded records in the traced run), because `Relay._serve_socket` keeps its "
            "`welcome` local in scope for the life of the connection; releasing it after the send is the fix"
            if held >= HISTORY_RETAINED
            else "the per-connection objects of websockets and asyncio plus the relay's own"
        )
        floor_text = (
            f" The bare websockets server needs {bare_run['kib_per_connection']:.1f} KiB per connection "
            "by itself."
            if bare_run
            else ""
        )
        out.append(f"- Memory: {reason} (section 3).{floor_text}")
    value = goals.get("appends")
    apps = (sections.get("appends") or {}).get("server", [])
    hundred = find(apps, rooms=1, rollers_per_room=100)
    if value is not None and value < GOAL_APPENDS and hundred:
        storage = {x["writers"]: x["rate"] for x in (sections.get("appends") or {}).get("storage", [])}
        ceiling = storage.get(100)
        out.append(
            f"- Acknowledged rolls: the server used {1e6 * hundred['server_cpu'] / hundred['rate']:,.0f} µs "
            f"of CPU per acknowledged roll ({100 * hundred['server_cpu']:.0f} % busy), including writing "
            "each roll to all 100 rollers' sockets; "
            + (f"SQLite alone took {ceiling:,.0f} appends/s with 100 writers, so " if ceiling else "")
            + "the bound is the event loop's per-roll work on one core, not storage (section 4)."
        )
    tab = sections.get("tables") or []
    t_relay, t_bare = find(tab, kind="relay"), find(tab, kind="bare")
    value = goals.get("tables_bare")
    if value is not None and value < GOAL_TABLES_BARE and t_relay and t_bare:
        floor = _tables_floor(t_relay, t_bare, (results.get("profiles") or {}).get("tables"))
        out.append(f"- Many tables: {value:.2f}× bare. {floor} (section 4b).")
    value = goals.get("tables_p99")
    if value is not None and value > GOAL_TABLES_P99 and t_relay and t_bare:
        out.append(_tables_p99(value, t_relay, t_bare))
    rooms = find(apps, rooms=100, rollers_per_room=1)
    value = goals.get("rooms_appends")
    if value is not None and value < GOAL_ROOMS_APPENDS and rooms:
        out.append(
            f"- 100 rooms × 1 roller: {rooms['rate']:,.0f} acked rolls/s, the server "
            f"{100 * rooms['server_cpu']:.0f} % busy at {1e6 * rooms['server_cpu'] / rooms['rate']:,.0f} µs "
            "per roll (both processes). Each roller waits for its own ack, so the rate is 100 ÷ the round "
            "trip (frame in, the SQLite commit at the end of the loop iteration, the ack out); the rolls of "
            "an iteration share a commit, but each still costs its own read, resolve and write (ack and "
            "event together), so the loop's own work per roll is the floor here."
        )
    value = goals.get("small_chain_bare")
    small = [find(fan, kind=k, members=100) for k in ("relay", "bare")]
    if value is not None and value < GOAL_SMALL_CHAIN_BARE and small[0] and small[1]:
        out.append(
            f"- One roll at a time into a room of 100: {value:.2f}× bare. Per delivery the relay used "
            f"{small[0]['chain_server_cpu_us']:.1f} µs of CPU and the bare server "
            f"{small[1]['chain_server_cpu_us']:.1f} µs; with 100 deliveries per roll the roll's fixed cost "
            "(reading and resolving it, the commit, the signature and the ack, about "
            f"{100 * (small[0]['chain_server_cpu_us'] - small[1]['chain_server_cpu_us']):.0f} µs) weighs a "
            "tenth of what it does at 1,000, and with one roll in flight it is all wall time. Two changes "
            "took wall time out of it (table of changes): committing on the event loop, and serving the "
            "roller first, so its next roll is on its way while the room is written to. What is left is "
            "spread thin (perf, on a slower day: 63 % of the fixed cost in the interpreter, about 440 calls "
            "per roll, none above a few percent; 21 % in the kernel, 19 system calls per roll against bare's "
            "4), and it is not the relay's own Python: compiled with mypyc (the server, the room, the "
            "protocol, fan-out, visibility, the SQLite log, the rules), the fixed cost went from 473 to 460 "
            "µs; uvloop and the compiled encoder are already in (table of changes). Nor is it storing and "
            "signing alone: with every variant and bare up at once, taking turns, a burst then one roll at a "
            "time each, round after round (`bench.studies.ab --shape fanpairs100`, ten rounds, twice, on "
            "2026-11-27 at a Python speed of 7.5–7.8 ms; table of changes), the relay read 0.64× and 0.63× "
            "bare (the medians of the rounds' ratios), signing off 0.69×, nothing stored 0.71×, and a relay "
            "that neither stores nor signs (an experiment) 0.78× and 0.79×, at 4.67–4.89 µs of CPU per "
            "delivery against bare's 4.00. On slower days (13–22 ms) the same pairs read 0.74–0.84× for the "
            "relay and 0.88–0.96× for that experiment: on the faster machine the Python a roll runs before "
            "its 100 writes, reading the frame through websockets, checking, resolving, the room's record "
            "and fold, the ack, holds even a relay that keeps nothing under the goal, and the commit and the "
            "signature take it from there to this run's figure."
        )
    value = goals.get("signing_appends")
    pairs = signing_pairs(sections.get("signing") or {})
    if value is not None and value < GOAL_SIGNING and pairs is not None:
        on, off = pairs["cpu_on"], pairs["cpu_off"]
        loop_on, loop_off = on.get("event loop thread", 0.0), off.get("event loop thread", 0.0)
        child = on.get("child processes", 0.0)
        extra_loop, extra_rollers = loop_on - loop_off, on["rollers"] - off["rollers"]
        floor = off["both"] / (off["both"] + child + max(extra_rollers, 0.0))
        out.append(
            f"- Acked rolls, signing on ÷ off: {value:.2f}× (the median of {pairs['rounds']} rounds' "
            f"ratios; {spread(pairs)}). The server and its 100 rollers "
            f"kept {on['cores']:.1f} of this machine's 2 cores busy, so the rate follows what a roll costs "
            "all of them together. Per acked roll (medians of the windows), signed against unsigned: the "
            f"event loop {loop_on:.0f} against {loop_off:.0f} µs, the process making nonces {child:.0f} µs, "
            f"the rollers {on['rollers']:.0f} against {off['rollers']:.0f} µs (a signed event is 89 bytes "
            f"longer on each of their 100 sockets); in all {on['both']:.0f} against {off['both']:.0f} µs, "
            f"{off['both'] / on['both']:.2f}×. So signing adds {child:.0f} µs in the nonce process (the "
            "point r·B, libsodium's fixed-base multiplication, the fastest this machine offers: OpenSSL's "
            f"took longer, table of changes), {extra_loop:.0f} µs on the event loop (the signed form: its "
            "canonical encoding, the signature with that nonce, and 89 more bytes written to each of 100 "
            "sockets) and "
            f"{extra_rollers:.0f} µs in the load generator sharing the cores. The event loop's own CPU per "
            f"roll gives {loop_off / loop_on:.2f}×; the rest of the gap is CPU outside it, which on two "
            "cores the rate pays too (pinning the event loop to one core and the rollers and the nonce "
            "process to the other did not lift the ratio, table of changes). Of these parts only the nonce "
            "process's holds still from run to run (33–35 µs in three runs of variants taking turns with "
            "the real relay on a slower day: 64 zero bytes for a signature with and without the nonce "
            "process, RFC 8032's signatures on the loop; table of changes), and it alone is "
            f"{child / off['both'] * 100:.0f} % of what an unsigned roll costs here: a relay whose event "
            f"loop did no signing work at all would sit at {floor:.2f}× with this run's figures. "
            + (
                "So the goal is below the floor of the contract (spec/signing.md) on two shared cores: one "
                "fresh secret nonce per signed form and the signature's bytes on every socket cost more "
                "than the tenth of a roll it leaves, whatever the event loop does."
                if floor < GOAL_SIGNING - SIGNING_NOISE
                else "The goal is at the floor of one fresh secret nonce per signed form (the contract, "
                "spec/signing.md) on two shared cores, and the noise between runs decides which side of it "
                "a run reads."
            )
        )
    value = goals.get("signing_fanout")
    bursts = (sections.get("signing") or {}).get("fanout_paired") or {}
    on_runs, off_runs = ((bursts.get(side) or {}).get("bursts") or [] for side in ("on", "off"))
    if value is not None and value < GOAL_SIGNING and on_runs and off_runs:
        out.append(_signing_bursts_floor(value, on_runs, off_runs))
    hosted = sections.get("hosted") or {}
    p99 = goals.get("hosted_p99_ms")
    if hosted and p99 is not None and (p99 > 50 or (goals.get("hosted_p99_bare") or 0) > 1.5):
        steady = hosted["relay"]["steady"]
        out.append(
            f"- {hosted['tables']:,} tables of 6: p99 {p99:.0f} ms, the median {steady['p50_ms']:.0f} ms. "
            "The tail is the event loop's stalls (the loop-lag maximum on `/healthz` read "
            f"{steady.get('loop_lag_max_ms') or 0:.0f} ms) over a per-roll path the bare peer does not have "
            "(resolving with fair dice, committing, signing, the ack; a GM's or hidden roll also waits for "
            "its witnesses, each value stored before its ack), beside every socket's keepalive pings, on two "
            "cores that the load generator's processes share. The relay used "
            f"{100 * steady.get('cpu_share', 0):.0f} % of one core on average. The upkeep's collector no "
            "longer walks the whole heap (docs/hardening.md); which part of the per-roll path makes this "
            "tail at this size is not broken down yet. docs/deployment.md, Sizing, says what one machine "
            "holds."
        )
    return out


def _signing_bursts_floor(value: float, on: list[dict[str, Any]], off: list[dict[str, Any]]) -> str:
    server = [per_delivery_us(runs) or 0.0 for runs in (on, off)]
    receivers = [per_delivery_us(runs, "receivers") or 0.0 for runs in (on, off)]
    lasted = 1000 * statistics.median(r["elapsed"] for r in on + off)
    return (
        f"- Fan-out bursts at N = 1,000, signing on ÷ off: {value:.2f}×. A burst lasted about "
        f"{lasted:.0f} ms; per delivery the server spent {server[0]:.2f} against {server[1]:.2f} µs of CPU "
        f"and the two receiver processes {receivers[0]:.2f} against {receivers[1]:.2f} µs, so the "
        "receivers, sharing the two cores, set the rate. The signature is made once per event for 1,000 "
        "deliveries; what each delivery pays is the signed event's length, 89 bytes more (`kid` and a "
        "64-byte `sig`), in the server's writes and the receivers' reads. An unsigned relay whose frames "
        "carry a `kid` and 64 zero bytes as `sig`, the signed frame's size with no signing work (an "
        "experiment taking turns with both, eight rounds of 900-event bursts on 2026-11-27; table of "
        "changes), read 0.924× of the unsigned relay, as the signing relay did (0.924×), at 0.193 µs of "
        "server CPU per delivery against the signing relay's 0.197 and the unsigned one's 0.168. On "
        "slower days, when the server's Python work per write outweighed the bytes, this goal read "
        "1.00×; where the bytes are the cost, the contract's fields (spec/signing.md), not the "
        "signing, are its floor."
    )


def _tables_p99(value: float, relay: dict[str, Any], bare: dict[str, Any]) -> str:
    pairs = [
        f"{a['p99_ms']:.1f} against {b['p99_ms']:.1f} ms"
        for a, b in zip(relay.get("runs") or [], bare.get("runs") or [], strict=False)
    ]
    runs = f" Each run's p99, the relay's against bare's (taking turns): {', '.join(pairs)}." if pairs else ""
    rolls = relay["rolls"] * max(1, len(relay.get("runs") or []))
    return (
        f"- Many tables, p99: {value:.2f}×.{runs} With 32 rolls in flight a roll waits behind the others "
        "in the loop's queue, and each costs the relay "
        f"{relay['server_cpu_us_per_roll'] / bare['server_cpu_us_per_roll']:.1f} times what it costs the "
        f"bare server, so the median follows the CPU per roll (p50 {relay['p50_ms']:.1f} against "
        f"{bare['p50_ms']:.1f} ms). The 99th percentile is the slowest {rolls // 100:,} of {rolls:,} rolls, "
        "and it follows the shared machine's stalls on either side: on 2026-11-27, with three runs a side, "
        "eight readings of this ratio went from 0.53× to 1.94× (median 0.94×), bare's own p99 from 9.7 to "
        "50.8 ms between runs, and a relay that never checkpoints SQLite read no lower than the real one "
        "(table of changes); the section pools six runs a side since."
    )


def _tables_floor(relay: dict[str, Any], bare: dict[str, Any], profile: dict[str, Any] | None) -> str:
    split = relay.get("cpu_us_per_roll_by") or {}
    parts = ", ".join(f"{name} {us:.0f} µs" for name, us in split.items())
    text = (
        f"Server CPU per roll {relay['server_cpu_us_per_roll']:.0f} µs against the bare server's "
        f"{bare['server_cpu_us_per_roll']:.0f} µs ({parts}). The bare server's whole cost is one read and "
        "seven `send()`s; the relay makes the same seven writes (the roller's ack and event leave "
        "together), and its event loop also parses and resolves the roll, commits it to SQLite (one "
        "`INSERT` per loop iteration, a few rolls each at this rate, the rows at the table's end and an "
        "index entry in each room's part of the index), "
        "encodes the ack and the event form canonically and signs it (with a nonce made ahead by a child "
        "process)"
    )
    spent_on = tables_split(relay, profile)
    if spent_on is None:
        return text
    in_process = sum(us for name, us in spent_on.items() if name != TABLES_CHILD)
    writes, sqlite, frames = (spent_on[name] for name in TABLES_PARTS)
    floor = bare["server_cpu_us_per_roll"] / GOAL_TABLES_BARE
    spent = writes + sqlite + frames
    return (
        f"{text}. By the profile's shares of the server process's {in_process:.0f} µs: the socket writes "
        f"{writes:.0f} µs, the SQLite commit on the loop {sqlite:.0f} µs, reading, checking and resolving "
        f"the frame {frames:.0f} µs, the nonces {spent_on[TABLES_CHILD]:.0f} µs more in the child. "
        f"For {GOAL_TABLES_BARE}× the relay could spend {floor:.0f} µs per roll in all; the writes, the "
        f"commit and the frame's handling alone take {spent:.0f} µs (the writes are the bare server's own "
        "cost; the commit, in C, writes the WAL's pages, an index page for each room it touches), before "
        "the signature, "
        "the ack and the fan-out's bookkeeping: out of reach, on this stack, for a relay that stores and "
        "signs each roll before its ack. Nor is it the storing and signing that hold it there: a relay "
        "that did neither (an experiment, the `INSERT` skipped and signing off, taking turns with the "
        "real relay and bare, three rounds, on 2026-11-27; table of changes) spent 157–177 µs per roll "
        "against bare's 77–100 and delivered at best 32,062 against 50,514/s, 0.63× (0.62× on a slower "
        "day, at 447–480 against 247–263 µs): the per-roll path in Python that is left, "
        "reading the frame through websockets, checking, resolving, the room's record and fold, the ack "
        "and the fan-out, is itself below the goal. Nor does a newer interpreter bring it near: on Python "
        "3.13 the relay spent about a tenth less per roll, bare no less (table of changes). What moved "
        "it, and what was tried and did not (a writer process among them), is measured in the table of "
        "changes at the end"
    )
