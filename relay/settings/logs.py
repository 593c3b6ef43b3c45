"""structlog set-up: JSON lines on stderr in production, readable lines in a terminal.

One event name per call, values as keys. Context bound with ``structlog.contextvars`` (the connection and
request ids) is merged into every line. Tracebacks are rendered as plain text without local variables, so
a hidden roll's values held in a frame's locals can never reach a log line.
"""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar
from typing import Any, TextIO

import structlog

#: The request (frame) being handled, set once per frame; a plain ContextVar costs far less per frame
#: than binding through structlog.contextvars, and callbacks scheduled while handling it inherit it.
REQUEST: ContextVar[str | None] = ContextVar("tablerelay_request", default=None)


def add_request(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:  # noqa: ARG001
    request = REQUEST.get()
    if request is not None:
        event.setdefault("request", request)
    return event


#: Bumped by ``configure`` so the loggers below re-bind to the new configuration.
_generation = 0
#: The level ``configure`` set; ``debug_enabled`` lets a hot path skip building a debug line's values.
_level = logging.INFO


def debug_enabled() -> bool:
    return _level <= logging.DEBUG


class Logger:
    """A module's logger, bound once per ``configure`` instead of once per call.

    structlog's ``get_logger`` returns a lazy proxy that builds a fresh bound logger (and its output
    logger) on every call, which costs more than the log line itself on the hot path, and as much for a
    debug line that the level then drops. This binds once and re-binds only after ``configure``, so a
    call whose level is disabled is one attribute lookup and a no-op.
    """

    __slots__ = ("_bound", "_generation", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._bound: Any = None
        self._generation = -1

    def __getattr__(self, method: str) -> Any:
        if self._generation != _generation:
            self._bound = structlog.get_logger(self._name).bind()
            self._generation = _generation
        return getattr(self._bound, method)


def get_logger(name: str) -> Logger:
    return Logger(name)


LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def use_json(log_format: str, stream: TextIO) -> bool:
    if log_format == "json":
        return True
    if log_format == "console":
        return False
    isatty = getattr(stream, "isatty", None)
    return not (isatty is not None and isatty())


def configure(log_format: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    global _generation, _level
    stream = stream if stream is not None else sys.stderr
    if level not in LEVELS:
        raise ValueError(f"log_level must be one of {', '.join(LEVELS)}; got {level!r}.")
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        add_request,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: list[Any]
    if use_json(log_format, stream):
        renderer = [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        renderer = [structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)]
    structlog.configure(
        processors=[*shared, *renderer],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    # Libraries (websockets) log through the standard library: format their lines the same way.
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        )
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    _level = LEVELS[level]
    _generation += 1
