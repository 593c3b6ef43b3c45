"""The signing process (relay.signer) for real: it signs what Forms.prepare hands it; a stalled or dead one
delays a broadcast by the bounded wait at most, and the loop signs instead."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from relay import protocol, signing
from relay.fanout import Forms
from relay.signer import SignerProcess
from relay.signing import signer_of
from relay.state import fold
from relay.visibility import FULL, SEALED, body_of, seal
from tests.relay.helpers import KEYRING


def records() -> list[dict[str, object]]:
    actor = {"id": "p1", "name": "Ana", "role": "player"}
    join = {"seq": 1, "epoch": "e", "ts": 1, "kind": "join", "actor": actor, "visibility": "public"}
    join["member"] = actor
    roll = {"seq": 2, "epoch": "e", "ts": 2, "kind": "roll", "actor": actor, "visibility": "gm"}
    roll.update(label="Hidden", intent={"system": "x"}, result={"total": 7})
    roll["sealed"] = seal(body_of(roll))
    return [join, roll]


async def test_the_process_signs_every_form_ahead_of_the_broadcast() -> None:
    signer = await SignerProcess.start(KEYRING.private)
    try:
        stored = records()
        state = fold(stored)
        forms = Forms("room", KEYRING, capacity=100)
        done = forms.prepare(stored, state, signer, wait=5.0)
        assert done is not None
        await asyncio.wait_for(done, 5)
        assert len(forms._signed) == 3, "the join, and the hidden roll in both forms"
        for record, form in ((stored[0], FULL), (stored[1], FULL), (stored[1], SEALED)):
            frame = forms.frame(record, form, state)
            assert signing.verify(frame, "room", KEYRING.jwks())
    finally:
        await signer.close()


async def test_a_stalled_process_delays_a_broadcast_by_the_wait_at_most() -> None:
    signer = await SignerProcess.start(KEYRING.private)
    os.kill(signer.process.pid, signal.SIGSTOP)
    try:
        stored = records()
        state = fold(stored)
        forms = Forms("room", KEYRING, capacity=100)
        started = time.monotonic()
        done = forms.prepare(stored, state, signer, wait=0.05)
        assert done is not None
        await asyncio.wait_for(done, 2)
        assert time.monotonic() - started < 1.0
        assert not forms._signed, "nothing came back from the stalled process"
        frame = forms.frame(stored[1], SEALED, state)  # signed here instead
        assert signing.verify(frame, "room", KEYRING.jwks())
    finally:
        os.kill(signer.process.pid, signal.SIGCONT)
        await signer.close()


async def test_a_dead_process_is_noticed_and_nothing_waits_for_it() -> None:
    signer = await SignerProcess.start(KEYRING.private)
    signer.process.kill()
    await signer.process.wait()
    for _ in range(100):
        if not signer.alive:
            break
        await asyncio.sleep(0.01)
    assert not signer.alive
    stored = records()
    assert Forms("room", KEYRING, capacity=100).prepare(stored, fold(stored), signer) is None
    await signer.close()


async def test_forms_signed_ahead_at_the_append_are_not_signed_again_at_the_broadcast() -> None:
    signer = await SignerProcess.start(KEYRING.private)
    try:
        stored = records()
        pending = fold(stored)  # the state the records were appended in
        forms = Forms("room", KEYRING, capacity=100)
        asked = forms.sign_ahead(stored, pending, signer)
        assert asked is not None
        await asyncio.wait_for(asked, 5)
        committed = fold(stored)
        assert forms.prepare(stored, committed, signer) is None, "nothing left to sign or wait for"
        frames = [forms.frame(stored[0], FULL, committed), forms.frame(stored[1], SEALED, committed)]
        assert all(signing.verify(frame, "room", KEYRING.jwks()) for frame in frames)
    finally:
        await signer.close()


async def test_a_broadcast_waits_for_the_signatures_asked_for_ahead() -> None:
    signer = await SignerProcess.start(KEYRING.private)
    try:
        stored = records()
        state = fold(stored)
        forms = Forms("room", KEYRING, capacity=100)
        asked = forms.sign_ahead(stored, state, signer)
        done = forms.prepare(stored, state, signer, wait=5.0)
        assert asked is not None
        assert done is not None
        assert not asked.done()
        await asyncio.wait_for(done, 5)
        assert asked.done()
        assert len(forms._signed) == 3, "one request, answered before the broadcast"
    finally:
        await signer.close()


async def test_a_signature_made_ahead_for_an_append_that_failed_is_never_used_for_another_event() -> None:
    signer = await SignerProcess.start(KEYRING.private)
    try:
        stored = records()
        forms = Forms("room", KEYRING, capacity=100)
        asked = forms.sign_ahead(stored[:1], fold(stored[:1]), signer)
        assert asked is not None
        await asyncio.wait_for(asked, 5)
        # The append failed; another participant's join took seq 1.
        other = {**stored[0], "actor": {"id": "p2", "name": "Bo", "role": "player"}, "ts": 9}
        other["member"] = other["actor"]
        state = fold([other])
        done = forms.prepare([other], state, signer, wait=5.0)
        assert done is not None, "the kept signature is for another record: sign again"
        await asyncio.wait_for(done, 5)
        frame = forms.frame(other, FULL, state)
        assert frame["actor"]["id"] == "p2"
        assert signing.verify(frame, "room", KEYRING.jwks())
    finally:
        await signer.close()


async def test_the_bytes_sent_are_the_signed_frame_from_the_one_encoding_that_was_signed() -> None:
    # Each form is encoded once, canonically; the process signs those bytes and the sockets get them with
    # t, kid and sig appended: the signed frame itself, whoever signed it.
    signer = await SignerProcess.start(KEYRING.private)
    try:
        stored = records()
        state = fold(stored)
        ahead = Forms("room", KEYRING, capacity=100)
        asked = ahead.sign_ahead(stored, state, signer)
        assert asked is not None
        await asyncio.wait_for(asked, 5)
        here = Forms("room", KEYRING, capacity=100)  # signed on the loop instead
        for record, form in ((stored[0], FULL), (stored[1], FULL), (stored[1], SEALED)):
            for forms in (ahead, here):
                frame = forms.frame(record, form, state)
                assert signing.verify(frame, "room", KEYRING.jwks())
                wire = forms.wire(record, form, state)
                payload = protocol.decode(wire[2:] if wire[1] < 126 else wire[4:])
                assert payload == frame
                assert list(payload)[-2:] == ["kid", "sig"]
                body = signing.canonical(signing.signed_part(frame))
                assert body[1:] in wire, "the signed bytes (after their one-byte map header), as sent"
            assert ahead.frame(record, form, state) == here.frame(record, form, state)
    finally:
        await signer.close()


async def test_a_form_without_a_canonical_encoding_is_refused_where_it_is_sent() -> None:
    signer = await SignerProcess.start(KEYRING.private)
    try:
        stored = records()[:1]
        bad = {**stored[0], "seq": 2, "kind": "join", "ts": 0.5}  # a float: no canonical encoding
        state = fold(stored)
        forms = Forms("room", KEYRING, capacity=100)
        assert forms.sign_ahead([bad], state, signer) is None, "nothing the process could sign"
        assert forms.prepare([bad], state, signer) is None
        with pytest.raises(signing.CanonicalError):
            forms.frame(bad, FULL, state)
        assert signer.alive, "the process goes on signing"
        good = forms.sign_ahead(stored, state, signer)
        assert good is not None
        await asyncio.wait_for(good, 5)
    finally:
        await signer.close()


def test_libsodium_in_the_process_signs_exactly_as_cryptography_does() -> None:
    # Ed25519 is deterministic: the signing process's libsodium and the loop's fallback (OpenSSL, through
    # ``cryptography``) must give the same 64 bytes, or an event's signature would depend on who made it.
    seed = KEYRING.private.private_bytes_raw()
    sign = signer_of(seed)
    for size in (0, 1, 63, 64, 600, 70_000):
        data = os.urandom(size)
        assert sign(data) == KEYRING.private.sign(data)
        assert KEYRING.sign_bytes(data) == KEYRING.private.sign(data), "the loop's own signing, too"
