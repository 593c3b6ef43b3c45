"""The public way to check tablerelay's signed events from Python (spec/signing.md, docs/verification.md).

A stable name for library users: ``from relay.signing import verify``. The implementation lives in the trust
layer (``relay.trust.signing``); the server itself imports it from there.
"""

from relay.core.canonical import CanonicalError, canonical
from relay.trust.signing import (
    check,
    public_keys,
    read_key_set,
    signed_bytes,
    signed_part,
    verify,
)

__all__ = [
    "CanonicalError",
    "canonical",
    "check",
    "public_keys",
    "read_key_set",
    "signed_bytes",
    "signed_part",
    "verify",
]
