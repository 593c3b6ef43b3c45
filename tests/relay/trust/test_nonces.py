"""Signatures with nonces made ahead of time (relay.trust.ed25519, relay.trust.nonces), for real: the child
process, the pool, and what the signatures are worth to verifiers that know nothing of how they were made."""

from __future__ import annotations

import asyncio
import os

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nacl.bindings import crypto_scalarmult_ed25519_base_noclamp
from nacl.signing import VerifyKey

from relay.core import canonical, protocol
from relay.core.state import fold
from relay.core.visibility import FULL, SEALED, body_of, seal
from relay.trust import ed25519, nonces, signing
from relay.trust.forms import Forms
from relay.trust.nonces import NoncePool
from tests import spec_signing
from tests.relay.helpers import KEYRING

#: The order of Ed25519's base point (RFC 8032): every r must be below it and not 0.
L = 2**252 + 27742317777372353535851937790883648493


def records() -> list[dict[str, object]]:
    actor = {"id": "p1", "name": "Ana", "role": "player"}
    join = {"seq": 1, "epoch": "e", "ts": 1, "kind": "join", "actor": actor, "visibility": "public"}
    join["member"] = actor
    roll = {"seq": 2, "epoch": "e", "ts": 2, "kind": "roll", "actor": actor, "visibility": "gm"}
    roll.update(label="Hidden", intent={"system": "x"}, result={"total": 7})
    roll["sealed"] = seal(body_of(roll))
    return [join, roll]


def test_without_a_nonce_a_key_signs_as_rfc_8032_does() -> None:
    # The deterministic signature (the fallback, and signing_nonces = "deterministic") is the same 64
    # bytes OpenSSL's Ed25519, through ``cryptography``, makes.
    key = ed25519.Key(KEYRING.private.private_bytes_raw())
    assert key.public == KEYRING.private.public_key().public_bytes_raw()
    for size in (0, 1, 63, 64, 600, 70_000):
        data = os.urandom(size)
        assert key.sign(data) == KEYRING.private.sign(data)
        assert KEYRING.sign_bytes(data) == KEYRING.private.sign(data), "a keyring without nonces too"


def test_nonce_pairs_are_fresh_scalars_and_their_points() -> None:
    data = ed25519.nonces(300)
    assert len(data) == 300 * ed25519.PAIR
    pairs = [data[i : i + ed25519.PAIR] for i in range(0, len(data), ed25519.PAIR)]
    assert len({pair[:32] for pair in pairs}) == 300, "no nonce twice"
    for pair in pairs:
        r = int.from_bytes(pair[:32], "little")
        assert 0 < r < L
        assert pair[32:] == crypto_scalarmult_ed25519_base_noclamp(pair[:32]), "R = r·B"
    # Uniform mod L: the top byte of a scalar below L (2^252 + …) is 0-16; over 300 draws every value
    # from 0 to 15 turns up (a fixed or low-entropy r would not).
    assert {pair[31] for pair in pairs} >= set(range(16))


def test_a_signature_with_a_nonce_made_ahead_verifies_everywhere_and_binds_the_message() -> None:
    key = ed25519.Key(KEYRING.private.private_bytes_raw())
    public = KEYRING.private.public_key()
    message = signing.message(b"\x81\xa4kind\xa4roll", "room")
    data = ed25519.nonces(50)
    signatures = [key.sign(message, data[i : i + 64]) for i in range(0, len(data), 64)]
    assert len(set(signatures)) == 50, "a new nonce, a new signature"
    for pair, signature in zip((data[i : i + 64] for i in range(0, len(data), 64)), signatures, strict=True):
        assert signature[:32] == pair[32:], "R is the pair's point"
        public.verify(signature, message)  # OpenSSL
        VerifyKey(KEYRING.private.public_key().public_bytes_raw()).verify(message, signature)  # libsodium
        assert signature != key.sign(message), "not the deterministic signature"
    tampered = bytearray(message)
    tampered[-1] ^= 1
    with pytest.raises(InvalidSignature):
        public.verify(signatures[0], bytes(tampered))
    other = Ed25519PrivateKey.generate()
    with pytest.raises(InvalidSignature):
        other.public_key().verify(signatures[0], message)


async def test_the_pool_hands_each_pair_out_once_and_refills_from_the_child() -> None:
    pool = await NoncePool.start(batch=64)
    try:
        assert len(pool) == 64, "the first batch is in before start returns"
        taken: list[bytes] = []
        for _ in range(10):  # 640 pairs: ten batches, each asked for while the pool still had some
            while len(pool) > 1:
                pair = pool.take()
                assert pair is not None
                taken.append(pair)
            await asyncio.sleep(0.2)
        assert len(taken) > 500
        assert len({pair[:32] for pair in taken}) == len(taken), "no pair handed out twice"
        assert all(pair[32:] == crypto_scalarmult_ed25519_base_noclamp(pair[:32]) for pair in taken)
        assert len(pool) <= 2 * 64 - 1
    finally:
        await pool.close()
    assert pool.take() is None, "a closed pool forgets what it held"


async def test_a_keyring_signs_with_the_pool_and_falls_back_when_it_is_empty() -> None:
    pool = await NoncePool.start(batch=8)
    try:
        keyring = KEYRING.with_nonces(pool.take)
        data = signing.message(b"\x80", "room")
        fast = keyring.sign_bytes(data)
        assert fast != KEYRING.private.sign(data)
        KEYRING.private.public_key().verify(fast, data)
        pool.process.kill()  # no more pairs to come
        await pool.process.wait()
        for _ in range(100):
            if not pool.alive:
                break
            await asyncio.sleep(0.01)
        assert not pool.alive
        pool.forget()
        assert keyring.sign_bytes(data) == KEYRING.private.sign(data), "deterministic once empty"
    finally:
        await pool.close()


def alive(pool: NoncePool) -> bool:
    # Read afresh after an await: mypy keeps a plain attribute test narrowed (as relay.trust.nonces does).
    return pool.alive


async def test_a_child_that_ends_is_started_again_later_and_later(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nonces, "RESTART_DELAYS", (0.2, 0.4))
    pool = await NoncePool.start(batch=8)
    try:
        pids = [pool.process.pid]
        waits = []
        for _ in range(3):
            pool.process.kill()
            await pool.process.wait()
            died = asyncio.get_running_loop().time()
            while alive(pool):
                await asyncio.sleep(0.005)
            pool.forget()
            assert pool.take() is None, "no child, no pairs: signatures are deterministic meanwhile"
            while not alive(pool) or not len(pool):
                await asyncio.sleep(0.005)
                assert asyncio.get_running_loop().time() - died < 10, "no new child"
            waits.append(asyncio.get_running_loop().time() - died)
            assert pool.process.pid not in pids
            pids.append(pool.process.pid)
            pair = pool.take()
            assert pair is not None
            assert crypto_scalarmult_ed25519_base_noclamp(pair[:32]) == pair[32:], "a real pair again"
        assert waits[0] >= 0.2, waits
        assert waits[1] >= 0.4, waits
        assert waits[2] >= 0.4, waits
    finally:
        await pool.close()


# Python 3.12+ warns of any fork in a process with threads (the test worker has some); the child here takes
# no lock, it reads one list and exits.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
async def test_a_forked_child_forgets_every_pair() -> None:
    pool = await NoncePool.start(batch=16)
    try:
        assert len(pool) == 16
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if it holds no pair
            os._exit(0 if len(pool) == 0 and pool.take() is None else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert len(pool) == 16, "the parent keeps its own"
    finally:
        await pool.close()


async def test_forms_sign_with_the_pool_and_send_the_bytes_they_signed() -> None:
    # Each form is encoded once, canonically; the key signs those bytes and the sockets get them with t,
    # kid and sig appended: the signed frame itself.
    pool = await NoncePool.start(batch=16)
    try:
        keyring = KEYRING.with_nonces(pool.take)
        stored = records()
        state = fold(stored)
        forms = Forms("room", keyring, capacity=100)
        points = set()
        for record, form in ((stored[0], FULL), (stored[1], FULL), (stored[1], SEALED)):
            frame = forms.frame(record, form, state)
            assert forms.frame(record, form, state) is frame, "signed once, kept"
            assert signing.verify(frame, "room", KEYRING.jwks())
            assert spec_signing.verify(frame, "room", KEYRING.jwks())
            points.add(frame["sig"][:32])
            wire = forms.wire(record, form, state)
            payload = protocol.decode(wire[2:] if wire[1] < 126 else wire[4:])
            assert payload == frame
            assert list(payload)[-2:] == ["kid", "sig"]
            body = canonical.canonical(signing.signed_part(frame))
            assert body[1:] in wire, "the signed bytes (after their one-byte map header), as sent"
        assert len(points) == 3, "a nonce per signature"
    finally:
        await pool.close()


def test_a_signature_kept_for_an_append_that_failed_is_never_used_for_another_event() -> None:
    stored = records()
    forms = Forms("room", KEYRING, capacity=100)
    first = forms.frame(stored[0], FULL, fold(stored[:1]))
    # The append failed; another participant's join took seq 1.
    other = {**stored[0], "actor": {"id": "p2", "name": "Bo", "role": "player"}, "ts": 9}
    other["member"] = other["actor"]
    frame = forms.frame(other, FULL, fold([other]))
    assert frame["actor"]["id"] == "p2"
    assert frame["sig"] != first["sig"]
    assert signing.verify(frame, "room", KEYRING.jwks())


def test_the_kept_forms_stay_bounded_by_seq() -> None:
    # Forms older than the last ``capacity`` seqs are dropped (in sweeps, a quarter of the capacity apart):
    # the kept ones span at most 1.25 x capacity seqs, and the recent ones are always there. (Sweeps four
    # times the capacity apart held 2.9 times the memory in a 10-minute soak: 243 against 141 MiB.)
    actor = {"id": "p1", "name": "Ana", "role": "player"}
    forms = Forms("room", KEYRING, capacity=40)
    stored = []
    for seq in range(1, 400):
        record = {"seq": seq, "epoch": "e", "ts": seq, "kind": "join", "actor": actor, "visibility": "public"}
        record["member"] = actor
        stored.append(record)
        forms.frame(record, FULL, fold(stored))
        kept = {at for at, _ in forms._signed}
        assert len(kept) <= 40 + 10, (seq, len(kept))
        assert kept >= set(range(max(1, seq - 39), seq + 1))
