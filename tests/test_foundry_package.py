"""The Foundry module as a GM installs it: the manifest and zip a running relay serves, and the CLI's zip.

Foundry's "Install Module" reads ``module.json`` from the manifest URL, then downloads ``download`` and
unpacks it. These tests do the same with a real relay process, and load the unpacked module in Node to
prove its import graph resolves without the repository around it (no bare specifiers, nothing missing).
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.browser.relay_process import ROOT, running_relay
from tests.console import tablerelay_bin

MODULE = ROOT / "clients" / "foundry"


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, dict(response.headers), response.read()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with running_relay(tmp_path_factory.mktemp("foundry-data")) as relay:
        status, headers, body = fetch(relay.http_url + "/foundry/module.json")
        assert status == 200
        manifest = json.loads(body)
        zstatus, zheaders, zbody = fetch(manifest["download"])
        assert zstatus == 200
        proxied = json.loads(
            fetch(
                relay.http_url + "/foundry/module.json",
                {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "dice.example.org"},
            )[2]
        )
        yield relay, headers, manifest, zheaders, zbody, proxied


def test_the_manifest_is_what_foundry_installs_from(served: Any) -> None:
    relay, headers, manifest, _, _, proxied = served
    assert headers["Content-Type"] == "application/json"
    assert manifest["id"] == "tablerelay"
    assert manifest["compatibility"] == {"minimum": "12", "verified": "13"}
    assert manifest["manifest"] == relay.http_url + "/foundry/module.json"
    assert manifest["download"] == relay.http_url + "/foundry/tablerelay.zip"
    assert manifest["esmodules"] == ["scripts/tablerelay.mjs"]
    assert manifest["version"].count(".") == 2, manifest["version"]
    # Behind a TLS proxy, the addresses name the proxy, as Foundry's server will reach it.
    assert proxied["download"] == "https://dice.example.org/foundry/tablerelay.zip"


def test_the_zip_holds_the_module_and_everything_it_imports(served: Any, tmp_path: Path) -> None:
    _, _, manifest, zheaders, zbody, _ = served
    assert zheaders["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(zbody)) as zf:
        names = set(zf.namelist())
        assert json.loads(zf.read("module.json")) == manifest, "the zip's module.json is the served manifest"
        zf.extractall(tmp_path)
    for path in [*manifest["esmodules"], *manifest["styles"]]:
        assert path in names, f"module.json names {path}, which the zip lacks"
    # Foundry loads a language's strings from the path module.json gives, inside the unpacked module.
    assert "lang/en.json" in names
    assert [lang["lang"] for lang in manifest["languages"]] == ["en"]
    for lang in manifest["languages"]:
        assert lang["path"] in names, f"module.json names {lang['path']}, which the zip lacks"
        path = (tmp_path / lang["path"]).resolve()
        assert path.is_relative_to(tmp_path.resolve()), f"{lang['path']} points outside the module"
        strings = json.loads(path.read_text(encoding="utf-8"))
        assert strings["TABLERELAY"]["Settings"]["relayUrl"]["Name"] == "Relay address", lang
    assert "lib/tablerelay.mjs" in names
    assert "lib/msgpack/index.mjs" in names
    assert "lib/noble-ed25519/index.js" in names
    assert not any(n.startswith("test/") for n in names), "tests stay out of the zip"
    assert not any(n.endswith(".map") for n in names)
    for name in names:
        if name.endswith(".mjs"):
            text = (tmp_path / name).read_text()
            assert '@msgpack/msgpack"' not in text, f"{name} keeps a bare import a browser cannot resolve"
            assert "../../js/" not in text, f"{name} reaches into the repository's layout"
    node = shutil.which("node")
    assert node is not None
    # Import the unpacked module as Foundry would load it; the entry registers its init and ready hooks.
    probe = (
        "const hooks = [];"
        "globalThis.Hooks = { once: (name) => hooks.push(name), on: () => {} };"
        f"const m = await import({json.dumps((tmp_path / 'scripts' / 'module.mjs').as_uri())});"
        f"await import({json.dumps((tmp_path / 'scripts' / 'tablerelay.mjs').as_uri())});"
        "const client = await import("
        f"{json.dumps((tmp_path / 'scripts' / 'client.mjs').as_uri())});"
        "console.log(JSON.stringify("
        "{hooks, module: typeof m.TableRelayModule, client: typeof client.TableRelay}));"
    )
    out = subprocess.run(
        [node, "--input-type=module", "-e", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"hooks": ["init", "ready"], "module": "function", "client": "function"}


def test_the_cli_writes_the_same_zip(served: Any, tmp_path: Path) -> None:
    relay, _, _, _, zbody, _ = served
    out = tmp_path / "module.zip"
    done = subprocess.run(
        [tablerelay_bin(), "foundry", "package", "--out", str(out), "--public-url", relay.http_url],
        env=relay.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert relay.http_url + "/foundry/module.json" in done.stdout
    assert out.read_bytes() == zbody, "the CLI's zip and the served zip are the same bytes"
    bad = subprocess.run(
        [tablerelay_bin(), "foundry", "package", "--out", str(tmp_path / "missing" / "x.zip")],
        env=relay.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("tablerelay: cannot write"), bad.stderr
    assert "Traceback" not in bad.stderr
