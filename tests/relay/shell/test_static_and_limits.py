"""Static file routes (no traversal) and the per-connection token bucket."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from relay.shell.http import static
from relay.shell.ratelimit import TokenBucket


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A served tree laid out as the build lays it out: relay/_served/{web,js,vendor/NAME}."""
    served = tmp_path / "_served"
    (served / "web").mkdir(parents=True)
    (served / "js" / "test").mkdir(parents=True)
    (served / "vendor" / "msgpack" / "utils").mkdir(parents=True)
    (served / "web" / "watch.html").write_text("<p>watch</p>")
    (served / "web" / "app.css").write_text("p{}")
    (served / "web" / "notes.txt").write_text("not served")
    (served / "js" / "tablerelay.js").write_text("export {}")
    (served / "js" / "package.json").write_text("{}")
    (served / "js" / "test" / "client.test.mjs").write_text("export {}")
    (served / "vendor" / "msgpack" / "index.mjs").write_text("export {}")
    (served / "vendor" / "msgpack" / "utils" / "int.mjs").write_text("export {}")
    (served / "vendor" / "msgpack" / ".vendored.json").write_text("{}")
    (tmp_path / "secret.js").write_text("secret")
    os.symlink(tmp_path / "secret.js", served / "web" / "escape.js")
    return served


def test_routes(root: Path) -> None:
    assert static.resolve("/watch", root) == root / "web" / "watch.html"
    assert static.resolve("/table", root) is None, "not there: the server answers 404"
    assert static.resolve("/web/app.css", root) == root / "web" / "app.css"
    assert static.resolve("/js/tablerelay.js", root) == root / "js" / "tablerelay.js"
    vendor = static.resolve("/vendor/msgpack/index.mjs", root)
    assert vendor is not None
    assert vendor.name == "index.mjs"
    assert static.resolve("/vendor/msgpack/utils/int.mjs", root) is not None
    assert static.content_type(vendor).startswith("text/javascript")
    assert static.content_type(root / "web" / "app.css").startswith("text/css")


def test_the_installed_pages_are_found_through_the_package() -> None:
    """Without a root, files come from relay/_served (a link to clients/ in this checkout)."""
    page = static.resolve("/watch")
    assert page is not None, "relay/_served/web is missing: run python scripts/build_assets.py --develop"
    assert "<html" in page.read_text(encoding="utf-8").lower()
    assert static.resolve("/vendor/msgpack/index.mjs") is not None


@pytest.mark.parametrize(
    "path",
    [
        "/web/../js/tablerelay.js",
        "/web/%2e%2e/js/tablerelay.js",
        "/web/..%2fjs/tablerelay.js",
        "/js/../../secret.js",
        "/web//etc/passwd",
        "/web/",
        "/web/notes.txt",
        "/web/escape.js",
        "/web/missing.js",
        "/web/a\\..\\b.js",
        "/web/%00.js",
        "/other/tablerelay.js",
        # Present in the folder, but not a file the js client declares (a checkout's folder holds more).
        "/js/package.json",
        "/js/test/client.test.mjs",
        "/vendor/msgpack/.vendored.json",
        "/vendor/other/index.mjs",
    ],
)
def test_nothing_outside_the_declared_files(root: Path, path: str) -> None:
    assert static.resolve(path, root) is None


def test_token_bucket_allows_a_burst_then_the_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=10, burst=5, clock=lambda: now[0])
    assert [bucket.allow() for _ in range(7)] == [True] * 5 + [False] * 2
    now[0] += 0.1
    assert bucket.allow()
    assert not bucket.allow()
    assert not bucket.abusive


def abusive(bucket: TokenBucket) -> bool:
    # Read through a call: mypy keeps an asserted property narrowed past the allow() calls that change it.
    return bucket.abusive


def test_a_client_that_keeps_flooding_becomes_abusive() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=10, burst=5, clock=lambda: now[0])
    for _ in range(5 + 50):
        bucket.allow()
    assert not abusive(bucket), "one burst past the limit is only refused"
    for _ in range(200):
        now[0] += 0.001
        bucket.allow()
    assert abusive(bucket)
    now[0] += 60
    assert bucket.allow()
    assert not abusive(bucket), "backing off clears the record"
