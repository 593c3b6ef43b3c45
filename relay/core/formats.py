"""Foundry VTT and Roll20 renderings of a roll, added to full roll events for clients that ask for them.

``rules.render`` is imported lazily: when it (or one of its functions) is missing, events go out without
that rendering and one warning is logged, so the relay keeps working while the renderers are absent.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any

import msgpack

from relay.core.protocol import event_values
from relay.settings.logs import get_logger

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


#: Where a rules result holds its terms (rules.dice.terms): the term lists, a function's arguments, a pool's
#: rolls, the results of dice and pools, a computed die's rolls.
_TREE = ("terms", "args", "rolls", "results", "number_roll", "faces_roll")
#: The fields of those that hold a number, which may be a fraction.
_NUMBERS = ("total", "result", "count")


def rules_numbers(value: Any) -> Any:
    """A roll's wire ``result`` with its fractions as numbers again, as the renderers compute with them.

    A record holds every float as JavaScript's decimal string (``protocol.event_values``, spec/signing.md);
    the numbers themselves stay beside it (``rules_result``, stored with it), but a reveal's blob holds the
    roll's event body only and an export leaves them out (``exports.UNEXPORTED``): ``with_numbers`` puts them
    back. Only a dice formula makes a fraction, and the rules core keeps it in its term tree: a total (the
    result's, a term's, a pool's roll), a pool's result, a count, a number term's value (a decimal in a
    formula). Only those are read (a game system's result has no term tree). Returns ``value`` itself when
    it holds no such string.
    """
    kind = type(value)
    if kind is list:
        items = [rules_numbers(item) for item in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if kind is not dict:
        return value
    changed: dict[str, Any] | None = None
    for key, item in value.items():
        if type(item) is str:
            if key in _NUMBERS or (key == "value" and value.get("type") == "number"):
                changed = changed or {}
                changed[key] = _decimal(item)
        elif key in _TREE:
            new = rules_numbers(item)
            if new is not item:
                changed = changed or {}
                changed[key] = new
    return {**value, **changed} if changed else value


def with_numbers(record: dict[str, Any]) -> dict[str, Any]:
    """A roll record as the room keeps one: with ``rules_result`` beside it when its result holds fractions.
    For records that come without it: an imported export (``exports.UNEXPORTED``), a reveal's blob."""
    if record.get("kind") != "roll" or "rules_result" in record or not isinstance(record.get("result"), dict):
        return record
    numbers = rules_numbers(record["result"])
    return record if numbers is record["result"] else {**record, "rules_result": numbers}


def _decimal(text: str) -> Any:
    """JavaScript's ``Number(text)`` for what ``event_values`` wrote; any other string stays as it is."""
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def revealed_roll(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """The roll a record shows: itself, or for a reveal the roll its blob opens, now public."""
    if record["kind"] != "reveal":
        return record
    body: dict[str, Any] = msgpack.unpackb(record["blob"], raw=False)
    return with_numbers({**body, "visibility": "public"})


class RenderError(Exception):
    """A roll a renderer could not render (``renderings(..., strict=True)``); says which and why."""


def _foundry(fn: Callable[..., Any], record: Mapping[str, Any], result: Any, gm_ids: list[str]) -> Any:
    extra = {"label": record["label"]} if _takes_label(fn) else {}
    return fn(result, record["visibility"], gm_ids, record["actor"]["id"], **extra)


def _roll20(fn: Callable[..., Any], _record: Mapping[str, Any], result: Any, _gm_ids: list[str]) -> Any:
    return fn(result)


#: Each format a client may ask for (``protocol.FORMATS``): its renderer in ``rules.render``, and how that
#: renderer is called.
RENDERERS = {"foundry": ("to_foundry_message", _foundry), "roll20": ("to_roll20", _roll20)}


def renderings(
    record: Mapping[str, Any], formats: frozenset[str], gm_ids: list[str], strict: bool = False
) -> dict[str, Any]:
    """``{"foundry": ..., "roll20": ...}`` for the requested formats that can be rendered.

    A reveal is rendered as the roll it opens, shown to everyone: a VTT turns its sealed card into that roll.
    A rendering that fails (or is not plain data) is left out and logged, since a card is optional; with
    ``strict`` (an import's check of rolls it did not make) it raises ``RenderError`` instead.
    """
    out: dict[str, Any] = {}
    record = revealed_roll(record)
    # The renderers compute with the rules core's numbers (a record keeps them beside it when they hold a
    # fraction); what they return goes on the wire without floats.
    result = record.get("rules_result", record["result"])
    for name, (renderer, call) in RENDERERS.items():
        fn = _renderer(renderer) if name in formats else None
        if fn is None:
            continue
        try:
            out[name] = event_values(call(fn, record, result, gm_ids))
        except Exception as exc:
            if strict:
                raise RenderError(f"its {name} rendering fails ({type(exc).__name__}: {exc})") from exc
            log.exception("render_failed", format=name, seq=record["seq"])
    return out
