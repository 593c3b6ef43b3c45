"""What ``room import`` stores beside a stored export's events (``relay.ops.room_move``): the secrets a file
made ``--with-secrets`` carries, through both encodings, once each matches what the signed events commit to;
without them, the open seed abandoned by the next seed's commitment, which the fold takes; a secret that does
not match is refused with a sentence."""

from __future__ import annotations

import copy
import io
from typing import Any

import pytest

from relay.core import records
from relay.core.fairness import seed_commit
from relay.ops import room_move
from relay.ops.campaign import ImportRefused, checked_room
from relay.storage import exports
from tests.relay.helpers import INFO, KEYRING, Table

SEEDS = {1: bytes([1]) * 32, 2: bytes([2]) * 32}
DICE = {"system": "dice", "formula": "2d6"}


def open_room() -> tuple[Table, int]:
    """A room on fair dice with one roll made and a hidden GM roll still open (its witness not answered)."""
    table = Table(seeds=SEEDS)
    gm = table.join("gm", sub="gm-1", name="GM")
    ana = table.join("player", name="Ana", witness=True)
    table.send(ana, {"t": "roll", "id": "a", "intent": DICE, "visibility": "public", "seed": b"s" * 16})
    table.send(gm, {"t": "roll", "id": "g", "intent": DICE, "visibility": "gm"})
    pending = table.stored[-1]
    assert pending["kind"] == "pending"
    return table, pending["seq"]


def through_file(table: Table, secrets: dict[str, Any] | None, fmt: str = "jsonl") -> room_move.Move:
    """The table's room written to an export file with ``secrets`` in its header, read back and planned."""
    out = io.BytesIO()
    last = table.stored[-1]["seq"]
    head = exports.header(INFO, KEYRING, last, "stored", secrets)
    exports.write(out, fmt, head, exports.stored_events(table.stored, INFO, KEYRING))
    export = exports.read(out.getvalue())
    info, stored, state = checked_room(export)
    return room_move.planned(info, stored, state, export.secrets)


def carried(table: Table) -> dict[str, Any]:
    return room_move.header_secrets(SEEDS, list(table.vault.values()), table.stored[-1]["seq"])


@pytest.mark.parametrize("fmt", exports.FORMATS)
def test_carried_secrets_come_through_the_file_as_they_were(fmt: str) -> None:
    table, pending = open_room()
    move = through_file(table, carried(table), fmt)
    assert move.seeds == SEEDS
    assert move.kept == [table.vault[pending]]
    assert move.abandoned is None
    assert move.records(move.seeds_to_store()) == [], "nothing appended: the open seed came with the room"
    opened = "with the secrets of 1 open witnessed roll: it rolls on from its open seed."
    assert move.said() == f"Its 2 dice seeds came with it, {opened}"


def test_without_secrets_the_open_seed_is_abandoned_by_the_next_ones_commitment() -> None:
    table, pending = open_room()
    move = through_file(table, None)
    assert (move.abandoned, move.rolls, move.unmade, move.kept) == (1, 1, (pending,), [])
    seeds = move.seeds_to_store()
    assert set(seeds) == {2}
    assert seeds[2] != SEEDS[2], "a secret of the importing relay's own, drawn now"
    [commit] = move.records(seeds)
    assert (commit["seq"], commit["kind"], commit["n"]) == (table.stored[-1]["seq"] + 1, "seed_commit", 2)
    assert commit["commit"] == seed_commit(INFO.id, 2, seeds[2])
    state = records.checked_fold([*table.stored, commit])
    assert (state.seed_n, state.seed_open) == (2, True), "the server's fold takes the abandonment"
    said = move.said()
    assert said is not None
    assert said.startswith("Dice seed 1 was open and its secret is not in the file")
    assert f"the witnessed rolls announced at seq {pending} can never be made" in said


def test_an_archived_room_without_secrets_takes_no_event() -> None:
    table, _ = open_room()
    table.send(table.sessions[0], {"t": "archive", "id": "x"})
    move = through_file(table, None)
    assert move.abandoned == 1
    assert move.records(move.seeds_to_store()) == []
    assert "no seed follows it: the room is archived" in (move.said() or "")


def _bad_seed(secrets: dict[str, Any]) -> None:
    secrets["seeds"][0][1] = bytes(32)


def _bad_nonce(secrets: dict[str, Any]) -> None:
    secrets["kept"][0]["nonce"] = bytes(32)


def _other_intent(secrets: dict[str, Any]) -> None:
    secrets["kept"][0]["intent"] = {"system": "dice", "formula": "1d20"}


def _no_such_pending(secrets: dict[str, Any]) -> None:
    secrets["kept"][0]["pending"] = 1


def _seed_twice(secrets: dict[str, Any]) -> None:
    secrets["seeds"].append(list(secrets["seeds"][0]))


@pytest.mark.parametrize(
    ("spoil", "words"),
    [
        (_bad_seed, "the file's dice seed 1 does not match its commitment in the events"),
        (_bad_nonce, "do not match that roll"),
        (_other_intent, "do not match that roll"),
        (_no_such_pending, "name a pending roll at seq 1 that its events lack"),
        (_seed_twice, "are not [n, 32 bytes] pairs, each n once"),
    ],
)
def test_secrets_that_do_not_match_the_events_are_refused(spoil: Any, words: str) -> None:
    table, _ = open_room()
    secrets = copy.deepcopy(carried(table))
    spoil(secrets)
    with pytest.raises(ImportRefused, match=words.replace("[", r"\[")):
        through_file(table, secrets)


def test_only_a_stored_export_holds_secrets() -> None:
    with pytest.raises(ValueError, match="only a stored export"):
        exports.header(INFO, KEYRING, 0, "public", {"seeds": []})
    out = io.BytesIO()
    head = {**exports.header(INFO, KEYRING, 0), "secrets": {"seeds": []}}
    exports.write(out, "jsonl", head, [])
    with pytest.raises(exports.ExportError, match="secrets are not a map in a stored export"):
        exports.read(out.getvalue())
