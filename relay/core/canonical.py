"""The canonical encoding (spec/signing.md): what an event may hold, and the one byte string it encodes to.

Pure and shared: the room checks every record it makes against it (``protocol.event_values``), and the
trust layer signs its bytes (``relay.trust.signing``).
"""

from __future__ import annotations

from typing import Any

import msgspec


class CanonicalError(ValueError):
    """A value the canonical encoding cannot hold (a float, a non-string map key, an unknown type)."""


#: The types canonical MessagePack writes as themselves; maps (str keys), lists and tuples hold them.
_SCALARS = frozenset({str, int, bool, bytes, type(None)})
# msgspec's MessagePack encoder, compiled: with ``order="sorted"`` every map's keys go out sorted as Python
# orders ``str``, by code point, which is the order of their UTF-8 bytes (UTF-8 keeps code point order);
# it writes every int in its shortest form, ``str`` as str and ``bytes`` as bin. The same bytes as the
# spec's encoding for every value ``_check`` lets through (tests/relay/test_canonical.py compares it with
# an encoder written from the spec alone and with the pure one this replaced).
_encode = msgspec.msgpack.Encoder(order="sorted").encode


def holds_float(value: Any) -> bool:
    """Whether ``value`` holds a float; ``CanonicalError`` for anything else canonical MessagePack cannot
    hold: a map key that is not a string, or any type but maps, lists, tuples and the scalars it writes as
    themselves (msgspec would encode sets, enums, dates and more; every value is looked at by exact type).

    The one walk that decides what an event may hold: ``canonical`` refuses a float too, and the room
    (``protocol.event_values``) writes floats as decimal strings as it makes a record.
    """
    found = False
    pending = [value]
    pop, extend = pending.pop, pending.extend
    while pending:
        item = pop()
        kind = type(item)
        if kind in _SCALARS:
            continue
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    raise CanonicalError(f"map keys must be strings; got {type(key).__name__}")
            extend(item.values())
        elif kind is list or kind is tuple:
            extend(item)
        elif kind is float:
            found = True
        else:
            raise CanonicalError(f"an event may not hold a {kind.__name__}")
    return found


def _check(value: Any) -> None:
    """Refuse what canonical MessagePack cannot hold: a float, a non-string map key, any other type."""
    if holds_float(value):
        raise CanonicalError("an event may not hold a float")


def canonical(value: Any) -> bytes:
    """The canonical MessagePack bytes of ``value`` (spec/signing.md)."""
    _check(value)
    try:
        return _encode(value)
    except OverflowError as exc:
        # Only a value read from JSON (an export file) can hold one; MessagePack's ints stop at 64 bits.
        raise CanonicalError("an integer is out of MessagePack's range (-2**63 to 2**64 - 1)") from exc


#: ``canonical`` without its walk, for a value already known to hold nothing else (a rendered form of a
#: stored record: the room checks what a record holds as it makes it, ``protocol.event_values``, and an
#: imported one was verified, which encodes it canonically). The walk was a third of a signed form's cost.
encode_canonical = _encode
