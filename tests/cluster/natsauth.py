"""What a secured NATS server needs, made in the test: a CA and a server certificate for ``tls://``, and an
operator, account and user (NATS's decentralised JWT auth) for a ``.creds`` file.

The JWTs are built here from NATS's documented format (a JWT whose header says ``ed25519-nkey``, signed by
the issuer's nkey: the operator signs itself and the account, the account signs the user), so no ``nsc`` is
needed; the nkeys come from the ``nkeys`` package that nats-py uses to read a creds file.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nkeys  # type: ignore[import-untyped]  # ships no types and has no stubs package
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# -- TLS -------------------------------------------------------------------------------------------------


@dataclass
class Tls:
    ca: Path  # the CA certificate a client checks the server with
    cert: Path
    key: Path

    def server_config(self) -> str:
        return f'tls {{ cert_file: "{self.cert}", key_file: "{self.key}" }}\n'


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_tls(folder: Path) -> Tls:
    """A CA and a certificate it signed for 127.0.0.1 and localhost, as PEM files in ``folder``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("tablerelay test CA"))
        .issuer_name(_name("tablerelay test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    tls = Tls(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    tls.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    tls.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    tls.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return tls


# -- decentralised auth: operator, account, user ---------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _keypair(prefix: int) -> tuple[nkeys.KeyPair, bytes]:
    seed = nkeys.encode_seed(secrets.token_bytes(32), prefix)
    return nkeys.from_seed(bytearray(seed)), seed


def _jwt(issuer: nkeys.KeyPair, subject: str, name: str, nats: dict[str, Any]) -> str:
    claims: dict[str, Any] = {
        "iat": int(time.time()),
        "iss": issuer.public_key.decode(),
        "name": name,
        "sub": subject,
        "nats": {**nats, "version": 2},
    }
    claims["jti"] = (
        base64.b32encode(hashlib.sha256(json.dumps(claims).encode()).digest()).decode().rstrip("=")
    )
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    payload = _b64(json.dumps(claims).encode())
    signature = issuer.sign(f"{header}.{payload}".encode())
    return f"{header}.{payload}.{_b64(signature)}"


UNLIMITED = {
    "subs": -1,
    "data": -1,
    "payload": -1,
    "imports": -1,
    "exports": -1,
    "wildcards": True,
    "conn": -1,
    "leaf": -1,
    # JetStream for the account: unlimited storage and streams.
    "mem_storage": -1,
    "disk_storage": -1,
    "streams": -1,
    "consumer": -1,
}


JETSTREAM = ("mem_storage", "disk_storage", "streams", "consumer")


@dataclass
class Operator:
    server_config: str  # what the nats-server configuration needs to trust the operator's accounts
    creds: Path  # a user's credentials file
    other_creds: Path  # a user signed by an account the server does not know


def make_operator(folder: Path) -> Operator:
    operator, _ = _keypair(nkeys.PREFIX_BYTE_OPERATOR)
    op_pub = operator.public_key.decode()
    op_jwt = _jwt(operator, op_pub, "tablerelay-test", {"type": "operator"})
    (folder / "operator.jwt").write_text(op_jwt)

    def account(name: str, *, jetstream: bool = True) -> tuple[nkeys.KeyPair, str, str]:
        kp, _ = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)
        pub = kp.public_key.decode()
        limits = UNLIMITED if jetstream else {k: v for k, v in UNLIMITED.items() if k not in JETSTREAM}
        return kp, pub, _jwt(operator, pub, name, {"type": "account", "limits": limits})

    def user(signer: nkeys.KeyPair, path: Path) -> Path:
        kp, seed = _keypair(nkeys.PREFIX_BYTE_USER)
        token = _jwt(
            signer, kp.public_key.decode(), "relay", {"type": "user", "subs": -1, "data": -1, "payload": -1}
        )
        path.write_text(
            "-----BEGIN NATS USER JWT-----\n"
            f"{token}\n"
            "------END NATS USER JWT------\n\n"
            "-----BEGIN USER NKEY SEED-----\n"
            f"{seed.decode()}\n"
            "------END USER NKEY SEED------\n"
        )
        return path

    relay_kp, relay_pub, relay_jwt = account("relay")
    _, system_pub, system_jwt = account("SYS", jetstream=False)  # the server's own; no JetStream there
    stranger_kp, _, _ = account("stranger")  # never given to the server
    config = (
        f'operator: "{folder / "operator.jwt"}"\n'
        f'system_account: "{system_pub}"\n'
        "resolver: MEMORY\n"
        f'resolver_preload: {{ {relay_pub}: "{relay_jwt}", {system_pub}: "{system_jwt}" }}\n'
    )
    return Operator(
        config, user(relay_kp, folder / "relay.creds"), user(stranger_kp, folder / "stranger.creds")
    )
