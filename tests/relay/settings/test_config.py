"""Settings from a TOML file, the environment and the command line: each is read as its kind, and a value
that is not of that kind is refused with a sentence naming the setting, never bent into it."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.settings.config import ConfigError, load


def toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tablerelay.toml"
    path.write_text(text)
    return path


def test_each_source_is_read_as_the_settings_kind(tmp_path: Path) -> None:
    path = toml(tmp_path, "port = 9000\nsigning = false\nnode = 7\n[limits]\nrate = 5\npresence_days = 1.5\n")
    config = load(path, environ={"TABLERELAY_DATA": "/srv/relay", "TABLERELAY_SECRET": "s3cret"})
    assert config.port == 9000
    assert config.signing is False
    assert config.node == "7", "a bare number is a name"
    assert config.limits.rate == 5.0
    assert config.limits.presence_days == 1.5
    assert config.data == Path("/srv/relay")
    assert config.secret == "s3cret"
    # The environment's words for true and false, and numbers as text.
    env = {"TABLERELAY_SIGNING": "Off", "TABLERELAY_PORT": " 8123 "}
    assert load(environ=env).signing is False
    assert load(environ=env).port == 8123
    assert load(environ={"TABLERELAY_SIGNING": "yes"}).signing is True
    # The command line's flags, as argparse hands them.
    flags = load(environ={}, overrides={"data": tmp_path, "port": 9001, "public_url": None})
    assert (flags.data, flags.port, flags.public_url) == (tmp_path, 9001, None)


@pytest.mark.parametrize(
    ("text", "env", "words"),
    [
        ('port = "abc"\n', {}, "Setting 'port' must be a whole number; got 'abc'."),
        ("port = 80.5\n", {}, "Setting 'port' must be a whole number; got 80.5."),
        ("port = true\n", {}, "Setting 'port' must be a whole number; got True."),
        ("signing = 5\n", {}, "Setting 'signing' must be true or false; got 5."),
        ("", {"TABLERELAY_SIGNING": "maybe"}, "Setting 'signing' must be true or false; got 'maybe'."),
        ("secret = [1, 2]\n", {}, "Setting 'secret' must be text; got [1, 2]."),
        ('data = {where = "x"}\n', {}, "Setting 'data' must be a path; got {'where': 'x'}."),
        ('[limits]\nrate = "fast"\n', {}, "Setting 'rate' must be a number; got 'fast'."),
        ("limits = 3\n", {}, "Setting 'limits' in"),
    ],
)
def test_a_value_of_another_kind_is_refused_with_a_sentence(
    tmp_path: Path, text: str, env: dict[str, str], words: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load(toml(tmp_path, text), environ=env)
    assert words in str(refused.value)


def test_a_config_file_that_cannot_be_read_as_toml_is_named_with_the_reason(tmp_path: Path) -> None:
    folder = tmp_path / "conf.d"
    folder.mkdir()
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfeport = 1\n")
    deep = tmp_path / "deep.toml"
    deep.write_text("port = " + "[" * 100_000 + "]" * 100_000 + "\n")
    cases = {
        tmp_path / "missing.toml": "does not exist.",
        folder: "cannot be read: Is a directory.",
        binary: "is not valid TOML: it is not UTF-8 text.",
        deep: "is not valid TOML: it nests too deep.",
    }
    for path, reason in cases.items():
        with pytest.raises(ConfigError) as refused:
            load(path, environ={})
        assert str(refused.value) == f"The config file {str(path)!r} {reason}"
