"""The relay's HTTP endpoints, answered before a WebSocket handshake (websockets' ``process_request``).

``/ws`` is let through to the handshake when the gate allows it; ``/healthz``, ``/metrics``, the published
key set, the Foundry module's manifest and zip, a GM's room export, and the served pages are answered here.
"""

from __future__ import annotations

import asyncio
import email.utils
import http
import json
import re
import time
from urllib.parse import urlsplit

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from relay.settings.logs import get_logger
from relay.shell import campaign_io
from relay.shell.host import HttpHost
from relay.shell.http import foundry, static
from relay.shell.observe.metrics import CONTENT_TYPE as METRICS_TYPE

logger = get_logger("relay.server")
NOT_BUILT = (
    b"This page is not installed on this server. A wheel carries it; a checkout needs "
    b"'python scripts/build_assets.py --develop' (./scripts/run does it).\n"
)
KEYS_PATH = "/.well-known/tablerelay-keys.json"
STOPPING = b"The server is shutting down; reconnect in a moment and resume.\n"


class Routes:
    """The HTTP side of one server: its routes, and the Foundry zips it built (one per address)."""

    def __init__(self, host: HttpHost) -> None:
        self.host = host
        self._foundry_zips: dict[str, bytes] = {}  # the Foundry module's zip, built once per base address

    async def process_request(
        self,
        connection: ServerConnection,
        request: Request,
    ) -> Response | None:
        path = urlsplit(request.path).path
        if path == "/ws":
            if self.host.stopping:  # a handshake that slipped in while the listening socket closed
                return _response(503, STOPPING, "text/plain; charset=utf-8")
            refused = self.host.gate.refusal(connection.remote_address, request.headers)
            if refused is not None:
                logger.info("handshake_refused", status=refused[0], origin=request.headers.get("Origin"))
                return _response(refused[0], f"{refused[1]}\n".encode(), "text/plain; charset=utf-8")
            return None
        if path == "/healthz":
            full = self.host.fullness.full  # still 200: reads, welcomes and resumes are served
            body = json.dumps(
                {
                    "status": "degraded" if full else "ok",
                    "store": "full" if full else "ok",
                    "rooms": len(self.host.rooms),
                    "connections": len(self.host.connections),
                    "uptime": round(time.time() - self.host.started, 3),
                    "loop_lag": self.host.lag.summary(),
                }
            ).encode()
            return _response(200, body, "application/json")
        if path == "/metrics":
            return _response(200, self.host.metrics.render(), METRICS_TYPE)
        if path in (foundry.MANIFEST_PATH, foundry.ZIP_PATH):
            return await self._foundry(path, request)
        if path.startswith(campaign_io.EXPORT_PREFIX):
            status, body, kind = await campaign_io.export_download(self.host, request, path)
            return _response(status, body, kind)
        if path == KEYS_PATH:
            # Public and the same for everyone: any page or tool may fetch it, and caches may keep it a
            # while (a rotation only adds a key, and takes effect when the server restarts).
            return _response(
                200,
                self.host.published_keys,
                "application/jwk-set+json",
                cache="public, max-age=300",
                cors=True,
            )
        file = static.resolve(path)
        if file is not None:
            try:
                data = await asyncio.to_thread(file.read_bytes)
            except OSError:
                return _response(404, b"Not found.\n", "text/plain; charset=utf-8")
            return _response(200, data, static.content_type(file))
        if path in static.PAGES:
            return _response(404, NOT_BUILT, "text/plain; charset=utf-8")
        return _response(404, b"Not found.\n", "text/plain; charset=utf-8")

    async def _foundry(self, path: str, request: Request) -> Response:
        """The Foundry module's manifest or zip, with addresses that name this relay as it was reached."""
        base = self.host.config.public_url or _request_base(request) or self.host.public_base
        sources = foundry.installed_sources()
        try:
            if path == foundry.MANIFEST_PATH:
                body = json.dumps(foundry.manifest(sources, base), indent=2).encode()
                return _response(200, body, "application/json", cors=True)
            data = self._foundry_zips.get(base)
            if data is None:
                data = await asyncio.to_thread(foundry.package, sources, base)
                if len(self._foundry_zips) >= FOUNDRY_ZIPS_KEPT:  # the oldest goes
                    del self._foundry_zips[next(iter(self._foundry_zips))]
                self._foundry_zips[base] = data
        except foundry.FoundryPackageError as exc:
            logger.warning("foundry_package_unavailable", reason=str(exc))
            return _response(404, f"{exc}\n".encode(), "text/plain; charset=utf-8")
        return _response(200, data, "application/zip")


def _response(
    status: int, body: bytes, content_type: str, *, cache: str = "no-cache", cors: bool = False
) -> Response:
    phrase = http.HTTPStatus(status).phrase
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Connection", "close"),
            ("Content-Length", str(len(body))),
            ("Content-Type", content_type),
            ("Cache-Control", cache),
            ("X-Content-Type-Options", "nosniff"),
        ]
    )
    if cors:
        headers["Access-Control-Allow-Origin"] = "*"
    return Response(status, phrase, headers, body)


#: Foundry zips kept, one per address the module was fetched by: a relay is reached by a few (its public
#: name, a LAN address, localhost), and a zip is about 80 KB, so Host headers made up by the thousand must
#: not each keep one.
FOUNDRY_ZIPS_KEPT = 8
#: A Host (or X-Forwarded-Host) that may name this relay in a manifest: a DNS name or IPv4 address, or an
#: IPv6 address in brackets, and an optional port.
_HOST = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\])"  # a name; an IPv6 address
    r"(?::[0-9]{1,5})?"  # a port
)


def _request_base(request: Request) -> str | None:
    """This server's address as the request reached it (behind a proxy, as the proxy says it was reached);
    None when the request names no host that could be one."""
    host = request.headers.get("X-Forwarded-Host") or request.headers.get("Host")
    host = host.split(",")[0].strip() if host else ""
    if not _HOST.fullmatch(host):
        return None
    scheme = request.headers.get("X-Forwarded-Proto", "http").split(",")[0].strip()
    return f"{'https' if scheme == 'https' else 'http'}://{host}"
