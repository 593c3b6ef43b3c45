"""Files the server hands out over plain HTTP: the spectator and table pages and the JS they load.

Paths map to folders under the repository's ``clients/``; a request can only ever reach a regular file
inside the mapped folder (no ``..``, no absolute paths, no symlink escapes).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from urllib.parse import unquote

CLIENTS = Path(__file__).resolve().parents[1] / "clients"

PAGES = {
    "/watch": ("web", "watch.html"),
    "/table": ("web", "table.html"),
}
PREFIXES = {
    "/web/": ("web",),
    "/js/": ("js",),
    "/vendor/msgpack/": ("js", "node_modules", "@msgpack", "msgpack", "dist.esm"),
    # Imported by the JS client only where WebCrypto lacks Ed25519 (current Chromium has it).
    "/vendor/noble-ed25519/": ("js", "node_modules", "@noble", "ed25519"),
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


def resolve(path: str, root: Path = CLIENTS) -> Path | None:
    """The file a request path names, or None when it names nothing we serve."""
    page = PAGES.get(path)
    if page is not None:
        return _inside(root.joinpath(page[0]), page[1])
    for prefix, folder in PREFIXES.items():
        if path.startswith(prefix):
            return _inside(root.joinpath(*folder), unquote(path[len(prefix) :]))
    return None


def _inside(base: Path, relative: str) -> Path | None:
    if not relative or "\\" in relative or "\x00" in relative:
        return None
    parts = PurePosixPath(relative).parts
    if not parts or any(part in ("..", ".", "") or part.startswith("/") for part in parts):
        return None
    if PurePosixPath(relative).suffix.lower() not in TYPES:
        return None
    candidate = base.joinpath(*parts)
    try:
        real = candidate.resolve(strict=True)
        real_base = base.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not real.is_relative_to(real_base) or not real.is_file():
        return None
    return real


def content_type(path: Path) -> str:
    return TYPES.get(path.suffix.lower(), "application/octet-stream")
