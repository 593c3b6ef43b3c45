"""The I/O half of campaign management: what the server does once a management event is stored
(``relay.membership`` effects), and the GM's export download over HTTP.

Kept apart from ``relay.server`` so the server only hands these over.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from relay import auth, public
from relay.logs import get_logger
from relay.membership import CloseParticipant, Retitle, SendInvites
from relay.room import Effect

if TYPE_CHECKING:
    from relay.server import Relay, RoomHandle

logger = get_logger("relay.campaign")


def carry_out(relay: Relay, handle: RoomHandle, effect: Effect) -> None:
    if isinstance(effect, CloseParticipant):
        for conn, session in list(handle.subscribers.items()):
            if session.id == effect.participant:
                logger.info("participant_closed", participant=session.id, code=effect.code)
                relay.metrics.closes.labels(str(effect.code)).inc()
                conn.close(effect.code, effect.reason)
    elif isinstance(effect, Retitle):
        for session in handle.sessions:
            if session.id == effect.member.id:
                session.member = effect.member
    elif isinstance(effect, SendInvites):
        asker = handle.sessions.get(effect.session)
        if asker is not None:
            relay.send_frame(asker, invites_frame(relay, handle.room.id, effect))
    else:
        raise TypeError(f"unknown effect {effect!r}")


def invites_frame(relay: Relay, room_id: str, effect: SendInvites) -> dict[str, Any]:
    """The ``invites`` answer: the room's invite tokens of the current generation and their pages.

    Tokens are not events: they go to the GM who asked, and never into the log.
    """
    player = auth.issue(relay.secret, room_id, "player", invites=effect.generation)
    spectator = auth.issue(relay.secret, room_id, "spectator", invites=effect.generation)
    frame: dict[str, Any] = {
        "t": "invites",
        "id": effect.request_id,
        "generation": effect.generation,
        "player": player,
        "spectator": spectator,
        "links": {
            "player": public.link(relay.public_base, "table", player),
            "spectator": public.link(relay.public_base, "watch", spectator),
        },
    }
    if effect.seq is not None:
        frame["seq"] = effect.seq
    return frame


def export_body(records: list[dict[str, Any]], relay: Relay, handle: RoomHandle) -> bytes:
    """The room's public export (as ``tablerelay room export`` writes it), for the GM's download."""
    from relay import exports

    assert relay.keyring is not None
    out = io.BytesIO()
    info = handle.room.info
    exports.write(
        out, "jsonl", exports.header(info, relay.keyring), exports.public_events(records, info, relay.keyring)
    )
    return out.getvalue()
