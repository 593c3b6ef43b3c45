"""A second implementation of spec/signing.md, written from the spec alone, for cross-checking the server.

Nothing here imports the server or the msgpack library: the canonical encoding is written out byte by byte
from the MessagePack format, and signatures are checked with PyNaCl (libsodium), not ``cryptography``.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from collections.abc import Mapping
from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

DOMAIN = b"tablerelay-event-v1\x00"
LEFT_OUT = ("t", "sig", "kid", "foundry", "roll20")


def _int(n: int) -> bytes:
    if 0 <= n <= 0x7F:
        return bytes([n])
    if -32 <= n < 0:
        return struct.pack(">b", n)
    if n > 0:
        for limit, head, fmt in ((0xFF, 0xCC, ">B"), (0xFFFF, 0xCD, ">H"), (0xFFFFFFFF, 0xCE, ">I")):
            if n <= limit:
                return bytes([head]) + struct.pack(fmt, n)
        return b"\xcf" + struct.pack(">Q", n)
    for low, head, fmt in ((-0x80, 0xD0, ">b"), (-0x8000, 0xD1, ">h"), (-0x80000000, 0xD2, ">i")):
        if n >= low:
            return bytes([head]) + struct.pack(fmt, n)
    return b"\xd3" + struct.pack(">q", n)


def _sized(n: int, fix: int | None, fix_limit: int, heads: tuple[int, int, int]) -> bytes:
    if fix is not None and n <= fix_limit:
        return bytes([fix | n])
    for limit, head, fmt in ((0xFF, heads[0], ">B"), (0xFFFF, heads[1], ">H"), (0xFFFFFFFF, heads[2], ">I")):
        if n <= limit and head:
            return bytes([head]) + struct.pack(fmt, n)
    raise ValueError("too long")


def encode(value: Any) -> bytes:
    """Canonical MessagePack as the spec words it."""
    if value is None:
        return b"\xc0"
    if value is True:
        return b"\xc3"
    if value is False:
        return b"\xc2"
    if isinstance(value, int):
        return _int(value)
    if isinstance(value, float):
        raise TypeError("a float in an event")
    if isinstance(value, str):
        data = value.encode("utf-8")
        return _sized(len(data), 0xA0, 31, (0xD9, 0xDA, 0xDB)) + data
    if isinstance(value, bytes):
        return _sized(len(value), None, -1, (0xC4, 0xC5, 0xC6)) + value
    if isinstance(value, list | tuple):
        return _sized(len(value), 0x90, 15, (0, 0xDC, 0xDD)) + b"".join(encode(v) for v in value)
    if isinstance(value, Mapping):
        items = sorted(((k.encode("utf-8"), v) for k, v in value.items()), key=lambda kv: kv[0])
        body = b"".join(encode(k.decode("utf-8")) + encode(v) for k, v in items)
        return _sized(len(items), 0x80, 15, (0, 0xDE, 0xDF)) + body
    raise TypeError(f"{type(value).__name__} in an event")


def message(event: Mapping[str, Any], room_id: str) -> bytes:
    signed = {k: v for k, v in event.items() if k not in LEFT_OUT}
    return DOMAIN + room_id.encode("utf-8") + b"\x00" + encode(signed)


def keys_by_kid(jwks: Mapping[str, Any]) -> dict[str, bytes]:
    out = {}
    for jwk in jwks["keys"]:
        raw = base64.urlsafe_b64decode(jwk["x"] + "=" * (-len(jwk["x"]) % 4))
        assert jwk["kid"] == hashlib.sha256(raw).hexdigest()[:16], jwk
        out[jwk["kid"]] = raw
    return out


def verify(event: Mapping[str, Any], room_id: str, jwks: Mapping[str, Any]) -> bool:
    public = keys_by_kid(jwks).get(event.get("kid", ""))
    sig = event.get("sig")
    if public is None or not isinstance(sig, bytes):
        return False
    try:
        VerifyKey(public).verify(message(event, room_id), sig)
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True
