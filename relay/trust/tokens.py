"""Tokens: HS256 JWTs with claims room, role, optional sub (participant id), name, exp.

The signing secret is ``TABLERELAY_SECRET`` when set, else a random secret made once in the data folder,
so ``serve``, ``room create`` and ``token`` agree without set-up.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

import jwt

from relay.core.claims import ROLES, Claims

ALGORITHM = "HS256"
SECRET_FILE = "secret.key"  # noqa: S105  (a file name, not a secret)
DEFAULT_TTL = 30 * 24 * 3600  # invites and sessions last a month unless asked otherwise


class TokenError(Exception):
    """A token that is refused; ``reason`` is a sentence for the close frame."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def load_secret(data: Path, configured: str | None = None) -> bytes:
    """The signing secret: the configured one, else the data folder's, created on first use."""
    if configured:
        return configured.encode()
    data.mkdir(parents=True, exist_ok=True)
    path = data / SECRET_FILE
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    secret = secrets.token_urlsafe(48).encode()
    # O_EXCL: when two commands race to create it, exactly one wins and the other reads the winner's.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as fh:
        fh.write(secret)
    return secret


def new_gm_id() -> str:
    """A participant id for a GM token.

    Invites (no ``sub``) make a new participant per connection, which is right for players joining from
    one shared link but wrong for a GM: a GM token names one participant, so a second tab or a reconnect
    is the same GM, not another one.
    """
    return "gm-" + secrets.token_hex(6)


def issue(
    secret: bytes,
    room: str,
    role: str,
    *,
    sub: str | None = None,
    name: str | None = None,
    ttl: int | None = DEFAULT_TTL,
    invites: int = 0,
) -> str:
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}; got {role!r}")
    claims: dict[str, Any] = {"room": room, "role": role, "iat": int(time.time())}
    if sub is not None:
        claims["sub"] = sub
    if name is not None:
        claims["name"] = name
    if invites:
        claims["inv"] = invites
    if ttl is not None:
        claims["exp"] = int(time.time()) + ttl
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def verify(secret: bytes, token: object, room: str | None = None) -> Claims:
    """Check signature, expiry and shape; with ``room``, that the token is for that room."""
    if not isinstance(token, str) or not token:
        raise TokenError("The token must be a non-empty string.")
    try:
        claims = jwt.decode(token, secret, algorithms=[ALGORITHM], options={"require": ["room", "role"]})
    except jwt.ExpiredSignatureError as exc:
        raise TokenError("The token has expired; ask the GM for a new one.") from exc
    except jwt.InvalidSignatureError as exc:
        raise TokenError("The token's signature does not match this server's secret.") from exc
    except jwt.MissingRequiredClaimError as exc:
        raise TokenError(f"The token lacks the {exc.claim!r} claim.") from exc
    except jwt.InvalidTokenError as exc:
        raise TokenError("The token is not a valid tablerelay token.") from exc
    role = claims.get("role")
    if role not in ROLES:
        raise TokenError(f"The token's role must be one of {', '.join(ROLES)}.")
    if not isinstance(claims.get("room"), str):
        raise TokenError("The token's room claim must be a string.")
    if room is not None and claims["room"] != room:
        raise TokenError("The token is for a different room.")
    sub = claims.get("sub")
    name = claims.get("name")
    exp = claims.get("exp")
    inv = claims.get("inv", 0)
    return Claims(
        room=claims["room"],
        role=role,
        sub=sub if isinstance(sub, str) else None,
        name=name if isinstance(name, str) else None,
        exp=exp if isinstance(exp, int) else None,
        invites=inv if isinstance(inv, int) and not isinstance(inv, bool) else -1,
    )
