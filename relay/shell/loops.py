"""Which asyncio event loop ``tablerelay serve`` runs on: uvloop when it is installed, else the standard one.

uvloop (libuv under asyncio's interfaces) does a loop iteration, a callback and a socket write in C where
the standard loop does them in Python; the server's code is the same on both. ``event_loop`` in the
settings (``TABLERELAY_EVENT_LOOP``) chooses: ``auto`` (uvloop if it can be imported, the fallback where
it cannot, e.g. on Windows or a Python it has no wheel for), ``uvloop`` (refuse to start without it) or
``asyncio``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

CHOICES = ("auto", "uvloop", "asyncio")

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


class LoopUnavailable(ValueError):
    """``event_loop = "uvloop"`` where uvloop cannot be imported; the message says what to do."""


def factory(choice: str) -> tuple[str, LoopFactory | None]:
    """(the loop's name, a factory for it, or None for asyncio's default) for the setting ``choice``."""
    if choice not in CHOICES:
        raise ValueError(f"event_loop must be one of {', '.join(CHOICES)}; got {choice!r}.")
    if choice == "asyncio":
        return "asyncio", None
    try:
        import uvloop
    except ImportError as exc:
        if choice == "uvloop":
            raise LoopUnavailable(
                "event_loop is uvloop but uvloop is not installed; install it or set event_loop = auto."
            ) from exc
        return "asyncio", None
    return "uvloop", uvloop.new_event_loop
