"""The address people reach the relay at: the base of every link the relay prints or serves.

One decision, in ``public_base``: the ``public_url`` setting when it is given (``--public-url``,
``TABLERELAY_PUBLIC_URL`` or the config file; what a reverse proxy publishes, path prefix included); else,
for the commands run beside a server, the address that server recorded in the data folder when it started
listening; else ``http://HOST:PORT`` from the settings. A wildcard host (``0.0.0.0``, ``::``) is shown as
the loopback address, the one address it is sure to answer on.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

from relay.settings.config import Config, ConfigError

#: The running server's address, in its data folder, while it serves.
SERVING_FILE = "serving.json"
_WILDCARDS = ("0.0.0.0", "::", "")  # noqa: S104 (naming the wildcard addresses, not binding them)


def check_public_url(value: str) -> str:
    """``value`` without a trailing slash, or a ConfigError saying what a public URL must look like."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"public_url must be an http:// or https:// address such as https://dice.example.org; "
            f"got {value!r}."
        )
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError(f"public_url may hold a path but no query, fragment or user; got {value!r}.")
    try:
        parts.port  # noqa: B018 (parsing it is the check)
    except ValueError as exc:
        raise ConfigError(f"public_url has a port that is not a number from 0 to 65535: {value!r}.") from exc
    return value.strip().rstrip("/")


def listening_base(host: str, port: int) -> str:
    """The http address of a listening socket, as a browser on this machine would write it."""
    shown = "127.0.0.1" if host in _WILDCARDS else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def public_base(config: Config, listening: tuple[str, int] | None = None) -> str:
    """The base URL of every printed or served link (no trailing slash).

    ``listening`` is the address the calling process itself listens on (``serve`` passes its bound host
    and port, which with ``--port 0`` only the socket knows). Other commands leave it out and get the
    address of the server running on the same data folder, when one is.
    """
    if config.public_url:
        return check_public_url(config.public_url)
    if listening is not None:
        return listening_base(*listening)
    running = running_base(config.data)
    if running is not None:
        return running
    return listening_base(config.host, config.port)


def link(base: str, page: str, token: str) -> str:
    """A page's address with its token after ``#`` (so it never reaches a request line or a proxy log)."""
    return f"{base}/{page.lstrip('/')}#{token}"


def record_serving(data: Path, base: str) -> None:
    """Tell later commands on this data folder where the running server is (replaced atomically)."""
    data.mkdir(parents=True, exist_ok=True)
    tmp = data / f".{SERVING_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps({"url": base, "pid": os.getpid()}) + "\n", encoding="utf-8")
    tmp.replace(data / SERVING_FILE)


def forget_serving(data: Path) -> None:
    """Remove the record, if it is still this process's own."""
    path = data / SERVING_FILE
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()


def running_base(data: Path) -> str | None:
    """The address the server serving ``data`` recorded, if that process is still alive."""
    try:
        record = json.loads((data / SERVING_FILE).read_text(encoding="utf-8"))
        url, pid = record["url"], record["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(url, str) or not isinstance(pid, int) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return None  # a server that was killed left its record behind
    except PermissionError:
        pass  # alive, under another user (a service account)
    return url
