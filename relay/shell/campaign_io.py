"""The I/O half of campaign management: what the server does once a management event is stored
(``relay.core.membership`` effects), and the GM's export download over HTTP.

Kept apart from ``relay.shell.server`` so the server only hands these over.
"""

from __future__ import annotations

import asyncio
import io
from typing import TYPE_CHECKING, Any

from relay.core.actions import Effect
from relay.core.membership import CloseParticipant, Retitle, SendInvites
from relay.settings.logs import get_logger
from relay.shell import public
from relay.shell.connection import RoomHandle
from relay.shell.host import Host
from relay.trust import tokens

if TYPE_CHECKING:
    from websockets.http11 import Request


TEXT = "text/plain; charset=utf-8"

logger = get_logger("relay.campaign")


def carry_out(relay: Host, handle: RoomHandle, effect: Effect) -> None:
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


def invites_frame(relay: Host, room_id: str, effect: SendInvites) -> dict[str, Any]:
    """The ``invites`` answer: the room's invite tokens of the current generation and their pages.

    Tokens are not events: they go to the GM who asked, and never into the log.
    """
    player = tokens.issue(relay.secret, room_id, "player", invites=effect.generation)
    spectator = tokens.issue(relay.secret, room_id, "spectator", invites=effect.generation)
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


#: ``GET /export/ROOM`` with ``Authorization: Bearer GM_TOKEN``: the room's export, for the GM's page.
EXPORT_PREFIX = "/export/"


async def export_download(relay: Host, request: Request, path: str) -> tuple[int, bytes, str]:
    """(status, body, content type) for the GM's export download: the public export, JSON Lines.

    The token rides in a header, never in the address, so it reaches no access log; only a GM token of
    this room (not removed) is accepted.
    """
    from relay.storage import exports

    room_id = path[len(EXPORT_PREFIX) :]
    header = request.headers.get("Authorization", "")
    token = header[7:].strip() if header[:7].lower() == "bearer " else ""
    try:
        claims = tokens.verify(relay.secret, token, room=room_id)
    except tokens.TokenError as exc:
        return 401, f"{exc.reason}\n".encode(), TEXT
    if claims.role != "gm":
        return 403, b"Only the room's GM may download its export.\n", TEXT
    handle = await relay.room(room_id)
    if handle is None:
        return 404, b"There is no such room on this server.\n", TEXT
    state = handle.room.committed
    if claims.sub is not None and claims.sub in state.revoked:
        return 403, b"This GM was removed from the room.\n", TEXT
    if relay.keyring is None:
        return 409, b"Signing is off on this server, so there is nothing to verify an export with.\n", TEXT
    upto = state.seq
    records: list[dict[str, Any]] = []
    while len(records) < upto:
        chunk = await relay.log.read(room_id, len(records), 5000)
        if not chunk:
            break
        records.extend(r for r in chunk if r["seq"] <= upto)
    out = io.BytesIO()
    info = handle.room.info
    events = exports.public_events(records, info, relay.keyring)
    await asyncio.to_thread(exports.write, out, "jsonl", exports.header(info, relay.keyring, upto), events)
    logger.info("export_downloaded", room=room_id, events=len(records))
    return 200, out.getvalue(), "application/x-ndjson"
