"""Signed events (spec/signing.md): the server's Ed25519 keys, the canonical encoding, signing and checking.

Every event a client receives carries ``kid`` and ``sig``: an Ed25519 signature over
``DOMAIN + room_id + b"\\x00" + canonical(event)``, where ``event`` is the map as that client got it without
``UNSIGNED`` keys. ``canonical`` is MessagePack with map keys in ascending order of their UTF-8 bytes, the
shortest integer encodings, and no floats. The room id inside the signed bytes is what stops an event
from being replayed into another room; the domain string keeps these signatures from meaning anything in
another protocol.

Keys live in the data folder: ``signing.key`` (the current private key, PEM PKCS#8, mode 0600, made on
first use) and ``signing-keys.json`` (the published JWK Set: the current key and every key rotated out,
with ``retired``). ``TABLERELAY_SIGNING_KEY`` (PEM) replaces the file's private key; a key that was
current once stays in the published set, so events it signed can be checked for good.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from relay.core.canonical import CanonicalError, canonical
from relay.trust import ed25519

DOMAIN = b"tablerelay-event-v1\x00"
#: Keys an event carries that its signature does not cover: the frame type, the signature itself, and
#: renderings (derived data a client checks against the signed ``result``).
UNSIGNED = frozenset({"t", "sig", "kid", "foundry", "roll20"})
KEY_FILE = "signing.key"
KEYS_FILE = "signing-keys.json"
KEY_ENV = "TABLERELAY_SIGNING_KEY"
SIGNATURE_BYTES = 64


class SigningKeyError(Exception):
    """A key file, key variable or key set that cannot be used; the message is a sentence for a person."""


def signed_part(event: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of ``event`` its signature covers."""
    return {key: value for key, value in event.items() if key not in UNSIGNED}


def signed_bytes(event: Mapping[str, Any], room_id: str) -> bytes:
    """What the signature of ``event`` (as a client received it, in room ``room_id``) is made over."""
    return message(canonical(signed_part(event)), room_id)


def message(body: bytes, room_id: str) -> bytes:
    """What a signature is made over, given the canonical encoding of the event's signed part."""
    return DOMAIN + room_id.encode() + b"\x00" + body


# -- keys ----------------------------------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public: bytes) -> str:
    """The spec's ``kid``: the first 16 hex digits of SHA-256 over the raw 32-byte public key."""
    return hashlib.sha256(public).hexdigest()[:16]


def jwk(public: bytes, retired: int | None = None) -> dict[str, Any]:
    """The public key as a JWK (RFC 8037), with ``retired`` (unix ms) once it is no longer current."""
    entry: dict[str, Any] = {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": _b64url(public),
        "kid": key_id(public),
        "use": "sig",
        "alg": "EdDSA",
    }
    if retired is not None:
        entry["retired"] = retired
    return entry


def public_keys(keys: Any) -> dict[str, Ed25519PublicKey]:
    """Public keys by ``kid`` from a JWK Set (``{"keys": [...]}``), a list of JWKs, or such a mapping.

    A JWK whose ``kid`` does not match its key is refused: a ``kid`` is a promise about the key.
    """
    if isinstance(keys, Mapping) and "keys" in keys:
        keys = keys["keys"]
    if isinstance(keys, Mapping):
        if all(isinstance(v, Ed25519PublicKey) for v in keys.values()):
            return dict(keys)
        raise SigningKeyError("A key set must be a JWK Set, a list of JWKs, or public keys by kid.")
    if not isinstance(keys, list):
        raise SigningKeyError("A key set must be a JWK Set: a map whose 'keys' is a list of JWKs.")
    out: dict[str, Ed25519PublicKey] = {}
    for entry in keys:
        if not isinstance(entry, Mapping) or entry.get("kty") != "OKP" or entry.get("crv") != "Ed25519":
            continue  # another kind of key: not one that signs events
        x = entry.get("x")
        try:
            public = _unb64url(x) if isinstance(x, str) else b""
        except ValueError:
            public = b""
        if len(public) != 32 or entry.get("kid") != key_id(public):
            raise SigningKeyError(f"The key {entry.get('kid')!r} in the key set is not a valid Ed25519 JWK.")
        out[key_id(public)] = Ed25519PublicKey.from_public_bytes(public)
    return out


@dataclass(frozen=True)
class Keyring:
    """The key that signs (``kid``) and the JWK Set that is published (``keys``: current and retired).

    ``nonces`` hands out nonce pairs made ahead of time (``relay.trust.nonces.NoncePool.take``), each once,
    for signatures of about 3 µs instead of 20 (``relay.trust.ed25519``); without it, or when it has none,
    events are signed as RFC 8032 does, deterministically.
    """

    private: Ed25519PrivateKey
    kid: str
    keys: tuple[dict[str, Any], ...]
    nonces: Callable[[], bytes | None] | None = field(default=None, compare=False, repr=False)

    def sign(self, event: Mapping[str, Any], room_id: str) -> bytes:
        return self.sign_bytes(signed_bytes(event, room_id))

    @functools.cached_property
    def sign_bytes(self) -> Callable[[bytes], bytes]:
        """Sign bytes with the current key."""
        sign = ed25519.Key(self.private.private_bytes_raw()).sign
        take = self.nonces
        if take is None:
            return sign

        def signed(data: bytes) -> bytes:
            return sign(data, take())

        return signed

    def with_nonces(self, take: Callable[[], bytes | None]) -> Keyring:
        """The same keys, signing with the nonce pairs ``take`` hands out."""
        return dataclasses.replace(self, nonces=take)

    def jwks(self) -> dict[str, Any]:
        return {"keys": [dict(entry) for entry in self.keys]}

    @classmethod
    def of(cls, private: Ed25519PrivateKey) -> Keyring:
        """A keyring of one key held in memory (tests, tools): it signs and is the only key published."""
        public = raw_public(private.public_key())
        return cls(private, key_id(public), (jwk(public),))


def _load_pem(data: bytes, where: str) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SigningKeyError(
            f"{where} is not an unencrypted PEM (PKCS#8) private key: {str(exc).rstrip('.')}."
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"{where} holds a {type(key).__name__}, not an Ed25519 private key.")
    return key


def _pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write_private(path: Path, data: bytes, *, exclusive: bool) -> bool:
    """Write a private key with mode 0600 from the start; False when ``exclusive`` and it already exists."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return True


def _read_published(data: Path) -> list[dict[str, Any]]:
    path = data / KEYS_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    try:
        parsed = json.loads(text)
        entries = parsed["keys"]
        public_keys(entries)  # every entry must be a valid key
    except (ValueError, KeyError, TypeError, SigningKeyError) as exc:
        raise SigningKeyError(
            f"{path} is not a JWK Set of Ed25519 keys ({exc}); restore it from a backup."
        ) from exc
    return [dict(entry) for entry in entries]


def _write_published(data: Path, entries: list[dict[str, Any]]) -> None:
    # Replaced whole (write, then rename) so a reader never sees half a key set.
    path = data / KEYS_FILE
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps({"keys": entries}, indent=2) + "\n")
    temporary.replace(path)


def _publish(data: Path, current: bytes, now: int) -> tuple[dict[str, Any], ...]:
    """The published set with ``current`` as its current key; any other key not yet retired is, now."""
    entries = _read_published(data)
    kid = key_id(current)
    changed = False
    for entry in entries:
        if entry["kid"] != kid and "retired" not in entry:
            entry["retired"] = now
            changed = True
    if not any(entry["kid"] == kid for entry in entries):
        entries.append(jwk(current))
        changed = True
    for entry in entries:
        if entry["kid"] == kid and "retired" in entry:  # a key brought back is current again
            del entry["retired"]
            changed = True
    if changed:
        _write_published(data, entries)
    # The current key first: a client that looks at one key looks at the one in use.
    ordered = sorted(entries, key=lambda entry: entry["kid"] != kid)
    return tuple(ordered)


def load_keyring(data: Path, pem: str | None = None, *, now: int | None = None) -> Keyring:
    """The signing keys for the data folder ``data``: ``pem`` (``TABLERELAY_SIGNING_KEY``) if given, else
    ``signing.key``, created on first use."""
    data.mkdir(parents=True, exist_ok=True)
    if pem:
        private = _load_pem(pem.encode(), KEY_ENV)
    else:
        path = data / KEY_FILE
        if not path.exists():
            # O_EXCL: two commands racing to create it agree on the winner's key.
            _write_private(path, _pem(Ed25519PrivateKey.generate()), exclusive=True)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise SigningKeyError(f"Cannot read the signing key {path}: {exc.strerror}.") from exc
        private = _load_pem(raw, str(path))
    public = raw_public(private.public_key())
    keys = _publish(data, public, now if now is not None else time.time_ns() // 1_000_000)
    return Keyring(private, key_id(public), keys)


def rotate(data: Path, *, now: int | None = None) -> tuple[str | None, str]:
    """Make a new ``signing.key`` current and retire the old one (still published): (old kid, new kid)."""
    data.mkdir(parents=True, exist_ok=True)
    path = data / KEY_FILE
    old: str | None = None
    if path.exists():
        old = load_keyring(data, now=now).kid  # publishes the old key first, should it not be yet
    fresh = Ed25519PrivateKey.generate()
    temporary = path.with_suffix(".key.tmp")
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    _write_private(temporary, _pem(fresh), exclusive=True)
    temporary.replace(path)
    return old, load_keyring(data, now=now).kid


# -- checking ------------------------------------------------------------------------------------------


def read_key_set(path: str | Path) -> dict[str, Ed25519PublicKey]:
    """The public keys of a key set file (a server's ``/.well-known/tablerelay-keys.json`` as saved), for
    ``tablerelay verify --keys`` and ``room import --keys``; ``SigningKeyError`` with a sentence naming the
    file when it cannot be used."""
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise SigningKeyError(f"cannot read the key set {path}: {exc.strerror or exc}.") from exc
    try:
        value = json.loads(text)
    except RecursionError as exc:
        raise SigningKeyError(f"the key set {path} nests deeper than any key set.") from exc
    except ValueError as exc:  # not JSON, or not UTF-8 text
        raise SigningKeyError(f"the key set {path} is not JSON: {exc}.") from exc
    try:
        return public_keys(value)
    except SigningKeyError as exc:
        raise SigningKeyError(f"the key set {path} cannot be used: {exc}") from exc


def check(event: Mapping[str, Any], room_id: str, keys: Any) -> str | None:
    """Why ``event`` does not verify, as a sentence; None when its signature is good.

    ``keys`` is anything ``public_keys`` takes (the server's JWK Set, typically).
    """
    kid, sig = event.get("kid"), event.get("sig")
    if not isinstance(kid, str) or not isinstance(sig, bytes):
        return "it is not signed (no 'kid' string and 'sig' bytes)"
    if len(sig) != SIGNATURE_BYTES:
        return f"its signature is {len(sig)} bytes long, not {SIGNATURE_BYTES}"
    found = public_keys(keys).get(kid)
    if found is None:
        return f"its key {kid!r} is not in the key set"
    try:
        message = signed_bytes(event, room_id)
    except CanonicalError as exc:
        return f"it cannot be encoded canonically: {exc}"
    try:
        found.verify(sig, message)
    except InvalidSignature:
        return "the signature does not match the event (changed, or signed for another room)"
    return None


def verify(event: Mapping[str, Any], room_id: str, keys: Any) -> bool:
    """True when ``event`` carries a good signature, for room ``room_id``, by a key in ``keys``."""
    return check(event, room_id, keys) is None
