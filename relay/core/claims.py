"""Who a socket is, once its token is verified: the claims a room admits it by, and the roles there are.

The token itself (a JWT, its secret and its checks) is the trust layer's (``relay.trust.tokens``); the room
only ever sees these claims.
"""

from __future__ import annotations

from dataclasses import dataclass

ROLES = ("gm", "player", "spectator")


@dataclass(frozen=True)
class Claims:
    room: str
    role: str
    sub: str | None
    name: str | None
    exp: int | None
    # The invite generation an invite (a token without ``sub``) belongs to: the claim ``inv``, 0 when
    # absent. Rotating a room's invites (relay.core.membership) makes every other generation's invites void.
    invites: int = 0
