"""The served-client declaration (relay.shell.http.assets) and the public address (relay.shell.public),
without a server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from relay.settings.config import Config, ConfigError
from relay.shell import public
from relay.shell.http import assets


def test_a_checkout_serves_exactly_the_declared_files_of_each_client() -> None:
    js = [relative for relative, _ in assets.client_paths("js")]
    parts = ["src/client.js", "src/connection.js", "src/fairness.js", "src/protocol.js", "src/signing.js"]
    parts += ["src/state.js", "src/verification.js", "src/witness.js"]
    assert js == [*parts, "tablerelay.d.ts", "tablerelay.js"], "not its tests, package files or node_modules"
    web = dict(assets.client_paths("web"))
    assert {"watch.html", "table.html", "feed.js", "tablerelay.css"} <= set(web)
    assert "<html" in web["watch.html"].read_text(encoding="utf-8").lower()
    vendored = [relative for relative, _ in assets.client_paths(assets.VENDOR)]
    assert "msgpack/index.mjs" in vendored
    assert not [v for v in vendored if v.rsplit("/", 1)[-1].startswith(".") or v.endswith("LICENSE")]


def test_what_a_client_carries() -> None:
    web, js = assets.client("web"), assets.client("js")
    assert web.carries("watch.html")
    assert web.carries("img/dice/d6.svg")
    assert not web.carries(".eslintrc.json")
    assert not web.carries("node_modules/x/index.js")
    assert js.carries("tablerelay.js")
    assert not js.carries("test/client.test.mjs")
    assert not js.carries("package.json")
    foundry = assets.client("foundry")
    assert not foundry.required, "a checkout may not have it yet"
    assert foundry.carries("module.json")
    assert foundry.carries("scripts/tablerelay.js")
    assert foundry.carries("lang/en.json")
    assert not foundry.carries("test/module.test.mjs")
    assert assets.carries(assets.VENDOR, "msgpack/utils/int.mjs")
    assert not assets.carries(assets.VENDOR, "msgpack/index.d.ts")
    assert not assets.carries(assets.VENDOR, "unknown/index.mjs")


def test_an_undeclared_client_is_a_sentence() -> None:
    with pytest.raises(assets.UnknownClient, match="No served client is called 'roll21'; the declared ones"):
        assets.client_files("roll21")


@pytest.mark.parametrize(
    ("given", "base"),
    [
        ("https://dice.example.org", "https://dice.example.org"),
        ("https://dice.example.org/", "https://dice.example.org"),
        (" http://10.0.0.5:8765 ", "http://10.0.0.5:8765"),
        ("https://example.org/dice/", "https://example.org/dice"),
        ("http://[::1]:8765", "http://[::1]:8765"),
    ],
)
def test_a_public_url_is_kept_without_its_trailing_slash(given: str, base: str) -> None:
    assert public.public_base(Config(public_url=given)) == base


@pytest.mark.parametrize(
    "bad",
    ["dice.example.org", "ws://dice.example.org", "https://", "https://x.org/?a=1", "https://x.org/#top",
     "https://user:pw@x.org", "https://x.org:http"],
)  # fmt: skip
def test_a_bad_public_url_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="public_url"):
        public.check_public_url(bad)


def test_without_a_public_url_the_listening_address_is_used(tmp_path: Path) -> None:
    config = Config(host="0.0.0.0", port=9000, data=tmp_path)
    assert public.public_base(config) == "http://127.0.0.1:9000"
    assert public.public_base(config, ("::1", 41000)) == "http://[::1]:41000"
    # A server on this data folder recorded its address: the commands beside it use that.
    public.record_serving(tmp_path, "https://recorded.example")
    assert public.public_base(config) == "https://recorded.example"
    assert (
        public.public_base(Config(public_url="https://own.example", data=tmp_path)) == "https://own.example"
    )
    public.forget_serving(tmp_path)
    assert not (tmp_path / public.SERVING_FILE).exists()


def test_a_record_from_a_process_that_is_gone_is_ignored(tmp_path: Path) -> None:
    (tmp_path / public.SERVING_FILE).write_text('{"url": "http://old:1", "pid": 999999999}')
    assert public.running_base(tmp_path) is None
    (tmp_path / public.SERVING_FILE).write_text("not json")
    assert public.running_base(tmp_path) is None
    (tmp_path / public.SERVING_FILE).write_text(f'{{"url": "http://alive:2", "pid": {os.getpid()}}}')
    assert public.running_base(tmp_path) == "http://alive:2"


def test_links_keep_the_token_in_the_fragment() -> None:
    assert public.link("https://example.org/dice", "watch", "tok") == "https://example.org/dice/watch#tok"
