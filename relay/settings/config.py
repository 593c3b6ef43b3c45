"""Server settings: defaults, then a TOML file, then ``TABLERELAY_*`` environment variables, then flags.

One dataclass holds every setting so there is exactly one place that names a default.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The values of ``signing_nonces``: nonces made ahead by a child process, or RFC 8032's.
SIGNING_NONCES = ("ahead", "deterministic")


class ConfigError(ValueError):
    """A setting that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Limits:
    max_frame: int = 64 * 1024  # bytes; larger frames close the socket with 1009
    rate: float = 20.0  # frames per second per connection (token bucket refill)
    burst: int = 40  # token bucket size
    max_rooms: int = 10_000
    max_members: int = 10_000  # per room, connected sockets
    max_per_ip: int = 256  # open WebSockets per client address (relay.shell.admission)
    max_label: int = 200
    max_request_id: int = 64
    send_queue: int = 1024  # frames queued per socket before it is closed with 4008
    history: int = 100  # events in a fresh welcome
    resume_max: int = 2000  # longest resume gap delivered in one welcome; beyond it, recovered is false
    hello_timeout: float = 10.0  # seconds a new socket has to send its hello
    drain_timeout: float = 20.0  # seconds SIGTERM may take to drain; past it the server exits 1
    # Seconds a room with no socket stays loaded before it is unloaded (relay.shell.upkeep).
    room_idle: float = 60.0
    # Seconds the members a stopped server's log still lists have to come back after a start before their
    # leaves are stored (relay.shell.upkeep): a deploy's reconnecting tables store no leave and no join.
    rejoin_grace: float = 60.0
    fear_max: int = 12
    hope_max: int = 6
    # Days joins and leaves stay in a fresh welcome's history; 0 keeps them all (relay.core.retention).
    presence_days: float = 0.0
    # A room's open dice seed is revealed after this many rolls, or at the first roll after it is this many
    # hours old (spec/fairness.md; with fair_dice on).
    seed_rolls: int = 250
    seed_hours: float = 12.0
    # How long a witnessed roll waits for its witnesses' values before it is made with those it has.
    witness_wait_ms: int = 250


@dataclass(frozen=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 8765
    data: Path = Path("data")
    secret: str | None = None  # TABLERELAY_SECRET; else a secret file in the data folder
    log_format: str = "auto"  # auto | json | console
    log_level: str = "info"
    # SQLite's synchronous pragma in WAL mode: "normal" survives process crashes (a commit is in the WAL
    # before the ack) but may lose the last commits on power loss; "full" also fsyncs every commit.
    synchronous: str = "normal"
    # Who commits to the SQLite file: "loop" (the event loop, once per iteration, never waiting for a
    # lock; a writer thread takes what it cannot do and runs the checkpoints), "thread" (a writer thread
    # commits everything), "process" (a writer process of its own, relay.storage.sqlite.writer, which never
    # waits for the server's GIL), or "auto": loop with synchronous = normal, else thread (a commit that
    # syncs to disk must not stop the loop). TABLERELAY_SQLITE_WRITER.
    sqlite_writer: str = "auto"
    public_url: str | None = None  # e.g. https://dice.example.org, for printed spectator links
    # TABLERELAY_SIGNING_KEY: the Ed25519 private key (PEM, PKCS#8) that signs events; else signing.key in
    # the data folder (relay.trust.signing).
    signing_key: str | None = None
    # Off only to measure what signing costs (bench/): events then go out without kid and sig, which
    # every verifying client reports as a failure.
    signing: bool = True
    # How signatures get their nonces (relay.trust.ed25519): "ahead", random ones made beforehand by a child
    # process (3 µs a signature on the event loop), or "deterministic", RFC 8032's (20 µs), for machines
    # whose memory may be restored from one snapshot more than once. TABLERELAY_SIGNING_NONCES.
    signing_nonces: str = "ahead"
    # Where events are stored: "sqlite" (the data folder) or nats://HOST:PORT[,nats://...] (a cluster,
    # spec/cluster.md). TABLERELAY_STORE.
    store: str = "sqlite"
    # The cluster store's replicas of its stream and bucket; 0: 3 when the cluster can hold them, else 1.
    replicas: int = 0
    nats_creds: str | None = None  # TABLERELAY_NATS_CREDS: a NATS credentials file
    nats_ca: str | None = None  # TABLERELAY_NATS_CA: the CA file that checks tls:// servers' certificates
    # TABLERELAY_NATS_MAX_BYTES: the events stream's byte limit (JetStream's max_bytes, with discard policy
    # new: a full stream refuses appends with store_full and never drops old events); set on the stream at
    # every start when above 0. 0: the stream has no limit of its own (an existing one keeps its own).
    nats_max_bytes: int = 0
    # TABLERELAY_NODE: this relay node's name in a cluster, unique among running nodes; a node restarted
    # under the same name clears the presence its previous run left (relay.shell.cluster.presence). Unset: a
    # random one.
    node: str | None = None
    # Browser origins allowed to open a WebSocket, a comma list (relay.shell.admission); unset: every origin.
    origins: str | None = None
    # Reverse proxies whose X-Forwarded-For names the client (IPs or networks, a comma list); unset: none.
    trusted_proxies: str | None = None
    # auto | uvloop | asyncio: the event loop ``serve`` runs on (relay.shell.loops); auto takes uvloop if
    # installed.
    event_loop: str = "auto"
    # Dice from committed seeds (spec/fairness.md): every roll's dice follow from the room's open seed, the
    # roller's seed and its witnesses' values, and anyone can recompute them once the seed is revealed.
    # Off gives the plain CSPRNG dice of earlier releases (no seeds, no witnesses, no fair map).
    # TABLERELAY_FAIR_DICE.
    fair_dice: bool = True
    limits: Limits = field(default_factory=Limits)

    @property
    def db_path(self) -> Path:
        return self.data / "tablerelay.sqlite3"


#: How a setting's type is named in an error, by the type of its default (bool before int: a bool is an int).
_KINDS = {bool: "true or false", int: "a whole number", float: "a number", Path: "a path", str: "text"}
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


def _coerce(name: str, current: Any, value: Any) -> Any:
    """Convert ``value`` (a TOML value or an environment string) to the type of ``current``; a value that
    is not of that kind is refused, never bent into it (``5`` is not a bool, ``2.5`` not a port)."""
    converted: Any = None
    if isinstance(current, bool):
        if isinstance(value, bool):
            converted = value
        elif isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            converted = value.strip().lower() in _TRUE
    elif isinstance(current, int):
        if type(value) is int:
            converted = value
        elif isinstance(value, str):
            with contextlib.suppress(ValueError):
                converted = int(value.strip())
    elif isinstance(current, float):
        if type(value) in (int, float):
            converted = float(value)
        elif isinstance(value, str):
            with contextlib.suppress(ValueError):
                converted = float(value.strip())
    elif isinstance(current, Path):
        converted = Path(value) if isinstance(value, str | os.PathLike) else None
    elif isinstance(value, str) or type(value) is int:
        converted = str(value)  # a node name or a secret may be written as a bare number
    if converted is None:
        wanted = next((words for cls, words in _KINDS.items() if isinstance(current, cls)), "text")
        raise ConfigError(f"Setting {name!r} must be {wanted}; got {value!r}.")
    return converted


def _apply(obj: Any, values: Mapping[str, Any], where: str) -> Any:
    changes: dict[str, Any] = {}
    for key, value in values.items():
        fields = {f.name: f for f in dataclasses.fields(obj)}
        if key not in fields:
            raise ConfigError(f"Unknown setting {key!r} in {where}; known: {', '.join(sorted(fields))}.")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, Mapping):
                raise ConfigError(f"Setting {key!r} in {where} must be a table.")
            changes[key] = _apply(current, value, where)
        elif value is None:
            changes[key] = value
        else:
            # Every setting that defaults to None is text when given (a secret, an address, a file).
            changes[key] = _coerce(key, "" if current is None else current, value)
    return dataclasses.replace(obj, **changes)


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f in dataclasses.fields(Config):
        if f.name == "limits":
            continue
        env = environ.get(f"TABLERELAY_{f.name.upper()}")
        if env is not None and env != "":
            values[f.name] = env
    limits: dict[str, Any] = {}
    for f in dataclasses.fields(Limits):
        env = environ.get(f"TABLERELAY_{f.name.upper()}")
        if env is not None and env != "":
            limits[f.name] = env
    if limits:
        values["limits"] = limits
    return values


def load(
    file: Path | str | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Build the settings: defaults < TOML file (``TABLERELAY_CONFIG`` if no file given) < env < overrides.

    ``overrides`` are the command line's flags; ``None`` values mean "not given".
    """
    env = os.environ if environ is None else environ
    config = Config()
    file = file or env.get("TABLERELAY_CONFIG") or None
    if file is not None:
        path = Path(file)
        named = repr(str(path))
        try:
            with path.open("rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError as exc:
            raise ConfigError(f"The config file {named} does not exist.") from exc
        except OSError as exc:  # a folder, a file it may not read
            raise ConfigError(f"The config file {named} cannot be read: {exc.strerror or exc}.") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"The config file {named} is not valid TOML: it is not UTF-8 text.") from exc
        except RecursionError as exc:
            raise ConfigError(f"The config file {named} is not valid TOML: it nests too deep.") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"The config file {named} is not valid TOML: {exc}.") from exc
        config = _apply(config, data.get("tablerelay", data), str(path))
    config = _apply(config, _from_env(env), "the environment")
    if overrides:
        config = _apply(config, {k: v for k, v in overrides.items() if v is not None}, "the command line")
    assert isinstance(config, Config)
    return config
