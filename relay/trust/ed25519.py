"""Ed25519 signatures in two steps: the nonce point made ahead of time, the signature once the message exists.

An Ed25519 signature of a message M is (R, S) with R = r·B and S = r + H(R ‖ A ‖ M)·a mod L, where a is the
secret scalar, A = a·B the public key and r the nonce. RFC 8032 derives r from the key and the message, so
the fixed-base multiplication r·B, about 18 of the 20 µs libsodium takes per signature here, can only start
once the event exists: it sat on the path of every roll. A verifier checks S·B = R + H(R ‖ A ‖ M)·A and
cannot tell how r was chosen, so any r that is secret, uniform and never used twice gives a signature every
Ed25519 verifier accepts. ``nonces`` draws r from the operating system's CSPRNG and multiplies it out ahead
of time (the server does it in a child process, relay.trust.nonces); ``Key.sign`` with such a pair is one
SHA-512 and two scalar operations, about 3 µs, on libsodium's constant-time scalar arithmetic.

What this costs in safety: a nonce used for two different messages gives the private key away. Each pair is
therefore handed out once and dropped (relay.trust.nonces: only in the server's memory, never written
anywhere, dropped in a forked child). What a program cannot see is its whole memory being replayed: a virtual
machine restored from one memory snapshot more than once would hand out the pairs it held again. Where that
can happen, ``signing_nonces = "deterministic"`` signs as RFC 8032 does (docs/verification.md).

Without a pair, ``Key.sign`` is RFC 8032's deterministic signature (libsodium's ``crypto_sign``), the same
bytes ``cryptography`` gives.
"""

from __future__ import annotations

import hashlib
import os

# PyNaCl's libsodium binding (cffi), called directly: its Python wrappers cost about 1 µs a call.
from nacl._sodium import ffi, lib  # type: ignore[import-not-found]
from nacl.bindings import crypto_sign

#: A nonce pair: r (32 bytes, a scalar mod L) then R = r·B (32 bytes, an encoded point).
PAIR = 64
SIGNATURE = 64
_ZERO = bytes(32)
_sha512 = hashlib.sha512
# Looked up once: an attribute of cffi's ``lib`` costs a dictionary walk on every call.
_new = ffi.new
_buffer = ffi.buffer
_reduce = lib.crypto_core_ed25519_scalar_reduce
_mul = lib.crypto_core_ed25519_scalar_mul
_add = lib.crypto_core_ed25519_scalar_add


class Key:
    """An Ed25519 private key (its 32-byte seed) that signs with a nonce pair or, without one, as RFC 8032."""

    __slots__ = ("_scalar", "_secret", "public")

    def __init__(self, seed: bytes) -> None:
        if len(seed) != 32:
            raise ValueError("an Ed25519 private key is 32 bytes")
        public = ffi.new("unsigned char[32]")
        secret = ffi.new("unsigned char[64]")
        if lib.crypto_sign_seed_keypair(public, secret, seed) != 0:
            raise ValueError("libsodium refused the key")
        self.public = bytes(ffi.buffer(public))
        self._secret = bytes(ffi.buffer(secret))  # libsodium's form: seed then public key
        # a: the clamped first half of SHA-512(seed) (RFC 8032, 5.1.5), reduced mod L once, here.
        digest = bytearray(_sha512(seed).digest()[:32])
        digest[0] &= 248
        digest[31] &= 127
        digest[31] |= 64
        scalar = ffi.new("unsigned char[32]")
        lib.crypto_core_ed25519_scalar_reduce(scalar, bytes(digest) + _ZERO)
        self._scalar = bytes(ffi.buffer(scalar))

    def sign(self, message: bytes, pair: bytes | None = None) -> bytes:
        """The signature of ``message``: with ``pair`` (r ‖ R from ``nonces``, used here for the only time)
        or, without one, RFC 8032's deterministic signature."""
        if pair is None:
            signed: bytes = crypto_sign(message, self._secret)  # the signature, then the message
            return signed[:SIGNATURE]
        point = pair[32:]
        work = _new("unsigned char[96]")  # k, k·a, S: per call, so a key can sign from any thread
        _reduce(work, _sha512(point + self.public + message).digest())
        ka = work + 32
        _mul(ka, work, self._scalar)
        s = work + 64
        _add(s, pair, ka)  # reads r, the pair's first 32 bytes
        scalar: bytes = _buffer(s, 32)[:]
        return point + scalar


def nonces(count: int) -> bytes:
    """``count`` fresh nonce pairs (r ‖ R, ``PAIR`` bytes each), r uniform mod L from the OS's CSPRNG."""
    out = bytearray()
    r = ffi.new("unsigned char[32]")
    point = ffi.new("unsigned char[32]")
    while len(out) < count * PAIR:
        # 64 random bytes reduced mod L: a bias below 2^-250 (RFC 8032 reduces a 64-byte hash the same way).
        lib.crypto_core_ed25519_scalar_reduce(r, os.urandom(64))
        if lib.crypto_scalarmult_ed25519_base_noclamp(point, r) != 0:
            continue  # r was 0 (a chance of 2^-252): draw again
        out += ffi.buffer(r)
        out += ffi.buffer(point)
    return bytes(out)
