"""The canonical encoder relay/core/canonical.py had before the compiled one (msgspec): a reference for its
tests.

Every map is rebuilt with its keys in sorted order (Python orders ``str`` by code point, the order of
their UTF-8 bytes) and msgpack writes it, every int in its shortest form.
"""

from __future__ import annotations

from typing import Any

import msgpack

from relay.core.canonical import CanonicalError

_PURE_SCALARS = frozenset({str, int, bool, bytes, type(None)})


def _ordered(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        try:
            keys = sorted(value)
        except TypeError:
            raise CanonicalError("map keys must be strings") from None
        if keys and type(keys[0]) is not str:
            raise CanonicalError("map keys must be strings")
        return {key: _ordered(value[key]) for key in keys}
    if kind is list or kind is tuple:
        return [_ordered(item) for item in value]
    if kind in _PURE_SCALARS:
        return value
    raise CanonicalError(f"an event may not hold a {kind.__name__}")


def pure_canonical(value: Any) -> bytes:
    """The encoder relay/core/canonical.py had before msgspec (msgpack writes every int in its shortest
    form)."""
    data: bytes = msgpack.packb(_ordered(value), use_bin_type=True)
    return data
