"""The Foundry module's fair dice marks and alarm banner in Chromium, with the module's stylesheet.

No Foundry runs here (docs/foundry.md), so the page is a plain one with the module's stylesheet
(``clients/foundry/styles/tablerelay.css``) and its HTML functions (``scripts/ui.mjs``, which imports nothing)
over lang/en.json: each verdict's icon is drawn (SVG with a size, not a glyph), its explanation is the title
on hover and opens on a click (a tap), a failed verdict and the banner are red. What the relay's verdicts are
is tested in clients/foundry/test (fairness.test.mjs, against a real relay); this is how they look. A
screenshot lands in test-artifacts/.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

from tests.browser.conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS
from tests.browser.relay_process import ROOT
from tests.browser.test_foundry_ui import LOCALIZER, english

pytestmark = pytest.mark.slow

FOUNDRY = ROOT / "clients" / "foundry"
VERDICTS = ["awaiting seed", "fair", "unwitnessed", "sealed", "failed"]

PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>{css}
body {{ background: #e8e4da; color: #191813; font-family: sans-serif; margin: 0; width: 720px; }}
.chat {{ padding: 120px 8px 8px; width: 320px; }}
.msg {{ border: 1px solid #a49c8a; border-radius: 3px; padding: 6px; margin-bottom: 8px;
  background: #f0ede4; }}
</style></head><body><div class="chat" id="chat"></div></body></html>"""


@pytest.fixture
def page() -> Iterator[Page]:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run scripts/setup.d/chromium.sh"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 720, "height": 720})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield page
        browser.close()
        assert not errors, errors


def test_each_verdict_draws_its_svg_icon_explains_itself_and_the_alarm_banner_is_red(page: Page) -> None:
    page.set_content(PAGE.format(css=(FOUNDRY / "styles" / "tablerelay.css").read_text()))
    page.add_script_tag(
        content=(FOUNDRY / "scripts" / "ui.mjs").read_text()
        + LOCALIZER.format(strings=json.dumps(english()))
        + "\nwindow.tablerelayUI = { fairMarkHTML, alarmBannerHTML };",
        type="module",
    )
    page.wait_for_function("window.tablerelayUI !== undefined")
    page.evaluate(
        """(verdicts) => {
          const ui = window.tablerelayUI;
          const i18n = window.tablerelayI18n;
          const j = (verdict) => ({ verdict, reason: "recomputed from seed 1 and 1 witness value",
            witnesses: verdict === "fair" ? 1 : 0, n: 1 });
          const mark = (v) => `<div data-tablerelay-fair>${ui.fairMarkHTML(j(v), i18n)}</div>`;
          document.getElementById("chat").innerHTML = verdicts
            .map((v) => `<div class="msg">2d6 + 1 = 8${mark(v)}</div>`)
            .join("");
          const banner = document.createElement("div");
          banner.id = "tablerelay-alarm";
          banner.innerHTML = ui.alarmBannerHTML(
            [{ message: "The server's dice seed 1 does not match what it committed to.", seq: 4 }], i18n);
          document.body.append(banner);
        }""",
        VERDICTS,
    )
    marks = page.locator("[data-tablerelay-fair] details")
    assert marks.count() == len(VERDICTS)
    colours = {}
    for i, verdict in enumerate(VERDICTS):
        mark = marks.nth(i)
        assert mark.get_attribute("data-verdict") == verdict
        icon = mark.locator("summary svg.tablerelay-fair-icon")
        box = icon.bounding_box()
        assert box is not None, verdict
        assert (box["width"], box["height"]) == (12, 12), (verdict, box)
        # The icon is stroked in the mark's colour, so it is seen: not the default black of a missing style.
        colours[verdict] = icon.evaluate("(el) => getComputedStyle(el).color")
        title = mark.locator("summary").get_attribute("title") or ""
        assert len(title) > 40, (verdict, title)
        note = mark.locator(".tablerelay-fair-note")
        assert not note.is_visible(), verdict
        mark.locator("summary").click()
        assert note.is_visible(), verdict
        assert note.inner_text() == title
    assert colours["failed"] == "rgb(179, 38, 30)", colours
    assert colours["fair"] == "rgb(58, 125, 68)", colours
    assert len(set(colours.values())) >= 4, "fair, awaiting, grey and red look different"
    assert marks.nth(1).locator(".tablerelay-fair-word").inner_text() == "fair · 1 witness"

    banner = page.locator("#tablerelay-alarm .tablerelay-alarm")
    assert banner.is_visible()
    assert banner.get_attribute("role") == "alert"
    background = banner.evaluate("(el) => getComputedStyle(el).backgroundColor")
    assert background == "rgb(179, 38, 30)", background
    assert "Fairness alarm" in banner.inner_text()
    assert "seed 1 does not match" in banner.inner_text()
    alarm_icon = banner.locator("svg.tablerelay-fair-icon").bounding_box()
    assert alarm_icon is not None
    assert alarm_icon["width"] == 18
    assert banner.locator("button[data-action=dismiss]").is_visible()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "foundry-fair-marks.png"))
