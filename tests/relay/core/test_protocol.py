"""Frame decoding and validation: every bad input gets its code, its sentence and its id when known."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay.core import protocol
from relay.settings.config import Limits

LIMITS = Limits()


def pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def refused(data: bytes | str) -> protocol.FrameError:
    with pytest.raises(protocol.FrameError) as info:
        protocol.parse(data, LIMITS)
    err = info.value
    assert err.code in protocol.ERROR_CODES
    assert err.message.endswith("."), "a sentence for a person"
    assert err.message[0].isupper(), "a sentence for a person"
    return err


def test_valid_frames() -> None:
    hello = protocol.parse(
        pack(
            {
                "t": "hello",
                "v": 1,
                "token": "tok",
                "name": " Ana ",
                "resume": {"epoch": "e", "seq": 3},
                "formats": ["roll20"],
            }
        ),
        LIMITS,
    )
    assert hello == protocol.Hello("tok", "Ana", protocol.Resume("e", 3), frozenset({"roll20"}))
    roll = protocol.parse(
        pack(
            {"t": "roll", "id": "r", "intent": {"system": "x", "n": [1, {"a": None}]}, "visibility": "blind"}
        ),
        LIMITS,
    )
    assert roll == protocol.Roll("r", {"system": "x", "n": [1, {"a": None}]}, "blind", None)
    assert protocol.parse(pack({"t": "reveal", "id": "v", "seq": 4}), LIMITS) == protocol.Reveal("v", 4)
    res = protocol.parse(
        pack({"t": "resource", "id": "x", "name": "hope", "op": "spend", "n": 0, "participant": "p"}), LIMITS
    )
    assert res == protocol.Resource("x", "hope", "spend", 0, "p")
    assert protocol.parse(pack({"t": "ping", "id": "p", "extra": 1}), LIMITS) == protocol.Ping("p")


def test_text_frames_non_maps_and_garbage() -> None:
    assert refused('{"t": "ping"}').code == "bad_frame"
    assert refused(pack([1, 2])).code == "bad_frame"
    assert refused(pack("ping")).code == "bad_frame"
    assert refused(b"\xc1").code == "bad_frame"
    assert refused(b"").code == "bad_frame"
    assert refused(pack({"t": "ping", "id": "a"}) + b"\x00").code == "bad_frame"
    assert refused(b"\x81\x01\x02").code == "bad_frame", "maps need string keys"
    assert refused(b"\xd6\xff\x00\x00\x00\x01").code == "bad_frame", "a timestamp is not a map"
    ext = pack(
        {
            "t": "roll",
            "id": "e",
            "intent": {"system": "x", "v": msgpack.ExtType(5, b"x")},
            "visibility": "public",
        }
    )
    assert refused(ext).code == "bad_frame"
    deep: Any = 1
    for _ in range(40):
        deep = [deep]
    err = refused(
        pack({"t": "roll", "id": "d", "intent": {"system": "x", "v": deep}, "visibility": "public"})
    )
    assert err.request_id == "d"


@pytest.mark.parametrize(
    ("frame", "rid"),
    [
        ({"t": "dance", "id": "a"}, "a"),
        ({"id": "a"}, "a"),
        ({"t": 5}, None),
        ({"t": "ping"}, None),
        ({"t": "ping", "id": 5}, None),
        ({"t": "ping", "id": ""}, None),
        ({"t": "ping", "id": "x" * 65}, None),
        ({"t": "roll", "id": "r"}, "r"),
        ({"t": "roll", "id": "r", "intent": "2d6", "visibility": "public"}, "r"),
        ({"t": "roll", "id": "r", "intent": {"system": "x"}}, "r"),
        ({"t": "roll", "id": "r", "intent": {"system": "x"}, "visibility": "secret"}, "r"),
        ({"t": "roll", "id": "r", "intent": {"system": "x"}, "visibility": "public", "label": 5}, "r"),
        (
            {"t": "roll", "id": "r", "intent": {"system": "x"}, "visibility": "public", "label": "x" * 201},
            "r",
        ),
        ({"t": "roll", "id": "r", "intent": {"system": "x", "b": b"\x00"}, "visibility": "public"}, "r"),
        ({"t": "reveal", "id": "v"}, "v"),
        ({"t": "reveal", "id": "v", "seq": "3"}, "v"),
        ({"t": "reveal", "id": "v", "seq": True}, "v"),
        ({"t": "reveal", "id": "v", "seq": 0}, "v"),
        ({"t": "resource", "id": "x", "name": "gold", "op": "gain", "n": 1}, "x"),
        ({"t": "resource", "id": "x", "name": "fear", "op": "steal", "n": 1}, "x"),
        ({"t": "resource", "id": "x", "name": "fear", "op": "gain", "n": -1}, "x"),
        ({"t": "resource", "id": "x", "name": "fear", "op": "gain", "n": 1.5}, "x"),
        ({"t": "resource", "id": "x", "name": "fear", "op": "gain", "n": False}, "x"),
        ({"t": "resource", "id": "x", "name": "fear", "op": "gain", "n": 1, "participant": "p"}, "x"),
        ({"t": "resource", "id": "x", "name": "hope", "op": "gain", "n": 1, "participant": 7}, "x"),
    ],
)
def test_bad_frames(frame: dict[str, Any], rid: str | None) -> None:
    err = refused(pack(frame))
    assert err.code == "bad_frame"
    assert err.request_id == rid
    assert protocol.error_frame(err.code, err.message, err.request_id).get("id") == rid


@pytest.mark.parametrize(
    "hello",
    [
        {"t": "hello", "token": "t"},
        {"t": "hello", "v": 2, "token": "t"},
        {"t": "hello", "v": 1},
        {"t": "hello", "v": 1, "token": 5},
        {"t": "hello", "v": 1, "token": "t", "name": ""},
        {"t": "hello", "v": 1, "token": "t", "resume": {"epoch": "e"}},
        {"t": "hello", "v": 1, "token": "t", "resume": {"epoch": "e", "seq": -1}},
        {"t": "hello", "v": 1, "token": "t", "formats": ["html"]},
        {"t": "hello", "v": 1, "token": "t", "formats": "foundry"},
    ],
)
def test_bad_hellos(hello: dict[str, Any]) -> None:
    assert refused(pack(hello)).code in ("bad_frame", "unauthorized")


def test_limits_are_configurable() -> None:
    small = Limits(max_label=3, max_request_id=2)
    with pytest.raises(protocol.FrameError):
        protocol.parse(pack({"t": "ping", "id": "abc"}), small)
    with pytest.raises(protocol.FrameError):
        protocol.parse(
            pack({"t": "roll", "id": "a", "intent": {}, "visibility": "public", "label": "four"}), small
        )
    assert protocol.parse(
        pack({"t": "roll", "id": "a", "intent": {}, "visibility": "public", "label": "thr"}), small
    )


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_parser(data: bytes) -> None:
    codes = set()
    try:
        protocol.parse(data, LIMITS)
    except protocol.FrameError as err:
        codes.add(err.code)
    assert codes <= set(protocol.ERROR_CODES)


plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)


@given(st.dictionaries(st.text(max_size=5), plain, max_size=4))
def test_plain_intents_round_trip(intent: dict[str, Any]) -> None:
    frame = protocol.parse(pack({"t": "roll", "id": "r", "intent": intent, "visibility": "public"}), LIMITS)
    assert isinstance(frame, protocol.Roll)
    assert frame.intent == intent


def test_encode_keeps_bytes_as_bin() -> None:
    data = protocol.encode({"t": "event", "nonce": b"\x00\x01", "s": "x"})
    assert msgpack.unpackb(data, raw=False) == {"t": "event", "nonce": b"\x00\x01", "s": "x"}
