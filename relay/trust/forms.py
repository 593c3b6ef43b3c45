"""Each event of a room in each audience form, signed once: the signatures every socket and welcome share.

A form is what one audience may see of an event (``relay.core.visibility``); ``Forms`` signs each (event,
form) once, keeps the recent ones, and hands out the signed frame or its wire bytes. The shell's fan-out
(``relay.shell.fanout``) sends them; room exports (``relay.storage.exports``) sign with it too.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from relay.core import protocol
from relay.core.canonical import encode_canonical
from relay.core.state import RoomState
from relay.core.visibility import render, render_signed
from relay.trust.signing import Keyring, message

#: The keys a signed frame has beyond its signed map, none of them covered by the signature: ``t``, ``kid``
#: and ``sig``.
_UNSIGNED_KEYS = 3


class _Kept:
    """One (event, form) signed: the rendered form's signed part (``base``: the event without ``t``), its
    canonical encoding until the wire bytes are made from it (``body``), its signature, and the record and
    reveal count it was made for. The signed frame is built the first time it is asked for."""

    __slots__ = ("_frame", "base", "body", "record", "reveals", "sig")

    def __init__(
        self, reveals: int, base: dict[str, Any], body: bytes, sig: bytes, record: Mapping[str, Any]
    ) -> None:
        self.reveals = reveals
        self.base = base
        self.body: bytes | None = body  # let go once the wire bytes are made: a kept form stays small
        self.sig = sig
        self.record = record
        self._frame: dict[str, Any] | None = None

    def frame(self, kid: str) -> dict[str, Any]:
        if self._frame is None:
            self._frame = {"t": "event", **self.base, "kid": kid, "sig": self.sig}
        return self._frame

    def wire(self, kid: str) -> bytes:
        """The signed frame as one framed WebSocket message: the canonical encoding that was signed, with
        the keys the signature does not cover (``t``, ``kid``, ``sig``) appended. The same map as
        ``frame``, its keys in another order (a map's order means nothing to a decoder), from the one
        encoding the form gets. Made once per broadcast (``Renderer`` keeps it for every socket), not kept
        here: welcomes use ``frame``."""
        body, self.body = self.body, None
        if body is None:
            body = encode_canonical(self.base)
        tail = _unsigned_tail(kid) + self.sig
        return protocol.framed(protocol.with_fields(body, _UNSIGNED_KEYS, tail))


@functools.lru_cache(maxsize=8)
def _unsigned_tail(kid: str) -> bytes:
    """``"t": "event", "kid": kid, "sig":`` and the 64-byte bin header: every signed frame's wire bytes end
    with these, then the signature."""
    parts = ("t", "event", "kid", kid, "sig")
    return b"".join(protocol.encode(part) for part in parts) + b"\xc4\x40"


class Forms:
    """A room's events in each audience form, signed: every (event, form) is signed once, not per socket.

    ``frame`` renders a record in a form and returns it with ``kid`` and ``sig``. The signed frame is
    kept (the last ``capacity`` of them) with the record it was made from and the room's reveal count,
    and returned again for that same record while no reveal came since, or while the form still renders
    the same: so the live broadcast and every welcome that shows the event in that form share one
    signature. A form that changed (a roll after its reveal, a resource event whose cause was revealed)
    is signed anew, and so is a record that is not the one signed (an append that failed left its
    signatures behind, and another record took its seq). Without a keyring (signing switched off, for
    benchmarks) frames go out unsigned. Only the forms of the room's last ``capacity`` seqs are kept,
    so a loaded room's memory is bounded by events; an older form (a long resume gap) is signed for the
    welcome that asked and not kept, so it never pushes out the recent forms every welcome shows.

    Each form is encoded once, canonically: the key signs those bytes (about 3 µs with a nonce made ahead
    of time, ``relay.trust.nonces``) and the sockets get them with the unsigned keys appended.
    """

    def __init__(self, room_id: str, keyring: Keyring | None, capacity: int) -> None:
        self.room_id = room_id
        self._signed_prefix = message(b"", room_id)  # what a form's signed bytes start with
        self.keyring = keyring
        self.capacity = capacity
        # (seq, form) -> its signature, kept; the old ones are dropped in one sweep now and then (dropping
        # the first of a dict one at a time makes finding the next first a walk over the deleted keys),
        # once a quarter of the capacity's seqs are past keeping: the dict spans at most 1.25 x capacity
        # seqs, and a sweep copies about 1.25 x capacity entries once every capacity / 4 seqs.
        self._signed: dict[tuple[int, str], _Kept] = {}
        self._newest = 0  # the highest seq kept
        self._swept = 0  # every seq at or below it is gone from ``_signed``
        self._slack = max(8, capacity // 4)

    def frame(self, record: Mapping[str, Any], form: str, state: RoomState) -> dict[str, Any]:
        """``record`` as the audience of ``form`` receives it; a shared object, never to be changed."""
        keyring = self.keyring
        if keyring is None:
            return render(record, form, state)
        return self._kept(record, form, state, keyring).frame(keyring.kid)

    def wire(self, record: Mapping[str, Any], form: str, state: RoomState) -> bytes:
        """``frame`` encoded and framed for a socket (the bytes every socket of that audience gets)."""
        keyring = self.keyring
        if keyring is None:
            return protocol.framed(protocol.encode(render(record, form, state)))
        return self._kept(record, form, state, keyring).wire(keyring.kid)

    def _kept(self, record: Mapping[str, Any], form: str, state: RoomState, keyring: Keyring) -> _Kept:
        key = (record["seq"], form)
        kept = self._signed.get(key)
        if kept is not None and kept.reveals == state.reveals and kept.record is record:
            return kept
        base = render_signed(record, form, state)
        if kept is not None and kept.base == base:
            kept.reveals, kept.record = state.reveals, record
            return kept
        # Records are canonical from the start (relay.core.room checks each as it makes it), so the form needs
        # no walk of its own before it is encoded.
        body = encode_canonical(base)
        sig = keyring.sign_bytes(self._signed_prefix + body)
        return self._keep(key, _Kept(state.reveals, base, body, sig, record))

    def _keep(self, key: tuple[int, str], kept: _Kept) -> _Kept:
        seq = key[0]
        if seq > self._newest:
            self._newest = seq
        cutoff = self._newest - self.capacity
        if seq <= cutoff:
            return kept
        signed = self._signed
        signed[key] = kept
        if cutoff - self._swept >= self._slack:
            self._signed = {k: v for k, v in signed.items() if k[0] > cutoff}
            self._swept = cutoff
        return kept
