"""Who sees what: audiences per visibility, sealing with commitments, and events as each viewer receives them.

A roll outside ``public`` is stored in full together with a commitment: the hex SHA-256 of ``nonce ‖ blob``
where ``blob`` is the MessagePack encoding of the roll's full event body (``body_of``) and ``nonce`` 32
random bytes. Viewers outside the audience get a placeholder with the commitment only; the reveal event
publishes ``blob`` and ``nonce`` so anyone can check them against the commitment they received earlier.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any

import msgpack

from relay.core.state import CAMPAIGN_FIELDS, RoomState

FULL = "full"
SEALED = "sealed"

#: The keys of a roll's full event body, in the order the blob encodes them.
BODY_KEYS = ("seq", "epoch", "ts", "kind", "actor", "visibility", "label", "intent", "result")
#: The keys every event carries on the wire.
ENVELOPE_KEYS = ("seq", "epoch", "ts", "kind", "actor", "visibility")
NONCE_BYTES = 32
#: The public fields of a room's seed events (spec/fairness.md).
SEED_FIELDS = {
    "seed_commit": ("n", "commit"),
    "seed_reveal": ("n", "seed"),
    "pending": ("roller", "n", "asked", "commit"),
}


def sees_full(visibility: str, roller_id: str, viewer_id: str, viewer_role: str) -> bool:
    """The audience table of spec/protocol.md: does this viewer get the full roll?"""
    if visibility == "public":
        return True
    if visibility == "gm":
        return viewer_role == "gm" or viewer_id == roller_id
    if visibility == "blind":
        return viewer_role == "gm"
    if visibility == "self":
        return viewer_id == roller_id
    raise ValueError(f"unknown visibility {visibility!r}")


def commitment(nonce: bytes, blob: bytes) -> str:
    return hashlib.sha256(nonce + blob).hexdigest()


def verify(nonce: bytes, blob: bytes, expected: str) -> bool:
    # compare_digest takes ASCII text only; a commitment read from a file may hold anything.
    return expected.isascii() and hmac.compare_digest(commitment(nonce, blob), expected)


#: What a sealed placeholder shows of a roll's ``fair`` map (spec/fairness.md): enough for each witness to
#: check its own value at once; the rest is in the blob the reveal publishes.
SEALED_FAIR_KEYS = ("n", "pending", "witnesses")


def body_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """A roll's full event body (what its blob encodes), from its stored record."""
    body = {key: record[key] for key in BODY_KEYS}
    if "fair" in record:
        body["fair"] = record["fair"]
    return body


def seal(body: Mapping[str, Any], nonce: bytes | None = None) -> dict[str, Any]:
    """The ``sealed`` part of a hidden roll's stored record: blob, nonce and commitment."""
    blob: bytes = msgpack.packb(dict(body), use_bin_type=True)
    nonce = nonce if nonce is not None else secrets.token_bytes(NONCE_BYTES)
    return {"blob": blob, "nonce": nonce, "commitment": commitment(nonce, blob)}


def audience(record: Mapping[str, Any], state: RoomState, viewer_id: str, viewer_role: str) -> str:
    """``FULL`` or ``SEALED``: which form of ``record`` this viewer may receive, given the state now."""
    if record["kind"] != "roll" or record["visibility"] == "public":
        return FULL
    sealed = state.sealed.get(record["seq"])
    if sealed is not None and sealed.revealed is not None:
        return FULL
    if sees_full(record["visibility"], record["actor"]["id"], viewer_id, viewer_role):
        return FULL
    if state.aliases and sees_full(
        record["visibility"], state.identity(record["actor"]["id"]), viewer_id, viewer_role
    ):
        return FULL  # rolled by a participant since merged into this viewer
    return SEALED


def render(record: Mapping[str, Any], form: str, state: RoomState) -> dict[str, Any]:
    """The ``event`` frame for ``record`` in ``form`` (without format renderings; see ``relay.core.formats``).

    Stored-only fields (the roll id, the nonce, the blob of an unrevealed roll) never appear here, and a
    sealed form never carries label, intent or result. The output depends on ``state`` only through its
    reveals (``revealed``, and a resource's ``cause``): ``relay.trust.forms.Forms`` relies on it.
    """
    return _fill({"t": "event"}, record, form, state)


def render_signed(record: Mapping[str, Any], form: str, state: RoomState) -> dict[str, Any]:
    """``render`` without the frame's ``t``: the part of the event its signature covers (spec/signing.md)."""
    return _fill({}, record, form, state)


def _fill(frame: dict[str, Any], record: Mapping[str, Any], form: str, state: RoomState) -> dict[str, Any]:
    for key in ENVELOPE_KEYS:
        frame[key] = record[key]
    kind = record["kind"]
    if kind == "roll":
        sealed = record.get("sealed")
        if form == SEALED:
            assert sealed is not None, "a public roll has no sealed form"
            frame["sealed"] = True
            frame["commitment"] = sealed["commitment"]
            fair = record.get("fair")
            if fair is not None:
                frame["fair"] = {key: fair[key] for key in SEALED_FAIR_KEYS}
            return frame
        frame["label"] = record["label"]
        frame["intent"] = record["intent"]
        frame["result"] = record["result"]
        if "fair" in record:
            frame["fair"] = record["fair"]
        if sealed is not None:
            frame["commitment"] = sealed["commitment"]
            revealed = state.sealed.get(record["seq"])
            if revealed is not None and revealed.revealed is not None:
                frame["revealed"] = revealed.revealed
    elif kind == "reveal":
        frame["of"] = record["of"]
        frame["blob"] = record["blob"]
        frame["nonce"] = record["nonce"]
    elif kind == "resource":
        frame["name"] = record["name"]
        if record.get("participant") is not None:
            frame["participant"] = record["participant"]
        frame["delta"] = record["delta"]
        frame["value"] = record["value"]
        cause = record.get("cause")
        frame["cause"] = None if cause is None or state.is_hidden(cause) else cause
    elif kind in ("join", "leave"):
        frame["member"] = record["member"]
    elif kind in SEED_FIELDS:
        for key in SEED_FIELDS[kind]:
            frame[key] = record[key]
        # A pending whose roll will spend: what it holds until then (docs/fairness.md, a tablerelay addition).
        if "holds" in record:
            frame["holds"] = record["holds"]
    else:
        for key in CAMPAIGN_FIELDS.get(kind, ()):
            frame[key] = record[key]
    return frame
