"""Reading room export files (relay.storage.exports.read): an entry nested deeper than any event the server
writes is refused with a sentence, whichever encoding and however deep, and the deepest roll the rules core
can make reads back whole."""

from __future__ import annotations

import io
import json
from typing import Any

import msgpack
import pytest

from relay.storage import exports
from rules import resolve

HEAD = {"t": exports.HEADER, "v": exports.VERSION, "room": {"id": "r1"}, "keys": [], "seq": 1}


def nested(depth: int) -> Any:
    value: Any = None
    for _ in range(depth):
        value = [value]
    return value


def jsonl(*entries: Any) -> bytes:
    return b"".join(json.dumps(entry).encode() + b"\n" for entry in entries)


def packed(*entries: Any) -> bytes:
    return b"".join(msgpack.packb(entry) for entry in entries)


@pytest.mark.parametrize("depth", [exports.MAX_NESTING + 1, 5_000, 200_000])
@pytest.mark.parametrize("encode", [jsonl, packed], ids=["jsonl", "msgpack"])
def test_an_entry_nested_past_any_event_is_refused_with_a_sentence(encode: Any, depth: int) -> None:
    if encode is packed and depth > 1_000:
        data = packed(HEAD) + b"\x81\xa3seq\x01" + b"\x91" * depth + b"\xc0"  # msgpack-python packs 512 deep
    elif encode is jsonl and depth > 1_000:
        data = jsonl(HEAD) + b'{"seq": 1, "x": ' + b"[" * depth + b"]" * depth + b"}\n"  # json.dumps recurses
    else:
        data = encode(HEAD, {"t": "event", "seq": 1, "x": nested(depth)})
    with pytest.raises(exports.ExportError) as refused:
        exports.read(data)
    assert str(refused.value).endswith(f"nests deeper than {exports.MAX_NESTING} levels: no event does")
    assert str(refused.value).startswith(("line 2 ", "entry 2 ", "entry 3 ")), refused.value


@pytest.mark.parametrize("dialect", ["foundry", "roll20"])
def test_the_deepest_roll_the_rules_make_reads_back_whole(dialect: str) -> None:
    # Groups nest as deep as a formula may (32 levels): the deepest result the rules core writes.
    formula = "{" * 31 + "1d6" + "}" * 31
    result = resolve({"system": "dice", "formula": formula, "dialect": dialect})
    event = {"t": "event", "seq": 1, "kind": "roll", "result": result}
    for fmt in exports.FORMATS:
        out = io.BytesIO()
        exports.write(out, fmt, HEAD, [event])
        assert exports.read(out.getvalue()).events == [event]
