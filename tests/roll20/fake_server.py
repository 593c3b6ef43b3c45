"""The stand-in for Roll20's servers: it serves the stand-in editor page and carries each game's chat.

``/editor/`` is the page (fake_roll20/editor/), the address the bridge's content script matches.
``/chat/GAME`` keeps the game's messages: pages POST what they send and poll ``?after=N`` for what is new,
so the pages of one game (even in separate browser processes, one per player) share a chat as Roll20's
players do.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

PAGE_ROOT = Path(__file__).parent / "fake_roll20"


@dataclass
class Chats:
    games: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, game: str, message: dict[str, Any]) -> None:
        with self.lock:
            messages = self.games.setdefault(game, [])
            messages.append({**message, "n": len(messages) + 1})

    def after(self, game: str, n: int) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.games.get(game, [])[n:])


class Handler(SimpleHTTPRequestHandler):
    chats: Chats

    def __init__(self, *args: Any, chats: Chats, **kwargs: Any) -> None:
        self.chats = chats
        super().__init__(*args, directory=str(PAGE_ROOT), **kwargs)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path.startswith("/chat/"):
            after = int(parse_qs(url.query).get("after", ["0"])[0])
            self._json(self.chats.after(unquote(url.path[len("/chat/") :]), after))
            return
        super().do_GET()

    def do_POST(self) -> None:
        url = urlparse(self.path)
        if not url.path.startswith("/chat/"):
            self.send_error(404)
            return
        length = int(self.headers.get("Content-Length", "0"))
        self.chats.add(unquote(url.path[len("/chat/") :]), json.loads(self.rfile.read(length)))
        self._json({"ok": True})

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def _json(self, value: Any) -> None:
        body = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        # A page polling its chat may be closed mid-answer (a test ends): nothing to report.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@dataclass
class FakeRoll20:
    url: str
    chats: Chats


@contextlib.contextmanager
def serving() -> Iterator[FakeRoll20]:
    chats = Chats()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, chats=chats))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield FakeRoll20(f"http://127.0.0.1:{server.server_address[1]}", chats)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
