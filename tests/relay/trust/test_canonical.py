"""The compiled canonical encoder (msgspec, relay/core/canonical.py) against two references, byte for byte.

``pure_canonical`` is the encoder the server used before: every map rebuilt in sorted key order in Python,
then msgpack. ``spec_signing.encode`` is written from spec/signing.md alone. Every value the spec allows
must come out the same from all three; everything it does not allow must be refused with CanonicalError.
The events the server emits are compared the same way in tests/relay/trust/test_signing.py (rolls and
reveals) and tests/relay/core/test_room_stateful.py (every kind of event, in every audience form).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay.core import canonical
from tests import spec_signing
from tests.pure_canonical import pure_canonical

# Keys and strings from the whole of Unicode but lone surrogates (which UTF-8 cannot hold): above all the
# astral planes, where UTF-16 order and UTF-8 order part ways.
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
KEYS = st.one_of(TEXT, st.sampled_from(["", "a", "Z", "é", "\uffff", "\U0001f600", "seq", "sig", "t"]))
INTEGERS = st.one_of(
    st.integers(-(2**63), 2**64 - 1),
    st.sampled_from([0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, -32, -33, -128, -129]),
    st.sampled_from([-32768, -32769, -(2**31), -(2**31) - 1, -(2**63), 2**63, 2**64 - 1]),
)
SCALARS = st.one_of(st.none(), st.booleans(), INTEGERS, TEXT, st.binary(max_size=300))
# Long strings, binaries, arrays and maps too: their 8/16-bit length headers.
LONG = st.one_of(st.text(min_size=31, max_size=300), st.binary(min_size=255, max_size=70_000))
VALUES = st.recursive(
    st.one_of(SCALARS, LONG),
    lambda inner: st.one_of(
        st.lists(inner, max_size=20),
        st.dictionaries(KEYS, inner, max_size=20),
        st.lists(inner, max_size=20).map(tuple),
    ),
    max_leaves=60,
)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_the_compiled_encoder_writes_the_bytes_of_both_references(value: Any) -> None:
    data = canonical.canonical(value)
    assert data == pure_canonical(value)
    assert data == spec_signing.encode(value)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(KEYS, SCALARS), min_size=17, max_size=80))
def test_maps_past_the_fixmap_size_keep_utf8_byte_order(pairs: list[tuple[str, Any]]) -> None:
    value = dict(pairs)
    data = canonical.canonical(value)
    assert data == spec_signing.encode(value)
    keys = list(msgpack.unpackb(data, raw=False))
    assert keys == sorted(keys, key=lambda key: key.encode())


def test_a_map_of_65536_keys_takes_the_32_bit_header() -> None:
    value = {f"k{i:05d}": i for i in range(65_536)}
    data = canonical.canonical(value)
    assert data[0] == 0xDF
    assert data == spec_signing.encode(value)


class Colour(enum.IntEnum):
    RED = 1


class Kind(enum.StrEnum):
    ROLL = "roll"


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    "bad",
    [
        0.5,
        {"total": 0.5},
        [1, 2.0],
        {"a": [{"b": (1, 2.5)}]},
        float("nan"),
        {1: "a"},
        {"a": {2: 3}},
        {"a": 1, 2: "b"},
        {b"k": 1},
        {None: 1},
        {"s": {1, 2}},
        frozenset({1}),
        bytearray(b"x"),
        memoryview(b"x"),
        Colour.RED,
        {"kind": Kind.ROLL},
        Point(1),
        {"p": [Point(1)]},
        type("Int", (int,), {})(3),
        type("Str", (str,), {})("x"),
        type("Map", (dict,), {})(a=1),
    ],
)
def test_what_the_spec_does_not_allow_is_refused_though_msgspec_would_encode_it(bad: Any) -> None:
    with pytest.raises(canonical.CanonicalError):
        canonical.canonical(bad)


def test_a_refusal_says_what_it_found() -> None:
    with pytest.raises(canonical.CanonicalError, match="may not hold a float"):
        canonical.canonical({"a": [1, {"b": 0.25}]})
    with pytest.raises(canonical.CanonicalError, match="map keys must be strings; got int"):
        canonical.canonical({"a": {"b": {3: 1}}})
