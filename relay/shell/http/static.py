"""Files the server hands out over plain HTTP: the spectator and table pages and the JS they load.

Paths map to served clients (``relay/shell/http/assets.py``), found through ``importlib.resources``; a request
can only ever reach a file its client declares, inside that client's folder (no ``..``, no absolute paths, no
symlink escapes).
"""

from __future__ import annotations

import re
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from relay.shell.http import assets

PAGES = {
    "/watch": ("web", "watch.html"),
    "/table": ("web", "table.html"),
}
#: /events/ROOM/SEQ, the page that shows one event and checks its signature (the Roll20 bridge links to it).
EVENT_PAGE = re.compile(r"/events/[A-Za-z0-9_-]{1,64}/[0-9]{1,12}/?")
PREFIXES = {
    "/web/": "web",
    "/js/": "js",
    "/vendor/": assets.VENDOR,
}
TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".json": "application/json",
    ".map": "application/json",
}


def resolve(path: str, served: Traversable | None = None) -> Traversable | None:
    """The file a request path names, or None when it names nothing we serve.

    ``served`` is the folder holding the clients (default: the installed package's, via ``assets``).
    """
    page = PAGES.get(path)
    if page is not None:
        return _inside(served, page[0], page[1])
    if EVENT_PAGE.fullmatch(path):
        # One page for every event address; the page reads the room and seq from its own path.
        return _inside(served, "web", "event.html")
    for prefix, name in PREFIXES.items():
        if path.startswith(prefix):
            return _inside(served, name, unquote(path[len(prefix) :]))
    return None


def _inside(served: Traversable | None, name: str, relative: str) -> Traversable | None:
    if not relative or "\\" in relative or "\x00" in relative:
        return None
    parts = PurePosixPath(relative).parts
    if not parts or any(part in ("..", ".", "") or part.startswith("/") for part in parts):
        return None
    if PurePosixPath(relative).suffix.lower() not in TYPES or not assets.carries(name, relative):
        return None
    base = assets.client_files(name) if served is None else served.joinpath(name)
    candidate = base
    for part in parts:
        candidate = candidate.joinpath(part)
    if isinstance(candidate, Path) and isinstance(base, Path):
        # On a file system a link could point anywhere; what it points to must stay inside the client.
        try:
            real = candidate.resolve(strict=True)
            real_base = base.resolve(strict=True)
        except (OSError, RuntimeError):
            return None
        if not real.is_relative_to(real_base):
            return None
    return candidate if candidate.is_file() else None


def content_type(file: Traversable) -> str:
    return TYPES.get(PurePosixPath(file.name).suffix.lower(), "application/octet-stream")
