"""The release build (``node build.mjs``): both manifests, the userscript's header, and what the bundles
must not do. The browser tests load the test build; this checks the files a user would install."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.roll20.conftest import ROLL20

ROLL20_MATCH = "https://app.roll20.net/editor*"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    node = shutil.which("node")
    assert node is not None
    out = tmp_path_factory.mktemp("roll20-release")
    subprocess.run(
        [node, "build.mjs", "--out", str(out)], cwd=ROLL20, check=True, capture_output=True, timeout=120
    )
    return out


def test_the_manifests_are_mv3_for_chromium_and_firefox_and_match_only_roll20(release: Path) -> None:
    chromium = json.loads((release / "chromium" / "manifest.json").read_text())
    firefox = json.loads((release / "firefox" / "manifest.json").read_text())
    for manifest in (chromium, firefox):
        assert manifest["manifest_version"] == 3
        assert manifest["permissions"] == ["storage"]
        assert "host_permissions" not in manifest
        assert manifest["content_scripts"] == [
            {"matches": [ROLL20_MATCH], "js": ["content.js"], "run_at": "document_idle"}
        ]
        assert manifest["action"]["default_popup"] == "popup.html"
    assert chromium["background"] == {"service_worker": "background.js"}
    assert firefox["background"] == {"scripts": ["background.js"]}
    assert firefox["browser_specific_settings"]["gecko"]["id"]
    for browser in ("chromium", "firefox"):
        names = sorted(p.name for p in (release / browser).iterdir())
        assert names == ["background.js", "content.js", "manifest.json", "popup.html", "popup.js"]


def test_the_userscript_header_matches_roll20_and_grants_only_storage_and_a_menu(release: Path) -> None:
    script = (release / "tablerelay-roll20.user.js").read_text()
    header = script.split("// ==/UserScript==")[0]
    assert header.startswith("// ==UserScript==")
    assert re.findall(r"// @match\s+(\S+)", header) == [ROLL20_MATCH]
    grants = set(re.findall(r"// @grant\s+(\S+)", header))
    assert grants == {"GM_getValue", "GM_setValue", "GM.getValue", "GM.setValue", "GM_registerMenuCommand"}


def test_the_bundles_keep_nothing_in_the_pages_storage_and_carry_the_js_client_once(release: Path) -> None:
    for bundle in (release / "chromium" / "content.js", release / "tablerelay-roll20.user.js"):
        code = bundle.read_text()
        # Tokens, sessions and the posted log stay in the extension's (or manager's) storage.
        for page_storage in ("localStorage", "sessionStorage", "document.cookie"):
            assert page_storage not in code, (bundle, page_storage)
        # The connection, resume and verification code is the JS client's, bundled from clients/js once.
        assert code.count("var TableRelay = class") == 1, bundle
    # The source imports the client rather than copying it.
    assert 'from "../../js/tablerelay.js"' in (ROLL20 / "src" / "bridge.js").read_text()
    assert not list((ROLL20 / "src").rglob("tablerelay.js"))


def test_the_source_type_checks_against_its_jsdoc_and_the_js_clients_types() -> None:
    tsc = ROLL20 / "node_modules" / ".bin" / "tsc"
    assert tsc.exists(), "run scripts/setup.d/roll20.sh first"
    proc = subprocess.run(
        [str(tsc), "-p", "tsconfig.json"], cwd=ROLL20, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
