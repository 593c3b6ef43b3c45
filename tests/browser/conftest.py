"""Browser fixtures: one relay for the package, the system Chromium driven by Playwright, a page per test.

Chromium comes from the system (/usr/bin/chromium, see scripts/setup.d/chromium.sh); Playwright never
downloads a browser here. Every test leaves a screenshot in test-artifacts/browser/ and fails if the
page threw an uncaught error or logged one to the console.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Playwright, sync_playwright

from tests.browser.relay_process import ROOT, Relay, WireClient, running_relay

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = ROOT / "test-artifacts" / "browser"


@pytest.fixture(scope="package")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relay]:
    with running_relay(tmp_path_factory.mktemp("browser-relay")) as server:
        yield server


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run scripts/setup.d/chromium.sh"
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield browser
    browser.close()


@pytest.fixture
def room(relay: Relay, request: pytest.FixtureRequest) -> dict[str, str]:
    return relay.create_room(f"Browser {request.node.name}"[:60])


class PageProblems:
    """Errors the page reported; a test that expects some (a server going away) names them in ``allowed``."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.allowed: list[str] = []

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(a in e for a in self.allowed)]


@pytest.fixture
def page_problems() -> PageProblems:
    return PageProblems()


def _artifact_name(nodeid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid.split("::", 1)[-1]).strip("_")


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest, page_problems: PageProblems) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="dark")
    page = context.new_page()
    page.on("pageerror", lambda exc: page_problems.errors.append(f"uncaught: {exc}"))
    page.on(
        "console",
        lambda msg: (
            page_problems.errors.append(f"console.error: {msg.text}") if msg.type == "error" else None
        ),
    )
    yield page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        shot = ARTIFACTS / f"{_artifact_name(request.node.nodeid)}.png"
        page.screenshot(path=str(shot), full_page=True, animations="disabled")
    finally:
        context.close()
    problems = page_problems.unexpected()
    assert not problems, "the page reported errors:\n" + "\n".join(problems)


@pytest.fixture
def clients(relay: Relay) -> Iterator[list[WireClient]]:
    """Python protocol clients a test opens; closed afterwards."""
    opened: list[WireClient] = []
    yield opened
    for client in opened:
        client.close()


@pytest.fixture
def wire(relay: Relay, clients: list[WireClient]):  # type: ignore[no-untyped-def]
    """``wire(token, name)`` opens a Python protocol client to the package's relay."""

    def open_client(token: str, name: str | None = None) -> WireClient:
        client = WireClient(relay.ws_url, token, name)
        clients.append(client)
        return client

    return open_client
