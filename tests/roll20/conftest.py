"""The Roll20 bridge in real Chromium: each player is a browser with the bridge (the built extension, or
the userscript under a userscript manager's storage), on the stand-in Roll20 editor page, against a real
relay process.

The bridge is built by the ``roll20_build`` fixture (``node build.mjs``), so every run tests the current
source; its npm packages come from scripts/setup.d/roll20.sh.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from tests.browser.conftest import CHROMIUM
from tests.browser.relay_process import ROOT, Relay, WireClient, running_relay
from tests.roll20.fake_server import FakeRoll20, serving

ROLL20 = ROOT / "clients" / "roll20"
ARTIFACTS = ROOT / "test-artifacts" / "roll20"
# The stand-in page is served from 127.0.0.1; the test build adds it to the bridge's matches.
TEST_MATCH = "http://127.0.0.1/editor*"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def roll20_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    node = shutil.which("node")
    assert node is not None, "node (20+) is needed to build the Roll20 bridge"
    assert (ROLL20 / "node_modules" / "esbuild").is_dir(), "run scripts/setup.d/roll20.sh first"
    out = tmp_path_factory.mktemp("roll20-build")
    proc = subprocess.run(
        [node, "build.mjs", "--out", str(out), "--extra-match", TEST_MATCH],
        cwd=ROLL20,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"the bridge did not build:\n{proc.stdout}\n{proc.stderr}"
    manifest = json.loads((out / "chromium" / "manifest.json").read_text())
    assert TEST_MATCH in manifest["content_scripts"][0]["matches"]
    return out


@pytest.fixture(scope="package")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relay]:
    with running_relay(tmp_path_factory.mktemp("roll20-relay")) as server:
        yield server


@pytest.fixture(scope="package")
def fake_roll20() -> Iterator[FakeRoll20]:
    with serving() as server:
        yield server


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run scripts/setup.d/chromium.sh"
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    yield browser
    browser.close()


@pytest.fixture
def room(relay: Relay, request: pytest.FixtureRequest) -> dict[str, str]:
    return relay.create_room(f"Roll20 {request.node.name}"[:60])


@pytest.fixture
def wire(relay: Relay) -> Iterator[Callable[..., WireClient]]:
    """``wire(token, name)``: a Python protocol client (another player's client, not a bridge)."""
    opened: list[WireClient] = []

    def open_client(token: str, name: str | None = None) -> WireClient:
        client = WireClient(relay.ws_url, token, name)
        opened.append(client)
        return client

    yield open_client
    for client in opened:
        client.close()


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


class Player:
    """One person at the Roll20 table: a browser of their own with the bridge, and their Roll20 page.

    ``sent`` is everything their Roll20 page's send handler received, across reloads: what the bridge
    posted as them, and whatever else reached Roll20 (a ``!tr`` there would be a failure to intercept).
    """

    def __init__(
        self,
        context: BrowserContext,
        fake: FakeRoll20,
        name: str,
        gm: bool,
        game: str,
        *,
        report: bool = True,
    ) -> None:
        self.context = context
        self.fake = fake
        self.name = name
        self.gm = gm
        self.game = game
        self.sent: list[str] = []
        self.errors: list[str] = []
        self.allowed: list[str] = []
        self.page: Page | None = None
        #: The extension's id (extension build only), and a reader of the bridge's own storage.
        self.extension_id: str | None = None
        self.extension_eval: Callable[[str, Any], Any] | None = None
        self.read_storage: Callable[[], dict[str, Any]] = dict
        if report:
            context.expose_function("roll20Sent", lambda who, text: self.sent.append(text))

    @property
    def url(self) -> str:
        return f"{self.fake.url}/editor/?player={self.name}&gm={int(self.gm)}&game={self.game}"

    def open(self) -> Page:
        if self.page is None or self.page.is_closed():
            self.page = self.context.new_page()
            self.page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
            self.page.on(
                "console",
                lambda msg: self.errors.append(f"console.error: {msg.text}") if msg.type == "error" else None,
            )
        self.page.goto(self.url)
        return self.page

    def badge(self) -> Any:
        assert self.page is not None
        return self.page.locator("#tablerelay-overlay .badge")

    def shown(self) -> list[dict[str, Any]]:
        """The messages this player's Roll20 chat shows, as the stand-in page drew them."""
        assert self.page is not None
        shown: list[dict[str, Any]] = self.page.evaluate("window.fakeRoll20.shown")
        return shown

    def shown_text(self) -> str:
        assert self.page is not None
        return str(self.page.locator("#textchat .content").inner_text())

    def rolled_by_roll20(self) -> int:
        """Inline rolls Roll20 would have rolled itself (anything but a constant): must stay 0."""
        assert self.page is not None
        return int(self.page.evaluate("window.fakeRoll20.rolled"))

    def wait_shown(
        self, predicate: Callable[[dict[str, Any]], bool], count: int = 1, timeout: float = 8.0
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            found = [m for m in self.shown() if predicate(m)]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            assert self.page is not None
            self.page.wait_for_timeout(50)

    def type_in_chat(self, text: str, *, press_enter: bool = True) -> None:
        assert self.page is not None
        box = self.page.locator("#textchat-input textarea")
        box.fill(text)
        if press_enter:
            box.press("Enter")
        else:
            self.page.locator("#chatSendBtn").click()

    def screenshot(self, name: str) -> None:
        if self.page is None or self.page.is_closed():
            return
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"{_safe(name)}.png"))

    def problems(self) -> list[str]:
        return [e for e in self.errors if not any(a in e for a in self.allowed)]


def tag_of(room: dict[str, str], epoch: str, seq: int, slot: str = "") -> str:
    """The Relay field's text for an event (clients/roll20/src/chatline.js eventTag)."""
    suffix = {"": "", "sealed": " sealed", "gm": " gm"}[slot]
    return f"{room['room'][:8]}.{epoch[:4]} #{seq}{suffix}"


def has_tag(tag: str) -> Callable[[dict[str, Any]], bool]:
    pattern = re.compile(re.escape(tag) + r"(?![0-9]|\s(?:sealed|gm)\b)")

    def check(message: dict[str, Any]) -> bool:
        body = re.sub(r"&#(\d+);", lambda m: chr(int(m.group(1))), str(message["body"]))
        return bool(pattern.search(body))

    return check


# A userscript manager, as far as the userscript needs one: it runs the script at document-idle (@run-at)
# inside a function whose variables are the granted APIs (GM.getValue/GM.setValue, backed by the test so the
# storage lives outside the page and survives reloads, as a manager's does). Nothing is put on the window.
MANAGER = """document.addEventListener("DOMContentLoaded", () => {
  const GM = Object.freeze({
    getValue: (key) => window.__trGmGet(key),
    setValue: (key, value) => window.__trGmSet(key, value),
  });
  const GM_registerMenuCommand = () => {};
  // --- the userscript ---
%s
});
"""


class Table:
    """The players of one Roll20 game, each with the bridge built as ``kind`` (extension or userscript)."""

    def __init__(
        self,
        kind: str,
        profiles: ExtensionProfiles,
        browser: Browser,
        build: Path,
        fake: FakeRoll20,
        game: str,
    ) -> None:
        self.kind = kind
        self.profiles = profiles
        self.browser = browser
        self.build = build
        self.fake = fake
        self.game = game
        self.players: list[Player] = []

    def join(
        self, name: str, *, gm: bool = False, settings: dict[str, Any] | None = None, open_page: bool = True
    ) -> Player:
        if settings is not None:
            settings = {"name": name, **settings}
        if self.kind == "extension":
            player = self._extension_player(name, gm, settings)
        else:
            player = self._userscript_player(name, gm, settings)
        self.players.append(player)
        if open_page:
            player.open()
        return player

    def _extension_player(self, name: str, gm: bool, settings: dict[str, Any] | None) -> Player:
        profile = self.profiles.lend(name)
        player = Player(profile.context, self.fake, name, gm, self.game, report=False)
        profile.sent_to = player.sent
        player.extension_id = profile.extension_id
        player.extension_eval = profile.extension_eval
        player.read_storage = lambda: dict(
            profile.extension_eval("() => chrome.storage.local.get(null)", None)
        )
        # Whatever an earlier test left in the extension's storage goes; this test's settings come in.
        profile.extension_eval(
            """async (s) => {
              await chrome.storage.local.clear();
              if (s) await chrome.storage.local.set({ settings: s });
            }""",
            settings,
        )
        return player

    def _userscript_player(self, name: str, gm: bool, settings: dict[str, Any] | None) -> Player:
        context = self.browser.new_context(viewport={"width": 1280, "height": 800})
        store: dict[str, Any] = {}
        if settings is not None:
            store["settings"] = json.dumps(settings)
        context.expose_function("__trGmGet", lambda key: store.get(key))
        context.expose_function("__trGmSet", lambda key, value: store.__setitem__(key, value))
        script = (self.build / "tablerelay-roll20.user.js").read_text()
        context.add_init_script(script=MANAGER % script)
        player = Player(context, self.fake, name, gm, self.game)
        player.read_storage = lambda: {k: json.loads(v) for k, v in store.items()}
        return player

    def wait(self, seconds: float) -> None:
        """Let time pass while Playwright answers the pages (see ``until``)."""
        page = next((p.page for p in self.players if p.page is not None and not p.page.is_closed()), None)
        if page is None:
            time.sleep(seconds)
        else:
            page.wait_for_timeout(seconds * 1000)

    def close(self, test_name: str) -> list[str]:
        problems: list[str] = []
        for player in self.players:
            player.screenshot(f"{test_name}-{self.kind}-{player.name}")
            problems += [f"{player.name}: {p}" for p in player.problems()]
            if self.kind == "extension":
                self.profiles.give_back(player.name)
            else:
                player.context.close()
        return problems


class ExtensionProfile:
    """A browser profile with the built extension loaded, kept for the package: starting Chromium with an
    extension costs a second or more, so each player name gets one, lent to one test at a time: its pages
    are closed and the network restored when it is given back, its storage cleared when it is lent."""

    def __init__(self, playwright: Playwright, build: Path, profile_dir: Path) -> None:
        ext = build / "chromium"
        self.context = playwright.chromium.launch_persistent_context(
            str(profile_dir),
            executable_path=CHROMIUM,
            args=[*ARGS, f"--disable-extensions-except={ext}", f"--load-extension={ext}"],
            viewport={"width": 1280, "height": 800},
        )
        workers = self.context.service_workers
        worker = workers[0] if workers else self.context.wait_for_event("serviceworker")
        self.extension_id = worker.url.split("/")[2]
        self.sent_to: list[str] = []
        self.context.expose_function("roll20Sent", lambda who, text: self.sent_to.append(text))

    def extension_eval(self, script: str, arg: Any) -> Any:
        """Run ``script`` in an extension page (the popup), where chrome.storage, tabs and action exist."""
        page = self.context.new_page()
        try:
            page.goto(f"chrome-extension://{self.extension_id}/popup.html")
            return page.evaluate(script, arg)
        finally:
            page.close()

    def wipe(self) -> None:
        """Close the test's pages and bring the network back; the storage is cleared when lent again."""
        for page in self.context.pages:
            page.close()
        self.context.set_offline(False)


class ExtensionProfiles:
    def __init__(self, playwright: Playwright, build: Path, root: Path) -> None:
        self.playwright = playwright
        self.build = build
        self.root = root
        self.idle: dict[str, ExtensionProfile] = {}
        self.lent: dict[str, ExtensionProfile] = {}

    def lend(self, name: str) -> ExtensionProfile:
        assert name not in self.lent, f"two players named {name} in one test"
        profile = self.idle.pop(name, None) or ExtensionProfile(self.playwright, self.build, self.root / name)
        self.lent[name] = profile
        return profile

    def give_back(self, name: str) -> None:
        profile = self.lent.pop(name)
        profile.wipe()
        profile.sent_to = []
        self.idle[name] = profile

    def close(self) -> None:
        for profile in [*self.idle.values(), *self.lent.values()]:
            profile.context.close()


@pytest.fixture(scope="package")
def extension_profiles(
    playwright: Playwright, roll20_build: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ExtensionProfiles]:
    profiles = ExtensionProfiles(playwright, roll20_build, tmp_path_factory.mktemp("roll20-profiles"))
    yield profiles
    profiles.close()


@pytest.fixture(params=["extension", "userscript"])
def table(
    request: pytest.FixtureRequest,
    extension_profiles: ExtensionProfiles,
    browser: Browser,
    roll20_build: Path,
    fake_roll20: FakeRoll20,
) -> Iterator[Table]:
    game = _safe(request.node.name)
    t = Table(request.param, extension_profiles, browser, roll20_build, fake_roll20, game)
    yield t
    problems = t.close(request.node.name)
    assert not problems, "the pages reported errors:\n" + "\n".join(problems)


def settings_for(relay: Relay, token: str, post: str = "mine", fallback_delay: int = 400) -> dict[str, Any]:
    return {"relayUrl": relay.ws_url, "token": token, "post": post, "fallbackDelay": fallback_delay}


def until(table: Table, check: Callable[[], Any], timeout: float = 8.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds.

    It waits through Playwright (``Table.wait``), never ``time.sleep``: the pages' calls into the test
    (the userscript manager's storage, the stand-in's report of what was sent) are answered only while the
    test is inside a Playwright call.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        table.wait(0.05)
