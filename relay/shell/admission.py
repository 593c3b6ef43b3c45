"""Who may open a WebSocket: which browser origins, and how many sockets one address may hold.

Both are decided at the WebSocket handshake, before a socket costs the server anything:

- **Origins** (``origins``, ``TABLERELAY_ORIGINS``: a comma list such as
  ``https://foundry.example.org,https://app.roll20.net``). Unset, any page may connect (every token is
  still checked), as before. Set, a handshake whose ``Origin`` header is neither listed nor this server's
  own origin (the pages it serves itself: the origin's host is the request's ``Host``, or the
  ``public_url``'s) is refused with HTTP 403 and a sentence. A handshake with no ``Origin`` header is not a
  browser's (a command-line or server-side client) and is let through: the allowlist protects browser users
  from other sites' pages, which always send one.
- **Sockets per address** (``limits.max_per_ip``). One more handshake from an address that already holds
  that many is refused with HTTP 429; a socket that slips past it (handshakes racing) is closed with 1013.
  The address is the peer's, or, when the peer is one of the ``trusted_proxies`` (IPs or networks such as
  ``127.0.0.1,10.0.0.0/8``), the last address in ``X-Forwarded-For`` that is not a trusted proxy: the one
  the outermost trusted proxy saw. Without trusted proxies the header is ignored, so a client cannot
  choose its own address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from websockets.datastructures import Headers

from relay.settings.config import Config, ConfigError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

FORBIDDEN_ORIGIN = (
    "This page's origin may not open a WebSocket to this relay. The relay's operator lists the "
    "origins allowed in TABLERELAY_ORIGINS."
)
TOO_MANY = "Too many connections from your address; close some and try again."


def _origin(value: str) -> str | None:
    """``scheme://host[:port]`` in lower case, or None for anything that is not an http(s) origin."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        return None
    if parts.query or parts.fragment or parts.username or parts.password:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = 443 if parts.scheme == "https" else 80
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


def parse_origins(value: str | None) -> frozenset[str] | None:
    """The ``origins`` setting: None when unset (every origin allowed), else the normalized set."""
    if value is None or not value.strip():
        return None
    allowed = set()
    for item in value.split(","):
        if not item.strip():
            continue
        origin = _origin(item)
        if origin is None:
            raise ConfigError(
                f"origins must be a comma list of http:// or https:// origins such as "
                f"https://foundry.example.org (no path); got {item.strip()!r}."
            )
        allowed.add(origin)
    return frozenset(allowed)


def parse_networks(value: str | None) -> tuple[Network, ...]:
    """The ``trusted_proxies`` setting: addresses and networks, or a ConfigError naming the bad one."""
    networks = []
    for item in (value or "").split(","):
        if not item.strip():
            continue
        try:
            networks.append(ipaddress.ip_network(item.strip(), strict=False))
        except ValueError as exc:
            raise ConfigError(
                f"trusted_proxies must be a comma list of IP addresses or networks such as "
                f"127.0.0.1,10.0.0.0/8; got {item.strip()!r}."
            ) from exc
    return tuple(networks)


def _in(address: str, networks: Iterable[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def _host_of(origin: str) -> str:
    return urlsplit(origin).netloc


class Gate:
    """The origin allowlist and the count of open sockets per client address."""

    def __init__(self, config: Config) -> None:
        self.origins = parse_origins(config.origins)
        self.proxies = parse_networks(config.trusted_proxies)
        self.max_per_ip = config.limits.max_per_ip
        own = _origin(config.public_url) if config.public_url else None
        self._own_hosts = frozenset({_host_of(own)} if own else ())
        self.open: dict[str, int] = {}  # client address -> open sockets

    # -- the client's address ------------------------------------------------------------------------

    def address(self, peer: Any, headers: Headers | None) -> str:
        """The client's address: the peer's, or what trusted proxies say in ``X-Forwarded-For``."""
        ip = str(peer[0]) if isinstance(peer, tuple) and peer else "unknown"
        if headers is None or not self.proxies or not _in(ip, self.proxies):
            return ip
        hops = [hop.strip() for value in headers.get_all("X-Forwarded-For") for hop in value.split(",")]
        hops = [hop for hop in hops if hop]
        for hop in reversed(hops):  # the right end was written by the nearest proxy
            if not _in(hop, self.proxies):
                return hop
        return hops[0] if hops else ip

    # -- at the handshake ------------------------------------------------------------------------------

    def refusal(self, peer: Any, headers: Headers) -> tuple[int, str] | None:
        """(HTTP status, sentence) when this handshake is refused, else None."""
        if not self.origin_allowed(headers):
            return 403, FORBIDDEN_ORIGIN
        if self.open.get(self.address(peer, headers), 0) >= self.max_per_ip:
            return 429, TOO_MANY
        return None

    def origin_allowed(self, headers: Headers) -> bool:
        if self.origins is None:
            return True
        raw = headers.get("Origin")
        if raw is None:
            return True  # not a browser
        origin = _origin(raw)
        if origin is None:
            return False  # "null" (a sandboxed frame, a file:// page) and anything unparsable
        if origin in self.origins:
            return True
        host = _host_of(origin)
        if host in self._own_hosts:
            return True
        # The relay's own pages: the page's host is the host this request was sent to.
        return host == (headers.get("Host") or "").strip().lower()

    # -- sockets open --------------------------------------------------------------------------------

    def enter(self, address: str) -> bool:
        """Count a socket from ``address``; False (and not counted) when it already holds the limit."""
        count = self.open.get(address, 0)
        if count >= self.max_per_ip:
            return False
        self.open[address] = count + 1
        return True

    def leave(self, address: str) -> None:
        count = self.open.get(address, 0) - 1
        if count > 0:
            self.open[address] = count
        else:
            self.open.pop(address, None)
