"""The bare websockets peer broadcasts the relay's own event (bench.peers.bare_ws), and a profile's
inclusive shares reach the many-tables picture whatever their rank (bench.profile, bench.report)."""

from __future__ import annotations

import struct
from pathlib import Path

import msgpack

from bench.peers.bare_ws import template
from bench.report.tables import TABLES_PARTS, tables_split
from bench.tools.profile import TOP, summarise

EVENT = {
    "actor": {"id": "2623091c29679f59", "name": "GM", "role": "gm"},
    "kind": "roll",
    "result": {"dice": [{"faces": 10, "kept": True, "value": 6}], "total": 17, "automatic": None},
    "seq": 2,
    "t": "event",
    "kid": "566d713f08181034",
    "sig": bytes(range(64)),
}


def test_the_bare_frame_is_the_relays_event_with_its_seq_patched_in() -> None:
    raw = msgpack.packb(EVENT, use_bin_type=True)
    head, tail = template(raw)
    for seq in (1, 300, 70_000):
        frame = msgpack.unpackb(head + struct.pack(">I", seq) + tail, raw=False)
        assert frame == {**EVENT, "seq": seq}
        assert list(frame) == list(EVENT), "the keys in the relay's order"
    assert len(head) + 4 + len(tail) == len(raw) + 4, "the seq as a uint32 instead of a fixint"


def test_a_profile_keeps_every_inclusive_share_and_the_tables_split_finds_a_low_ranked_part(
    tmp_path: Path,
) -> None:
    # py-spy's collapsed stacks: 20 functions of the relay above the SQLite hand-over, which ranks 21st.
    lines = [f"thread (1): MainThread;f{i} (relay/x.py:1);leaf (relay/y.py:2) {100 - i}" for i in range(20)]
    for part in TABLES_PARTS.values():
        name, _, where = part.partition(" (")
        lines.append(f"thread (1): MainThread;{name} ({where[:-1]}:9) 5")
    raw = tmp_path / "profile.raw"
    raw.write_text("\n".join(lines) + "\n")
    profile = summarise(raw)
    assert len(profile["inclusive"]) > TOP
    relay = {"cpu_us_per_roll_by": {"event loop thread": 500.0, "child processes": 30.0}}
    split = tables_split(relay, profile)
    assert split is not None
    assert split["nonces (child process)"] == 30.0
    assert all(split[name] > 0 for name in TABLES_PARTS)
