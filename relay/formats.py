"""Foundry VTT and Roll20 renderings of a roll, added to full roll events for clients that ask for them.

``rules.render`` is imported lazily: when it (or one of its functions) is missing, events go out without
that rendering and one warning is logged, so the relay keeps working while the renderers are absent.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import msgpack

from relay.logs import get_logger
from relay.protocol import event_values

log = get_logger("relay.formats")

_cache: dict[str, Callable[..., Any] | None] = {}
_labels: dict[Callable[..., Any], bool] = {}


def _renderer(name: str) -> Callable[..., Any] | None:
    if name in _cache:
        return _cache[name]
    fn: Callable[..., Any] | None = None
    try:
        module = importlib.import_module("rules.render")
        candidate = getattr(module, name, None)
        fn = candidate if callable(candidate) else None
    except ImportError:
        fn = None
    if fn is None:
        log.warning("renderer_missing", renderer=f"rules.render.{name}")
    _cache[name] = fn
    return fn


def _takes_label(fn: Callable[..., Any]) -> bool:
    """Whether the Foundry renderer takes the roll's label (as the message flavor)."""
    cached = _labels.get(fn)
    if cached is None:
        try:
            cached = "label" in inspect.signature(fn).parameters
        except (TypeError, ValueError):
            cached = False
        _labels[fn] = cached
    return cached


def revealed_roll(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """The roll a record shows: itself, or for a reveal the roll its blob opens, now public."""
    if record["kind"] != "reveal":
        return record
    body: dict[str, Any] = msgpack.unpackb(record["blob"], raw=False)
    return {**body, "visibility": "public"}


def renderings(record: Mapping[str, Any], formats: frozenset[str], gm_ids: list[str]) -> dict[str, Any]:
    """``{"foundry": ..., "roll20": ...}`` for the requested formats that can be rendered.

    A reveal is rendered as the roll it opens, shown to everyone: a VTT turns its sealed card into that roll.
    """
    out: dict[str, Any] = {}
    record = revealed_roll(record)
    # The renderers compute with the rules core's numbers; what they return goes on the wire without floats
    # (and a rendering that is not plain data is left out, logged, like one that failed).
    result = record.get("rules_result", record["result"])
    if "foundry" in formats:
        fn = _renderer("to_foundry_message")
        if fn is not None:
            try:
                extra = {"label": record["label"]} if _takes_label(fn) else {}
                rendered = fn(result, record["visibility"], gm_ids, record["actor"]["id"], **extra)
                out["foundry"] = event_values(rendered)
            except Exception:
                log.exception("render_failed", format="foundry", seq=record["seq"])
    if "roll20" in formats:
        fn = _renderer("to_roll20")
        if fn is not None:
            try:
                out["roll20"] = event_values(fn(result))
            except Exception:
                log.exception("render_failed", format="roll20", seq=record["seq"])
    return out
