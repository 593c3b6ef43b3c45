"""The Foundry VTT module as the relay hands it out: its manifest and its zip, built from ``clients/foundry``.

A GM installs the module in Foundry by the manifest URL ``<relay>/foundry/module.json``; Foundry's server
then downloads ``<relay>/foundry/tablerelay.zip``. The zip is built here, in memory, from the module's
sources, the thin JS client and the MessagePack module it imports, so nothing built is ever checked in:

- ``module.json`` with this relay's version and its absolute ``manifest`` and ``download`` addresses;
- ``scripts/``, ``styles/`` as they are in ``clients/foundry``, except that ``scripts/client.mjs``, which in
  the repository re-exports ``clients/js/tablerelay.js``, re-exports the copy in ``lib/``;
- ``lib/tablerelay.mjs``: the JS client's entry, and its parts beside it as the client serves them
  (``lib/src/*.js``), importing ``lib/msgpack/index.mjs`` and ``lib/noble-ed25519/index.js`` by relative paths
  instead of the bare ``@msgpack/msgpack`` and ``@noble/ed25519``;
- ``lib/msgpack/``: @msgpack/msgpack's ES module build; ``lib/noble-ed25519/``: @noble/ed25519's module.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from importlib.resources.abc import Traversable
from typing import Any

from relay.shell.http import assets

MODULE_ID = "tablerelay"
MANIFEST_PATH = "/foundry/module.json"
ZIP_PATH = "/foundry/tablerelay.zip"
#: What the module's own files may be; anything else in the folder (tests, notes) stays out of the zip.
SHIPPED = ("module.json", "scripts/", "styles/", "lang/", "templates/")
#: How the module's ``scripts/client.mjs`` reaches the JS client in the repository (in the zip: lib/).
REPOSITORY_CLIENT = '"../../js/tablerelay.js"'
#: The JS client's entry: lib/tablerelay.mjs in the zip, where its other files keep their paths under lib/.
CLIENT_ENTRY = "tablerelay.js"
#: The JS client's bare imports and what they become in the zip (a browser resolves no bare name without an
#: import map, and Foundry has none): ``{up}`` is the way from the importing file up to lib/.
CLIENT_IMPORTS = {
    'from "@msgpack/msgpack"': 'from "{up}msgpack/index.mjs"',
    'import("@noble/ed25519")': 'import("{up}noble-ed25519/index.js")',
}
#: A fixed time for every zip entry, so the same sources always make the same bytes.
EPOCH = (2024, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Sources:
    """The module's parts: its own served files, the JS client's files and the ES modules it imports."""

    module: list[tuple[str, Traversable]]
    client: list[tuple[str, Traversable]]  # the JS client's served modules, by path inside clients/js
    msgpack: Traversable
    noble: Traversable  # @noble/ed25519, imported by the client only where WebCrypto lacks Ed25519


def installed_sources() -> Sources:
    """The parts as this installation serves them (a checkout's links or a wheel's copies;
    relay.shell.http.assets)."""
    return Sources(
        module=list(assets.client_paths("foundry")),
        client=[(path, file) for path, file in assets.client_paths("js") if path.endswith(".js")],
        msgpack=assets.client_files(assets.VENDOR).joinpath("msgpack"),
        noble=assets.client_files(assets.VENDOR).joinpath("noble-ed25519"),
    )


class FoundryPackageError(Exception):
    """The module's sources are missing or broken; the message says what to do."""


def version() -> str:
    try:
        return metadata.version("tablerelay")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "0.0.0"


def manifest(sources: Sources, base_url: str) -> dict[str, Any]:
    """``module.json`` with this relay's version and the absolute addresses Foundry installs from."""
    found = dict(sources.module).get("module.json")
    if found is None:
        raise FoundryPackageError("The Foundry module is not installed with this relay (no module.json).")
    try:
        data: dict[str, Any] = json.loads(found.read_bytes())
    except (OSError, ValueError) as exc:
        raise FoundryPackageError(f"The Foundry module's module.json cannot be read: {exc}.") from exc
    base = base_url.rstrip("/")
    data["version"] = version()
    data["manifest"] = base + MANIFEST_PATH
    data["download"] = base + ZIP_PATH
    data.setdefault("url", base + "/")
    return data


def _files(folder: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.is_dir():
            yield from _files(entry, f"{prefix}{entry.name}/")
        elif entry.is_file():
            yield f"{prefix}{entry.name}", entry


def _client_entries(client: list[tuple[str, Traversable]]) -> dict[str, bytes]:
    """The JS client's files as the zip holds them, under lib/, each bare import made a relative path."""
    entries: dict[str, bytes] = {}
    rewritten: set[str] = set()
    for relative, file in client:
        text = file.read_bytes().decode()
        up = "../" * relative.count("/") or "./"
        for bare, target in CLIENT_IMPORTS.items():
            if bare in text:
                rewritten.add(bare)
                text = text.replace(bare, target.format(up=up))
        entries["lib/tablerelay.mjs" if relative == CLIENT_ENTRY else f"lib/{relative}"] = text.encode()
    if "lib/tablerelay.mjs" not in entries:
        raise FoundryPackageError(f"The JS client's {CLIENT_ENTRY} is missing: the Foundry zip needs it.")
    for bare in CLIENT_IMPORTS:
        if bare not in rewritten:
            raise FoundryPackageError(f"The JS client no longer has {bare} as the Foundry zip expects.")
    return entries


def package(sources: Sources, base_url: str) -> bytes:
    """The module's zip, as Foundry installs it (module.json at its root)."""
    if not sources.msgpack.is_dir():
        raise FoundryPackageError(
            "The MessagePack module for the Foundry zip is missing; install the JS client's packages "
            "(npm ci in clients/js) or install tablerelay from its wheel."
        )
    entries: dict[str, bytes] = {
        "module.json": json.dumps(manifest(sources, base_url), indent=2).encode() + b"\n",
        **_client_entries(sources.client),
    }
    module = dict(sources.module)
    if "scripts/client.mjs" not in module:
        raise FoundryPackageError("The Foundry module has no scripts/client.mjs to point at the JS client.")
    shim = module["scripts/client.mjs"].read_bytes().decode()
    if REPOSITORY_CLIENT not in shim:
        raise FoundryPackageError(
            f"scripts/client.mjs no longer imports {REPOSITORY_CLIENT} as the zip expects."
        )
    entries["scripts/client.mjs"] = shim.replace(REPOSITORY_CLIENT, '"../lib/tablerelay.mjs"').encode()
    for name, entry in sources.module:
        if name in entries or not name.startswith(SHIPPED):
            continue
        entries[name] = entry.read_bytes()
    for name, entry in _files(sources.msgpack):
        # Source maps point at sources the zip does not hold: only the modules themselves go in.
        if name.endswith(".mjs"):
            entries["lib/msgpack/" + name] = entry.read_bytes()
    if sources.noble.is_dir():
        entries["lib/noble-ed25519/index.js"] = sources.noble.joinpath("index.js").read_bytes()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, entries[name])
    return buffer.getvalue()
