"""What ``tablerelay room import`` takes: every kind of record the server writes passes ``relay.core.records``
and the import's checks; a record it could not have written is refused with a sentence naming the event,
even when the file's own key signed it."""

from __future__ import annotations

import copy
import dataclasses
import io
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from relay.core import records, visibility
from relay.ops.campaign import ImportRefused, checked_records
from relay.storage import exports
from relay.trust.signing import Keyring
from tests.relay.helpers import INFO, Table

#: Another key than the server's: a file signed by whoever made it, with the key in its own header.
FORGER = Keyring.of(Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))))


def played() -> list[dict[str, Any]]:
    """A room's stored records with one of every kind, hidden rolls of each visibility, two revealed, on fair
    dice: seeds committed and revealed, rolls witnessed by Bo."""
    table = Table(seeds={n: bytes([n]) * 32 for n in (1, 2, 3)})
    gm = table.join("gm", sub="gm-1", name="GM")
    ana = table.join("player", name="Ana")
    bo = table.join("player", name="Bo", witness=True)
    spare = table.join("player", name="Spare")

    def roll(session: Any, frame: dict[str, Any]) -> None:
        table.send(session, frame)
        last = table.stored[-1]
        if last["kind"] == "pending":  # Bo witnesses it
            table.send(
                bo, {"t": "witness", "id": f"w{last['seq']}", "pending": last["seq"], "value": b"w" * 16}
            )

    for i, shown_to in enumerate(("public", "gm", "blind", "self")):
        intent = {"system": "dice", "formula": "2d6 + 1/3" if i % 2 else "3d6"}
        roll(ana, {"t": "roll", "id": f"r{i}", "intent": intent, "visibility": shown_to})
    roll(gm, {"t": "roll", "id": "g", "intent": {"system": "dice", "formula": "1d20"}, "visibility": "gm"})
    table.send(gm, {"t": "seed", "id": "s", "op": "reveal"})
    sealed = [r["seq"] for r in table.stored if r.get("sealed")]
    for seq in sealed[:2]:
        table.send(gm, {"t": "reveal", "id": f"v{seq}", "seq": seq})
    table.send(gm, {"t": "resource", "id": "f", "name": "fear", "op": "gain", "n": 2})
    table.send(gm, {"t": "resource", "id": "h", "name": "hope", "op": "gain", "n": 1, "participant": ana.id})
    table.send(gm, {"t": "rename", "id": "n", "participant": ana.id, "name": "Anastasia"})
    table.send(gm, {"t": "merge", "id": "m", "participant": spare.id, "into": ana.id})
    table.send(gm, {"t": "kick", "id": "k", "participant": bo.id, "reason": "Moved away"})
    table.send(gm, {"t": "invites", "id": "i", "rotate": True})
    table.leave(ana)
    table.send(gm, {"t": "archive", "id": "a"})
    kinds = {r["kind"] for r in table.stored}
    assert kinds == set(records.KINDS), kinds
    return table.stored


def export_of(stored: list[dict[str, Any]], keyring: Keyring) -> exports.Export:
    """The stored records through a real export file, signed by ``keyring``, read back."""
    out = io.BytesIO()
    events = exports.stored_events(stored, INFO, keyring)
    exports.write(out, "msgpack", exports.header(INFO, keyring, stored[-1]["seq"], "stored"), events)
    return exports.read(out.getvalue())


def test_every_kind_of_record_the_server_writes_passes_and_imports() -> None:
    stored = played()
    for record in stored:
        records.check(record)
    info, imported = checked_records(export_of(stored, FORGER))
    assert info.id == INFO.id
    assert [r["seq"] for r in imported] == [r["seq"] for r in stored]


def _roll(stored: list[dict[str, Any]], visibility: str) -> dict[str, Any]:
    return next(r for r in stored if r["kind"] == "roll" and r["visibility"] == visibility)


def _kind(stored: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(r for r in stored if r["kind"] == kind)


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        target = record
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda record: record.pop(key)


# (which record, the change, words of the refusal)
CHANGES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    # The visible record of a hidden roll says one total, its seal (what a reveal shows) another.
    ("gm", _set(("result", "total"), 99), "its seal does not hold the roll itself"),
    ("blind", _set(("label",), "Changed"), "its seal does not hold the roll itself"),
    ("self", _set(("sealed", "commitment"), "00" * 32), "commitment is not the hash"),
    ("gm", _set(("sealed", "nonce"), b"short"), "nonce is not 32 bytes"),
    ("gm", _drop("sealed"), "a gm roll has no seal"),
    ("gm", _set(("sealed", "blob"), b"\xc1"), "its seal's commitment is not the hash"),
    (
        "public",
        _set(("sealed",), {"blob": b"", "nonce": bytes(32), "commitment": ""}),
        "a public roll has a seal",
    ),
    ("public", _set(("visibility",), "secret"), "'visibility' is not one of public, gm, blind, self"),
    ("public", _set(("result",), [1, 2]), "'result' is not a map"),
    ("public", _set(("intent",), "3d6"), "'intent' is not a map"),
    ("public", _set(("ts",), 2**63), "'ts' is not a whole number from 0"),
    ("public", _set(("ts",), "yesterday"), "'ts' is not a whole number from 0"),
    (
        "public",
        _set(("actor", "role"), "king"),
        "'actor' has a role that is not one of gm, player, spectator",
    ),
    ("public", _set(("actor", "id"), ""), "'actor' has an id that is empty or not text"),
    ("public", _set(("actor",), "Ana"), "'actor' is not a participant"),
    ("public", _drop("label"), "it has no 'label'"),
    ("public", _set(("request",), 7), "'request' is not text"),
    ("public", _set(("kind",), "teleport"), "its kind 'teleport' is not one of"),
    ("reveal", _set(("nonce",), None), "'nonce' is not 32 bytes"),
    ("reveal", _set(("of",), -1), "'of' is not a whole number from 0"),
    ("resource", _set(("value",), "lots"), "'value' is not a whole number from 0"),
    ("resource", _set(("name",), "mana"), "'name' is not one of fear, hope"),
    ("join", _set(("member",), None), "'member' is not a participant"),
    ("join", _set(("visibility",), "gm"), "a join event is public, not 'gm'"),
    ("rename", _set(("was",), 3), "'was' is not text"),
    ("merge", _set(("hope",), -2), "'hope' is not a whole number from 0"),
    ("kick", _set(("reason",), {"why": 1}), "'reason' is not text"),
    ("invites", _set(("generation",), True), "'generation' is not a whole number from 0"),
]


@pytest.mark.parametrize(("which", "change", "words"), CHANGES)
def test_a_record_the_server_could_not_have_written_is_refused_though_signed(
    which: str, change: Callable[[dict[str, Any]], None], words: str
) -> None:
    stored = copy.deepcopy(played())
    pick = _roll if which in ("public", "gm", "blind", "self") else _kind
    target = pick(stored, which)
    change(target)
    with pytest.raises(records.RecordError, match=words.replace("(", r"\(")):
        records.check(target)
    # The same through the import, with the file re-signed by its own header's key: refused, by seq.
    with pytest.raises(ImportRefused) as refused:
        checked_records(export_of(stored, FORGER))
    assert f"event {target['seq']} (" in str(refused.value)
    assert "is not one this server writes" in str(refused.value)


def test_a_reveal_must_publish_the_seal_of_the_roll_it_names() -> None:
    stored = copy.deepcopy(played())
    reveal = _kind(stored, "reveal")
    other = next(r for r in stored if r.get("sealed") and r["seq"] != reveal["of"])
    reveal["blob"], reveal["nonce"] = other["sealed"]["blob"], other["sealed"]["nonce"]
    records.check(reveal)  # a well-formed reveal on its own
    with pytest.raises(ImportRefused, match=f"event {reveal['seq']} reveals another roll than the one at"):
        checked_records(export_of(stored, FORGER))


def test_a_roll_whose_result_no_renderer_can_show_is_refused() -> None:
    stored = copy.deepcopy(played())
    roll = _roll(stored, "public")
    del roll["result"]["terms"][0]["results"][0]["result"]  # a die without its face
    records.check(roll)  # the fields are all there
    with pytest.raises(
        ImportRefused, match=f"event {roll['seq']} \\(roll\\) is not one this server writes: its"
    ):
        checked_records(export_of(stored, FORGER))


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("created", 2**64, "its 'created' is not a whole number from 0"),  # JSON holds any integer
        ("fear_max", "12", "its 'fear_max' is not a whole number from 0"),
        ("name", None, "its 'name' is not text"),
        ("epoch", "", "its 'epoch' is empty or not text"),
        ("hope_max", ..., "it has no 'hope_max'"),
    ],
)
def test_a_header_room_the_server_could_not_have_written_is_refused(
    field: str, value: Any, words: str
) -> None:
    export = export_of(played(), FORGER)
    room = {k: v for k, v in export.room.items() if k != field}
    if value is not ...:
        room[field] = value
    with pytest.raises(ImportRefused, match=f"the header's room is not one this server writes: {words}"):
        checked_records(dataclasses.replace(export, room=room))


def test_epochs_run_in_spans_as_restores_leave_them() -> None:
    stored = copy.deepcopy(played())
    # A restore gave the room a new epoch: the events before it keep the old one.
    cut = len(stored) // 2
    for record in stored[:cut]:
        record["epoch"] = "before-restore"
        if "sealed" in record:  # a seal holds the roll's epoch too, as it was made
            body = visibility.body_of(record)
            record["sealed"] = visibility.seal(body, record["sealed"]["nonce"])
    reveals = {r["of"]: r for r in stored if r["kind"] == "reveal"}
    for record in stored:
        if record["seq"] in reveals:
            reveals[record["seq"]]["blob"] = record["sealed"]["blob"]
    info, _ = checked_records(export_of(stored, FORGER))
    assert info.epoch == INFO.epoch
    # Never back to an earlier one.
    stored[-1]["epoch"] = "before-restore"
    with pytest.raises(
        ImportRefused, match=f"event {stored[-1]['seq']} goes back to the epoch of earlier events"
    ):
        checked_records(export_of(stored, FORGER))
