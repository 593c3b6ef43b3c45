"""A relay installed from the wheel into a clean venv, served from a folder outside the repository with no
npm anywhere on its PATH: the links ``room create`` prints open working pages, and a roll made on /table
appears live on /watch."""

from __future__ import annotations

import io
import json
import re
import subprocess
import urllib.request
import zipfile

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PageProblems
from tests.browser.relay_process import ROOT, running_relay
from tests.packaging.wheel import Installed

pytestmark = pytest.mark.slow


def test_an_installed_wheel_serves_pages_that_roll_live(
    installed: Installed, tmp_path_factory: pytest.TempPathFactory, page: Page, page_problems: PageProblems
) -> None:
    home = tmp_path_factory.mktemp("elsewhere")
    assert not home.resolve().is_relative_to(ROOT)
    data = home / "data"
    with running_relay(data, command=installed.tablerelay, cwd=home, env=installed.env) as relay:
        made = subprocess.run(
            [installed.tablerelay, "room", "create", "--name", "Installed", "--json"],
            cwd=home,
            env=installed.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        room = json.loads(made.stdout)
        # No --port or --public-url given: the links name the port the running server picked.
        links = room["links"]
        assert links["spectator"] == f"{relay.http_url}/watch#{room['spectator']}"
        assert links["player"] == f"{relay.http_url}/table#{room['player']}"

        page.goto(links["spectator"])
        expect(page.locator("#status")).to_have_text("Live", timeout=10_000)

        table = page.context.new_page()
        table.on("pageerror", lambda exc: page_problems.errors.append(f"table uncaught: {exc}"))
        table.goto(links["player"])
        table.locator("#name").fill("Ana")
        table.locator("#join-button").click()
        expect(table.locator("#status")).to_have_text("Live", timeout=10_000)
        table.select_option("#system", "dice")
        table.locator("#f-formula").fill("3d6+2")
        table.locator("#label").fill("From the wheel")
        table.locator("#roll-button").click()

        card = page.locator("#feed > article", has_text="From the wheel")
        expect(card).to_be_visible(timeout=5000)
        expect(card).to_contain_text("Ana")
        # Dice rolled by the server and drawn by the page: three d6 and a total from 5 to 20.
        expect(card.get_by_role("img", name=re.compile(r"^d6 showing [1-6]$"))).to_have_count(3)
        total = re.search(r"= (\d+)$", card.get_attribute("aria-label") or "")
        assert total is not None, card.get_attribute("aria-label")
        assert 5 <= int(total.group(1)) <= 20
        # The Foundry module installs from the wheel's relay too: its manifest and a zip with its files.
        with urllib.request.urlopen(f"{relay.http_url}/foundry/module.json", timeout=30) as response:
            manifest = json.loads(response.read())
        assert manifest["download"] == f"{relay.http_url}/foundry/tablerelay.zip"
        with urllib.request.urlopen(manifest["download"], timeout=30) as response:
            names = zipfile.ZipFile(io.BytesIO(response.read())).namelist()
        assert {
            "module.json",
            "scripts/tablerelay.mjs",
            "lib/tablerelay.mjs",
            "lib/msgpack/index.mjs",
        } <= set(names)
        assert not any(name.startswith("test/") for name in names)
        # The server stops while the pages are still open (they are screenshotted afterwards).
        page_problems.allowed.append("ERR_CONNECTION_REFUSED")
    assert not (data / "serving.json").exists(), "the stopped server left its address behind"
