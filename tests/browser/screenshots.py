"""Makes the screenshots in docs/images/ from a real relay and real rolls (not a test; run it by hand):

    .venv/bin/python -m tests.browser.screenshots [OUTPUT_DIR] [--only NAME.png ...]

The dice are real, so every run shows different faces.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Browser, Page, sync_playwright

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.browser.relay_process import ROOT, Relay, WireClient, running_relay


def scene(relay: Relay, room: dict[str, str]) -> list[WireClient]:
    gm = WireClient(relay.ws_url, room["gm"], "Mercer")
    ana = WireClient(relay.ws_url, room["player"], "Ana")
    bo = WireClient(relay.ws_url, room["player"], "Bo")
    cy = WireClient(relay.ws_url, room["player"], "Cy")
    gm.resource("fear", "gain", 3)
    gm.resource("hope", "gain", 2, participant=ana.welcome["you"]["id"])
    gm.resource("hope", "gain", 4, participant=bo.welcome["you"]["id"])
    cy.roll(
        {"system": "nexus.test", "attribute_die": "d8", "skill_rank": 2, "difficulty": "hard"},
        label="Pick the lock",
    )
    cy.roll({"system": "honors_edge.skill", "attribute": 3, "skill": 3, "tn": 20}, label="Iaijutsu strike")
    gm.roll(
        {
            "system": "daggerheart.attack",
            "modifier": 4,
            "targets": [{"name": "Ana", "evasion": 13}, {"name": "Bo", "evasion": 11}],
        },
        label="Ogre sweeps its club",
    )
    secret = gm.roll({"system": "dice", "formula": "1d100"}, "gm", "Wandering monster check")
    bo.roll(
        {
            "system": "drawsteel.ability",
            "characteristics": {"M": 2, "A": 1, "R": 0, "I": 0, "P": 1},
            "roll_with": "M",
            "tiers": ["3 + M damage", "6 + M damage; push 1", "9 + M damage; push 3"],
            "edges": 1,
            "targets": [{"name": "Goblin"}, {"name": "Ogre", "banes": 1}],
        },
        label="Sweeping strike",
    )
    gm.reveal(secret["seq"])
    ana.roll({"system": "nexus.check", "kind": "durability", "die": "d6"}, "blind", "Does the rope hold?")
    ana.roll({"system": "daggerheart.duality", "modifier": 2, "difficulty": 14}, label="Leap the chasm")
    return [gm, ana, bo, cy]


def shoot(browser: Browser, url: str, path: Path, width: int, height: int, transparent: bool = False) -> None:
    context = browser.new_context(viewport={"width": width, "height": height}, reduced_motion="reduce")
    page: Page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#status[data-status=open]", state="attached")
    time.sleep(0.8)
    page.screenshot(path=str(path), omit_background=transparent)
    context.close()
    print(path)


def main() -> None:
    args = sys.argv[1:]
    only = {args[i + 1] for i, a in enumerate(args[:-1]) if a == "--only"}
    positional = [a for i, a in enumerate(args) if a != "--only" and (i == 0 or args[i - 1] != "--only")]
    out = Path(positional[0]) if positional else ROOT / "docs" / "images"
    out.mkdir(parents=True, exist_ok=True)

    def wanted(name: str) -> bool:
        return not only or name in only

    with tempfile.TemporaryDirectory() as tmp, running_relay(Path(tmp)) as relay, sync_playwright() as pw:
        room = relay.create_room("The Sunken Keep")
        clients = scene(relay, room)
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        watch = f"{relay.http_url}/watch#{room['spectator']}"
        shots = [
            (watch, "watch-feed.png", 1280, 1000, False),
            (
                f"{relay.http_url}/watch?overlay=1&limit=3#{room['spectator']}",
                "watch-overlay.png",
                560,
                1000,
                True,
            ),
            # The OBS browser source of docs/clients.md: the last three rolls, Hope but no Fear.
            (
                f"{relay.http_url}/watch?overlay=1&last=3&fear=0#{room['spectator']}",
                "watch-overlay-stream.png",
                560,
                1000,
                True,
            ),
            (watch, "watch-phone.png", 390, 844, False),
            (f"{relay.http_url}/table?name=Mercer#{room['gm']}", "table-gm.png", 1500, 1000, False),
        ]
        for url, name, width, height, transparent in shots:
            if wanted(name):
                shoot(browser, url, out / name, width, height, transparent)
        browser.close()
        for client in clients:
            client.close()


if __name__ == "__main__":
    main()
