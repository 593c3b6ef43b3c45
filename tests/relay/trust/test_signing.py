"""relay.trust.signing without sockets: the canonical encoding against the spec-only encoder, keys on disk and
their rotation, and properties over every event the room can produce (no float, stable canonical bytes,
every form verifies with an independent verifier)."""

from __future__ import annotations

import base64
import datetime
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import msgpack
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rules
from relay.core import canonical
from relay.core.formats import renderings, with_numbers
from relay.core.protocol import event_values
from relay.shell.fanout import history
from relay.storage.exports import UNEXPORTED
from relay.trust import signing
from tests import spec_signing
from tests.relay.helpers import KEYRING, Table, fixed, frame

# -- the canonical encoding ----------------------------------------------------------------------------

INTEGERS = [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63, 2**64 - 1]
INTEGERS += [-1, -32, -33, -128, -129, -32768, -32769, -(2**31), -(2**31) - 1, -(2**63)]


@pytest.mark.parametrize("n", INTEGERS)
def test_integers_take_their_shortest_form(n: int) -> None:
    assert canonical.canonical(n) == spec_signing.encode(n)
    assert len(canonical.canonical(n)) == min(len(msgpack.packb(n)), len(spec_signing.encode(n)))


def test_map_keys_go_in_utf8_byte_order_at_every_depth() -> None:
    # UTF-16 order would put U+1F600 before U+FFFF; UTF-8 puts it after. "Z" < "a" < "é".
    value = {"é": 1, "a": {"😀": [1, {"z": 2, "Z": 3}], "\uffff": None}, "Z": b"\x00"}
    data = canonical.canonical(value)
    assert data == spec_signing.encode(value)
    decoded = msgpack.unpackb(data, raw=False)
    assert list(decoded) == ["Z", "a", "é"]
    assert list(decoded["a"]) == ["\uffff", "😀"]
    assert list(decoded["a"]["😀"][1]) == ["Z", "z"]


@pytest.mark.parametrize(
    "bad",
    [
        {"total": 0.5},
        [1, 2.0],
        {1: "a"},
        {"a": {2: 3}},
        {"a": 1, 2: "b"},
        {"s": {1, 2}},
        {"ts": 2**64},  # JSON (an export file) holds any integer; MessagePack's stop at 64 bits
        [-(2**63) - 1],
    ],
)
def test_what_canonical_messagepack_cannot_hold_is_refused(bad: Any) -> None:
    with pytest.raises(canonical.CanonicalError):
        canonical.canonical(bad)


def test_signed_bytes_leave_out_the_frame_type_the_signature_and_renderings() -> None:
    event = {"t": "event", "seq": 1, "kid": "k", "sig": b"s", "foundry": {}, "roll20": {}, "kind": "join"}
    assert signing.signed_bytes(event, "room") == b"tablerelay-event-v1\x00room\x00" + spec_signing.encode(
        {"seq": 1, "kind": "join"}
    )


def test_fractions_go_on_the_wire_as_javascript_decimals() -> None:
    assert event_values({"total": 0.75, "terms": [{"value": 1 / 3}], "n": 2}) == {
        "total": "0.75",
        "terms": [{"value": "0.3333333333333333"}],
        "n": 2,
    }
    assert event_values(1e-7) == "1e-7"
    assert event_values(0.000001) == "0.000001"
    plain = {"a": [1, "x", None, True]}
    assert event_values(plain) is plain, "nothing is copied when there is no float"


# -- keys ----------------------------------------------------------------------------------------------


def test_the_first_use_makes_a_private_key_only_its_owner_can_read(tmp_path: Path) -> None:
    keyring = signing.load_keyring(tmp_path, now=1000)
    key_file = tmp_path / signing.KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    private = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    assert isinstance(private, Ed25519PrivateKey)
    raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert keyring.kid == hashlib.sha256(raw).hexdigest()[:16]
    (entry,) = keyring.keys
    assert entry["x"] == base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    assert "=" not in entry["x"]
    assert signing.load_keyring(tmp_path).kid == keyring.kid, "the same key on the next start"


def test_rotation_retires_the_old_key_and_keeps_publishing_it(tmp_path: Path) -> None:
    first = signing.load_keyring(tmp_path, now=1000)
    event = {"t": "event", "seq": 1, "kind": "join", "member": {"id": "a"}}
    signed = {**event, "kid": first.kid, "sig": first.sign(event, "r")}
    old, new = signing.rotate(tmp_path, now=2000)
    assert old == first.kid
    second = signing.load_keyring(tmp_path, now=3000)
    assert second.kid == new != old
    by_kid = {entry["kid"]: entry for entry in second.keys}
    assert by_kid[old]["retired"] == 2000
    assert "retired" not in by_kid[new]
    assert second.keys[0]["kid"] == new, "the current key comes first"
    assert signing.verify(signed, "r", second.jwks())
    assert stat.S_IMODE((tmp_path / signing.KEY_FILE).stat().st_mode) == 0o600


def test_a_key_from_the_environment_signs_and_the_file_key_is_retired(tmp_path: Path) -> None:
    file_kid = signing.load_keyring(tmp_path, now=1000).kid
    pem = (
        Ed25519PrivateKey.generate()
        .private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        .decode()
    )
    keyring = signing.load_keyring(tmp_path, pem, now=5000)
    assert keyring.kid != file_kid
    assert {e["kid"]: e.get("retired") for e in keyring.keys} == {keyring.kid: None, file_kid: 5000}


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"hello", "not an unencrypted PEM"),
        (
            Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.BestAvailableEncryption(b"pw"),
            ),
            "not an unencrypted PEM",
        ),
    ],
)
def test_a_bad_key_file_is_one_clear_sentence(tmp_path: Path, content: bytes, words: str) -> None:
    (tmp_path / signing.KEY_FILE).write_bytes(content)
    with pytest.raises(signing.SigningKeyError, match=words):
        signing.load_keyring(tmp_path)


def test_a_damaged_published_key_set_is_refused(tmp_path: Path) -> None:
    signing.load_keyring(tmp_path)
    (tmp_path / signing.KEYS_FILE).write_text(
        '{"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "AA", "kid": "x"}]}'
    )
    with pytest.raises(signing.SigningKeyError, match="JWK Set"):
        signing.load_keyring(tmp_path)


def test_a_key_set_whose_kid_lies_about_its_key_is_refused() -> None:
    public = os.urandom(32)
    jwk = signing.jwk(public)
    assert set(signing.public_keys({"keys": [jwk]})) == {jwk["kid"]}
    with pytest.raises(signing.SigningKeyError):
        signing.public_keys([{**jwk, "kid": "0" * 16}])


# -- every event the room can produce --------------------------------------------------------------------

# Formulas both dialects read; several make fractions (divisions, decimals), which must not become floats.
FORMULAS = ["1d6/4", "{1d6/4, 2d4/3}kh1", "1d6*0.5", "floor(1d6/4)+0.5", "2d20kh1+7", "4d6kh3"]
FORMULAS += ["1d8/3 + 1d4/7", "1d6*-0.25"]
INTENTS = st.one_of(
    st.builds(
        lambda c, e, b: {"system": "drawsteel.power", "characteristic": c, "edges": e, "banes": b},
        st.integers(-5, 5),
        st.integers(0, 2),
        st.integers(0, 2),
    ),
    st.builds(lambda m: {"system": "daggerheart.duality", "modifier": m}, st.integers(-5, 5)),
    st.builds(
        lambda f, d: {"system": "dice", "formula": f, "dialect": d},
        st.sampled_from(FORMULAS),
        st.sampled_from(["foundry", "roll20"]),
    ),
    st.builds(lambda p: {"system": "honors_edge.roll", "pool": p}, st.sampled_from(["3k2", "5k3", "2k1"])),
    st.builds(
        lambda d, r: {"system": "nexus.test", "attribute_die": d, "skill_rank": r},
        st.sampled_from(["d4", "d6", "d8", "d10", "d12"]),
        st.integers(0, 3),
    ),
)
ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["gm", "ana", "bo"]),
        INTENTS,
        st.sampled_from(["public", "gm", "blind", "self"]),
        st.one_of(st.none(), st.text(max_size=30)),
        st.booleans(),  # reveal it afterwards
    ),
    min_size=1,
    max_size=8,
)


def floats_in(value: Any, path: str = "") -> list[str]:
    if isinstance(value, float):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in floats_in(v, f"{path}.{k}")]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in floats_in(v, f"{path}[{i}]")]
    return []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ACTIONS)
def test_every_event_has_no_float_a_stable_encoding_and_a_good_signature(actions: list[Any]) -> None:
    table = Table(resolve=rules.resolve)
    people = {"gm": table.join("gm", sub="gm-1", name="GM"), "ana": table.join("player", name="Ana")}
    people["bo"] = table.join("player", name="Bo")
    spectator = table.join("spectator")
    for who, intent, visibility, label, reveal in actions:
        frame: dict[str, Any] = {"t": "roll", "id": f"r{len(table.stored)}", "intent": intent}
        frame["visibility"] = visibility
        if label:
            frame["label"] = label
        replies = table.send(people[who], frame)
        ack = next(r for r in replies if r["t"] in ("ack", "error"))
        assert ack["t"] == "ack", ack
        if reveal and visibility != "public":
            assert table.send(people["gm"], {"t": "reveal", "id": f"v{ack['seq']}", "seq": ack["seq"]})
    jwks = KEYRING.jwks()
    sessions = [*people.values(), spectator]
    shown = [e for s in sessions for e in table.events(s)]
    shown += [e for s in sessions for e in history(table.stored, s, table.room.committed, table.forms)]
    assert shown
    for event in shown:
        assert not floats_in(event), f"floats at {floats_in(event)} in {event}"
        part = signing.signed_part(event)
        data = canonical.canonical(part)
        assert data == spec_signing.encode(part), "the spec-only encoder writes the same bytes"
        again = msgpack.unpackb(data, raw=False, strict_map_key=True)
        assert canonical.canonical(again) == data, "decode and re-encode: the same bytes"
        assert spec_signing.verify(event, table.room.id, jwks), event
    gm_ids = table.room.committed.gm_ids()
    both = frozenset({"foundry", "roll20"})
    for record in table.stored:
        if record["kind"] not in ("roll", "reveal"):
            continue
        # A reveal is rendered as the roll its blob opens, whose fractions are decimal strings there.
        extra = renderings(record, both, gm_ids)
        assert set(extra) == {"foundry", "roll20"}, f"a rendering failed or is not plain data: {record}"
        assert not floats_in(extra), f"floats in the renderings of {record}"
        if record["kind"] == "reveal":
            (opened,) = [r for r in table.stored if r["kind"] == "roll" and r["seq"] == record["of"]]
            assert extra == renderings({**opened, "visibility": "public"}, both, gm_ids), "the roll it opens"
        else:
            # As an import stores it: the numbers an export leaves out put back (campaign.checked_records).
            imported = with_numbers({k: v for k, v in record.items() if k not in UNEXPORTED})
            assert imported == record, "the numbers an export leaves out come back on import"
            assert renderings(imported, both, gm_ids) == extra


@pytest.mark.parametrize(
    "result",
    [
        {"total": 7, "dice": {1, 2}},  # a set
        {"total": 7, "by_face": {6: 1}},  # a key that is not a string
        {"total": 7, "parts": [{"at": datetime.date(2026, 1, 1)}]},
        {"total": 7, "bad": bytearray(b"x")},
    ],
)
def test_a_roll_whose_result_has_no_canonical_encoding_is_refused_before_it_is_stored(
    result: dict[str, object],
) -> None:
    # Forms sign a record's forms without a walk of their own: what a record holds is checked as the room
    # makes it (protocol.event_values), so a rules result canonical MessagePack cannot hold never reaches
    # the log, where it would be stored and then fail to go out (the server answers ``internal``).
    table = Table(resolve=fixed(result))
    gm = table.join("gm", sub="gm1")
    before = list(table.stored)
    with pytest.raises(canonical.CanonicalError):
        table.room.handle(
            gm, frame({"t": "roll", "id": "r1", "intent": {"system": "x"}, "visibility": "public"})
        )
    assert table.stored == before
    assert not table.queue
    assert table.room.pending.seq == table.room.committed.seq, "nothing applied"
    # The room goes on: the next roll with a plain result is stored and signed.
    table.room._resolve = fixed({"total": 7, "third": 0.5})
    got = table.send(gm, {"t": "roll", "id": "r2", "intent": {"system": "x"}, "visibility": "public"})
    event = next(f for f in got if f["t"] == "event")
    assert event["result"]["third"] == "0.5", "a float becomes its decimal string"
    assert signing.verify(event, table.room.id, KEYRING.jwks())


def test_a_key_set_file_that_cannot_be_read_is_named_with_the_reason(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{}")
    cases = {
        tmp_path / "missing.json": "cannot read the key set {path}: No such file or directory.",
        deep: "the key set {path} nests deeper than any key set.",
        binary: "the key set {path} is not JSON: ",
    }
    for path, words in cases.items():
        with pytest.raises(signing.SigningKeyError) as refused:
            signing.read_key_set(path)
        assert str(refused.value).startswith(words.format(path=path)), refused.value


def test_relay_signing_is_the_public_entry_for_checking_events() -> None:
    """``from relay.signing import verify`` (docs/verification.md) checks what the server signs."""
    from relay import signing as public

    event = {"t": "event", "seq": 1, "kind": "join", "actor": {"id": "a", "name": "A", "role": "gm"}}
    signed = {**event, "kid": KEYRING.kid, "sig": KEYRING.sign(event, "room")}
    keys = KEYRING.jwks()
    assert public.verify(signed, "room", keys)
    assert not public.verify({**signed, "seq": 2}, "room", keys), "a changed event fails"
    assert public.check(signed, "other-room", keys) is not None, "another room's signature is refused"
    assert public.signed_bytes(event, "room") == signing.signed_bytes(event, "room")
    assert public.canonical({"b": 1, "a": 2}) == canonical.canonical({"a": 2, "b": 1})
