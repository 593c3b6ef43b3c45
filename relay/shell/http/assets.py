"""The client folders the relay serves, declared once, and where to find them at run time.

Each ``Client`` names a folder of the repository (``clients/web``, ...) and which of its files are served.
The build (``scripts/build_assets.py``, run by ``setup.py`` for the sdist and the wheel, and by
``scripts/run`` and ``scripts/test`` for a checkout) puts every declared client under ``relay/_served/NAME``
and the vendored npm builds under ``relay/_served/vendor/NAME``. In a wheel those are copies of the declared
files; in a checkout they are links to the repository's folders, so an edited page is served at once. The
server only ever reads them through ``importlib.resources``, so an installed relay serves the same files
wherever it runs from.

To serve another client, add one ``Client`` line to ``CLIENTS``; to vendor another npm package for the
pages, add one ``Vendored`` line to ``VENDORED`` (it must be in the named lock file).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from importlib.resources import files
from importlib.resources.abc import Traversable

#: The folder inside the ``relay`` package that holds every served client.
SERVED = "_served"
#: The served client that holds the vendored npm builds, one folder per ``Vendored.name``.
VENDOR = "vendor"

# Never carried, whatever a client's patterns say: installed packages, editor and tool leftovers.
_NEVER = ("node_modules/*", "*/node_modules/*", ".*", "*/.*", "__pycache__/*", "*/__pycache__/*")


@dataclass(frozen=True)
class Client:
    """A repository folder the relay serves: ``name`` is how the server and ``client_files`` call it."""

    name: str
    source: str  # folder relative to the repository's root, with forward slashes
    include: tuple[str, ...] = ("*",)  # fnmatch patterns on paths relative to ``source`` (``*`` spans ``/``)
    exclude: tuple[str, ...] = ()
    # False for a client that may not exist yet in a checkout: carried when its folder is there.
    required: bool = True

    def carries(self, relative: str) -> bool:
        """Whether the file at ``relative`` (a path inside ``source``) is served and packaged."""
        return _matches(relative, self.include) and not _matches(relative, (*self.exclude, *_NEVER))


@dataclass(frozen=True)
class Vendored:
    """An npm package's browser build, carried as ``vendor/NAME/`` and taken from a lock file's version."""

    name: str
    package: str  # the npm package as the lock names it, e.g. "@msgpack/msgpack"
    dist: str  # the folder inside the package that is carried
    include: tuple[str, ...] = ("*.mjs",)  # patterns relative to ``dist``
    lock: str = "clients/js/package-lock.json"

    def carries(self, relative: str) -> bool:
        return _matches(relative, self.include) and not _matches(relative, _NEVER)


CLIENTS: tuple[Client, ...] = (
    Client("web", "clients/web"),
    Client("js", "clients/js", include=("tablerelay.js", "tablerelay.d.ts", "src/*.js")),
    # The Foundry VTT module (served as /foundry/module.json and /foundry/tablerelay.zip).
    Client("foundry", "clients/foundry", exclude=("test/*", "*.test.*", "package*.json"), required=False),
)

VENDORED: tuple[Vendored, ...] = (
    Vendored("msgpack", "@msgpack/msgpack", "dist.esm"),
    # Imported by the JS client only where WebCrypto lacks Ed25519 (current Chromium has it).
    Vendored("noble-ed25519", "@noble/ed25519", ".", include=("index.js",)),
)


class UnknownClient(LookupError):
    """A client name that no ``Client`` line declares."""


def client(name: str) -> Client:
    for declared in CLIENTS:
        if declared.name == name:
            return declared
    known = ", ".join([c.name for c in CLIENTS] + [VENDOR])
    raise UnknownClient(f"No served client is called {name!r}; the declared ones are {known}.")


def client_files(name: str) -> Traversable:
    """The root folder of the served client ``name`` ("web", "js", "foundry", or "vendor").

    The same call works in a checkout (after ``scripts/build_assets.py --develop``, which ``scripts/run``
    and ``scripts/test`` run) and in an installed wheel, because both put the client inside the ``relay``
    package. The folder may be missing (a client not built into this installation): check ``is_dir()``.
    Read only the files ``carries(name, path)`` accepts; in a checkout the folder is the repository's own
    and holds more (tests, node_modules).
    """
    if name != VENDOR:
        client(name)  # refuse an undeclared name before it becomes a path
    return files("relay").joinpath(SERVED, name)


def carries(name: str, relative: str) -> bool:
    """Whether ``relative`` (a slash-separated path inside the client ``name``) is a served file."""
    if name == VENDOR:
        package, _, inside = relative.partition("/")
        return any(v.name == package and v.carries(inside) for v in VENDORED)
    return client(name).carries(relative)


def client_paths(name: str) -> Iterator[tuple[str, Traversable]]:
    """Every served file of the client ``name``: its slash-separated relative path and the file, sorted.

    For building archives of a client (the Foundry module's zip) the same way from a checkout and a wheel.
    """
    root = client_files(name)
    if not root.is_dir():
        return
    for relative, item in sorted(_walk(root, ""), key=lambda pair: pair[0]):
        if carries(name, relative):
            yield relative, item


def _walk(folder: Traversable, prefix: str) -> Iterator[tuple[str, Traversable]]:
    for item in folder.iterdir():
        relative = f"{prefix}{item.name}"
        if item.is_dir():
            if item.name == "node_modules" or item.name.startswith("."):
                continue  # never carried; skipping them keeps a checkout's walk short
            yield from _walk(item, relative + "/")
        elif item.is_file():
            yield relative, item


def _matches(relative: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(relative, pattern) for pattern in patterns)
