"""Writes the seed corpora under ``corpus/`` (``python -m tests.fuzz.seeds``): a handful of valid and nearly
valid inputs per target, from the docs' examples, for libFuzzer to mutate. The files are committed; run this
again only after changing the lists below."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgpack

CORPUS = Path(__file__).with_name("corpus")

COMMON_DICE = [
    "4d6kh3 + 2", "d20+5", "2d20kl + 7 - 1d4", "10d10x", "3d6 + 2d8[fire] + 5", "1d100", "(1d4)d6",
    "1d6 / 4", "floor(7 / 2)", "{4d6+3d8}kh1", "8d6!!", "10d10>8f1", "1000d1000", "2d6d2", "3d6kh2d2",
    "((((1d6))))", "1d20 + -3", "0d0", "1d1", "",
]  # fmt: skip
FOUNDRY_DICE = [
    "2d6x", "{1d20, 1d20 + 5}kh", "6d6cs>3df", "(1d4)d(1d8)", "(3)d6 + 2", "(1d2)dF", "4dF", "5d10x10kh3",
    "4d6x6kh3", "3d6xodd", "3d6ms<0", "3d6dh1r", "1d2rr<3", "2d10min2max9", "4d6even", "1d20cs>=19cf<2",
    "max(1d6, 1d8)", "abs(-1d6)", "3d6r1=1", "5d6cs",
]  # fmt: skip
ROLL20_DICE = [
    "{3d20+5}>21", "5d6!!", "8d6!p", "3d6>[[1+3]]", "[[1d4]]d6", "2**10", "10d10>8f<2", "4d6sa", "5d6ro<2",
    "1d20cs>18cf<3", "3d6!>5", "{1d20+2, 1d20+4}kh1", "d%", "6d6>4f1", "4d6k3", "2d6dh1",
]  # fmt: skip

INTENTS: list[dict[str, Any]] = [
    {"system": "dice", "formula": "4d6kh3 + 2"},
    {"system": "dice", "formula": "{3d20+5}>21", "dialect": "roll20"},
    {"system": "drawsteel.power", "characteristic": 2, "edges": 1},
    {
        "system": "drawsteel.ability",
        "characteristics": {"M": 2, "A": 1},
        "roll_with": "M",
        "tiers": ["3 + M damage", "6 + M damage; push 1", "9 + M or A fire damage; slowed (save ends)"],
        "targets": [{"name": "goblin"}, {"name": "ogre", "banes": 1}],
    },
    {"system": "daggerheart.duality", "modifier": 2, "difficulty": 15, "experience": 2, "spend_hope": True},
    {"system": "daggerheart.duality", "modifier": 1, "reaction": True, "advantage": 2},
    {
        "system": "daggerheart.attack",
        "modifier": 4,
        "targets": [{"name": "Ayla", "evasion": 12}],
        "damage": "2d8+3",
    },
    {"system": "daggerheart.attack", "modifier": 3, "experience": 2, "spend_fear": True},
    {"system": "honors_edge.roll", "pool": "4k3", "modifiers": ["+2k0"], "tn": 20, "bonus": 1},
    {"system": "honors_edge.skill", "attribute": 2, "skill": 1, "tn": 15, "assist_ranks": [2]},
    {"system": "honors_edge.damage", "strength": 2, "weapon": "+3k0"},
    {"system": "nexus.test", "attribute_die": "d8", "skill_rank": 2, "difficulty": "hard", "boons": 1},
    {"system": "nexus.check", "kind": "supply", "die": "d8"},
]


def frames() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"t": "hello", "v": 1, "token": "x.y.z", "name": "Ana", "resume": {"epoch": "e1", "seq": 3}},
        {"t": "hello", "v": 1, "token": "x.y.z", "formats": ["foundry", "roll20"]},
        {"t": "ping", "id": "p1"},
        {"t": "reveal", "id": "v1", "seq": 4},
        {"t": "resource", "id": "f1", "name": "fear", "op": "gain", "n": 3},
        {"t": "resource", "id": "h1", "name": "hope", "op": "spend", "n": 1},
        {"t": "resource", "id": "h2", "name": "hope", "op": "set", "n": 2, "participant": "p2"},
        {"t": "what", "id": "w1"},
    ]
    for i, intent in enumerate(INTENTS):
        visibility = ("public", "gm", "blind", "self")[i % 4]
        out.append({"t": "roll", "id": f"r{i}", "intent": intent, "visibility": visibility, "label": "Door"})
    return out


def room_exports() -> list[bytes]:
    """Exports of a room that took every frame above from its GM (hidden rolls left sealed): stored and
    public, each in both encodings, and the same for the room's first three events."""
    import io

    from relay.core import protocol
    from relay.storage import exports
    from tests.fuzz.targets import INFO, KEYRING, LIMITS, Table

    table = Table(1)
    assert table.gm is not None
    for frame in frames():
        try:
            parsed = protocol.parse(msgpack.packb(frame, use_bin_type=True), LIMITS)
        except protocol.FrameError:
            continue  # the nearly valid ones
        if not isinstance(parsed, protocol.Hello):
            table.carry_out(table.room.handle(table.gm, parsed))
    out = []
    for records in (table.stored, table.stored[:3]):
        for form in exports.FORMS:
            for fmt in exports.FORMATS:
                events = (exports.stored_events if form == "stored" else exports.public_events)(
                    records, INFO, KEYRING
                )
                buffer = io.BytesIO()
                exports.write(buffer, fmt, exports.header(INFO, KEYRING, records[-1]["seq"], form), events)
                out.append(buffer.getvalue())
    # Two cut short: at a line's end (only the header's seq shows it), and inside an entry.
    out.append(b"".join(out[0].splitlines(keepends=True)[:-1]))
    out.append(out[1][:-9])
    return out


def write(target: str, inputs: list[bytes]) -> None:
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    for data in inputs:
        (folder / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


def main() -> None:
    write("foundry", [f.encode() for f in COMMON_DICE + FOUNDRY_DICE])
    write("roll20", [f.encode() for f in COMMON_DICE + ROLL20_DICE])
    write("frames", [msgpack.packb(f, use_bin_type=True) for f in frames()])
    write("imports", room_exports())


if __name__ == "__main__":
    main()
