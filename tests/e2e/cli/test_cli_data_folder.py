"""Commands pointed at the wrong place, as real ``tablerelay`` processes: a data folder with no database is
refused with a sentence and left as it was (a mistyped --data must not list no rooms, or leave a secret and
a signing key no server uses), files that cannot be written are named, and a number the store cannot hold
is refused before it is stored: never a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.console import run_cli

NO_DATABASE = "There is no database at {db}; check --data (the folder the server uses)."


def assert_refused(proc: subprocess.CompletedProcess[str], sentence: str) -> None:
    assert proc.returncode in (1, 2), (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.strip() == f"tablerelay: {sentence}", proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["room", "list"],
        ["room", "export", "r1"],
        ["room", "archive", "r1"],
        ["room", "delete", "r1", "--yes"],
        ["token", "--room", "r1", "--role", "gm"],
        ["backup", "{tmp}/copy.sqlite3"],
        ["store", "copy", "--from", "sqlite", "--to", "nats://127.0.0.1:9"],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_a_command_on_what_a_server_stored_refuses_a_folder_with_no_database(
    tmp_path: Path, command: list[str]
) -> None:
    typo = tmp_path / "dta"
    proc = run_cli(*(part.format(tmp=tmp_path) for part in command), data=typo)
    assert_refused(proc, NO_DATABASE.format(db=typo / "tablerelay.sqlite3"))
    assert not typo.exists()


def test_key_rotate_refuses_a_folder_that_is_not_a_data_folder(tmp_path: Path) -> None:
    typo = tmp_path / "dta"
    proc = run_cli("key", "rotate", data=typo)
    assert_refused(
        proc,
        f"{typo} is not a tablerelay data folder (it holds no signing.key and no database): check --data "
        "(the folder the server uses); `tablerelay serve` makes the first key itself.",
    )
    assert not typo.exists()


def test_key_rotate_names_the_folder_it_cannot_write_the_key_in(tmp_path: Path) -> None:
    data = tmp_path / "data"
    created = run_cli("room", "create", "--name", "t", data=data)
    assert created.returncode == 0, created.stderr
    first = run_cli("key", "rotate", data=data)
    assert first.returncode == 0, first.stderr
    key = (data / "signing.key").read_bytes()
    (data / "signing.key.tmp").mkdir()  # where the new key is written first, then moved over the old one
    proc = run_cli("key", "rotate", data=data)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith(f"tablerelay: cannot write the new key in {data}: "), proc.stderr
    assert "Traceback" not in proc.stderr
    assert (data / "signing.key").read_bytes() == key  # the current key is kept


@pytest.mark.parametrize(
    ("output", "reason"),
    [("{tmp}/missing/room.jsonl", "No such file or directory"), ("/dev/full", "No space left on device")],
    ids=["missing folder", "full disk"],
)
def test_an_export_that_cannot_be_written_names_the_file(tmp_path: Path, output: str, reason: str) -> None:
    data = tmp_path / "data"
    created = run_cli("room", "create", "--name", "t", "--json", data=data)
    assert created.returncode == 0, created.stderr
    room = json.loads(created.stdout)["room"]
    target = output.format(tmp=tmp_path)
    proc = run_cli("room", "export", room, "-o", target, data=data)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == f"tablerelay: cannot write {target}: {reason}.", proc.stderr


def test_a_resource_cap_the_store_cannot_hold_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    sentence = "--fear-max and --hope-max must be whole numbers from 0 to 2**63 - 1."
    assert_refused(run_cli("room", "create", "--name", "t", "--fear-max", str(2**63), data=data), sentence)
    assert_refused(run_cli("room", "create", "--name", "t", "--hope-max", "-1", data=data), sentence)
    created = run_cli("room", "create", "--name", "t", "--fear-max", str(2**63 - 1), "--json", data=data)
    assert created.returncode == 0, created.stderr


@pytest.mark.parametrize(
    "command",
    [["serve", "--port", "0"], ["room", "create", "--name", "t"], ["room", "list"], ["restore", "{tmp}/b"]],
    ids=lambda command: " ".join(command[:2]),
)
def test_a_data_folder_that_is_a_file_or_cannot_be_made_is_refused(
    tmp_path: Path, command: list[str]
) -> None:
    args = [part.format(tmp=tmp_path) for part in command]
    afile = tmp_path / "afile"
    afile.write_text("notes\n")
    assert_refused(
        run_cli(*args, data=afile),
        f"The data folder {str(afile)!r} is a file, not a folder; check --data.",
    )
    if command[0] in ("serve", "restore") or command[:2] == ["room", "create"]:
        inside = afile / "data"  # a folder cannot be made inside a file
        assert_refused(
            run_cli(*args, data=inside),
            f"The data folder {str(inside)!r} cannot be written: Not a directory.",
        )
    assert afile.read_text() == "notes\n"


@pytest.mark.parametrize(
    "command",
    [
        ["serve", "--port", "0"],
        ["room", "create", "--name", "t"],
        ["room", "list"],
        ["room", "export", "r1"],
        ["token", "--room", "r1", "--role", "gm"],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_a_database_file_that_is_not_one_is_named_and_left_as_it_is(
    tmp_path: Path, command: list[str]
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = data / "tablerelay.sqlite3"
    db.write_bytes(b"these are a GM's notes, not a database\n" * 100)
    before = db.read_bytes()
    proc = run_cli(*command, data=data)
    assert_refused(proc, f"The database {db} cannot be used: file is not a database.")
    assert db.read_bytes() == before
