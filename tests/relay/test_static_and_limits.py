"""Static file routes (no traversal) and the per-connection token bucket."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from relay import static
from relay.ratelimit import TokenBucket


@pytest.fixture
def root(tmp_path: Path) -> Path:
    clients = tmp_path / "clients"
    (clients / "web").mkdir(parents=True)
    (clients / "js" / "node_modules" / "@msgpack" / "msgpack" / "dist.esm").mkdir(parents=True)
    (clients / "web" / "watch.html").write_text("<p>watch</p>")
    (clients / "web" / "app.css").write_text("p{}")
    (clients / "web" / "notes.txt").write_text("not served")
    (clients / "js" / "client.js").write_text("export {}")
    (clients / "js" / "node_modules" / "@msgpack" / "msgpack" / "dist.esm" / "index.mjs").write_text(
        "export {}"
    )
    (tmp_path / "secret.js").write_text("secret")
    os.symlink(tmp_path / "secret.js", clients / "web" / "escape.js")
    return clients


def test_routes(root: Path) -> None:
    assert static.resolve("/watch", root) == (root / "web" / "watch.html").resolve()
    assert static.resolve("/table", root) is None, "not there: the server answers 404"
    assert static.resolve("/web/app.css", root) == (root / "web" / "app.css").resolve()
    assert static.resolve("/js/client.js", root) == (root / "js" / "client.js").resolve()
    vendor = static.resolve("/vendor/msgpack/index.mjs", root)
    assert vendor is not None
    assert vendor.name == "index.mjs"
    assert static.content_type(vendor).startswith("text/javascript")
    assert static.content_type(root / "web" / "app.css").startswith("text/css")


@pytest.mark.parametrize(
    "path",
    [
        "/web/../js/client.js",
        "/web/%2e%2e/js/client.js",
        "/web/..%2fjs/client.js",
        "/js/../../secret.js",
        "/web//etc/passwd",
        "/web/",
        "/web/notes.txt",
        "/web/escape.js",
        "/web/missing.js",
        "/web/a\\..\\b.js",
        "/web/%00.js",
        "/other/client.js",
    ],
)
def test_nothing_outside_the_mapped_folders(root: Path, path: str) -> None:
    assert static.resolve(path, root) is None


def test_token_bucket_allows_a_burst_then_the_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=10, burst=5, clock=lambda: now[0])
    assert [bucket.allow() for _ in range(7)] == [True] * 5 + [False] * 2
    now[0] += 0.1
    assert bucket.allow()
    assert not bucket.allow()
    assert not bucket.abusive


def test_a_client_that_keeps_flooding_becomes_abusive() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=10, burst=5, clock=lambda: now[0])
    for _ in range(5 + 50):
        bucket.allow()
    assert not bucket.abusive, "one burst past the limit is only refused"
    for _ in range(200):
        now[0] += 0.001
        bucket.allow()
    assert bucket.abusive
    now[0] += 60
    assert bucket.allow()
    assert not bucket.abusive, "backing off clears the record"
