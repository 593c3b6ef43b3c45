"""Reading a roll intent's arguments: one place for types, ranges, defaults and their error sentences.

Every resolver reads its arguments through an ``Args`` and calls ``finish()`` last, so an argument the
system does not take is refused with ``unknown_argument`` instead of being silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from rules.errors import RulesError

T = TypeVar("T")
_MISSING: Any = object()


def type_name(value: object) -> str:
    """A person's name for a value's type, for error sentences."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a fraction"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def is_int(value: object) -> bool:
    """True for real integers; booleans are not integers in an intent."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(where: str, value: object, *, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int within ``lo..hi``, or a ``RulesError`` that names ``where``."""
    if not is_int(value):
        raise RulesError("bad_type", f"{where} must be an integer; got {type_name(value)}.")
    assert isinstance(value, int)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise RulesError("out_of_range", f"{where} must be {_range_text(lo, hi)}; got {value}.")
    return value


def _range_text(lo: int | None, hi: int | None) -> str:
    if lo is not None and hi is not None:
        return f"from {lo} to {hi}"
    if lo is not None:
        return f"at least {lo}"
    if hi is not None:
        return f"at most {hi}"
    return "an integer"


class Args:
    """The arguments of one intent for one system, consumed as they are read."""

    __slots__ = ("_grouped", "_read", "_values", "system")

    def __init__(self, system: str, intent: Mapping[str, Any]) -> None:
        self.system = system
        # The intent itself, not a copy (resolvers only read it); its "system" key counts as read.
        self._values = intent
        self._read: set[Any] = {"system"}
        self._grouped: tuple[str, ...] = ()

    def absent(self, names: tuple[str, ...]) -> bool:
        """Whether the intent gives none of ``names`` at all; marks every one of them as known.

        Lets a resolver take its defaults for a group of optional arguments in one step. ``False`` only
        means some name is present (perhaps as null): read them one by one then.
        """
        # Absent names cannot be unknown, so finish() needs them only to list the arguments it knows.
        self._grouped += names
        return self._values.keys().isdisjoint(names)

    def has(self, name: str) -> bool:
        """Whether the intent gives ``name`` (a non-null value); marks it as known."""
        self._read.add(name)
        return self._values.get(name) is not None

    def where(self, name: str) -> str:
        return f"{self.system} argument '{name}'"

    def _get(self, name: str, default: Any) -> Any:
        self._read.add(name)
        value = self._values.get(name)
        if value is not None:
            return value
        if default is _MISSING:
            raise RulesError("missing_argument", f"{self.where(name)} is required.")
        return default

    def raw(self, name: str, default: Any = _MISSING) -> Any:
        return self._get(name, default)

    def integer(
        self, name: str, default: Any = _MISSING, *, lo: int | None = None, hi: int | None = None
    ) -> Any:
        self._read.add(name)
        value = self._values.get(name)
        if value is None:
            if default is None:
                return None
            if default is _MISSING:
                raise RulesError("missing_argument", f"{self.where(name)} is required.")
            value = default
        # The common case (a plain int in range) must not pay for building an error sentence.
        if type(value) is int and (lo is None or value >= lo) and (hi is None or value <= hi):
            return value
        return check_int(self.where(name), value, lo=lo, hi=hi)

    def boolean(self, name: str, default: Any = _MISSING) -> Any:
        self._read.add(name)
        value = self._values.get(name)
        if value is None:
            if default is None:
                return None
            if default is _MISSING:
                raise RulesError("missing_argument", f"{self.where(name)} is required.")
            value = default
        if value is True or value is False:
            return value
        if not isinstance(value, bool):
            raise RulesError("bad_type", f"{self.where(name)} must be true or false; got {type_name(value)}.")
        return value

    def string(
        self, name: str, default: Any = _MISSING, *, choices: Sequence[str] | None = None, max_len: int = 1000
    ) -> Any:
        self._read.add(name)
        value = self._values.get(name)
        if value is None:
            if default is None:
                return None
            if default is _MISSING:
                raise RulesError("missing_argument", f"{self.where(name)} is required.")
            value = default
        if type(value) is str and len(value) <= max_len and (choices is None or value in choices):
            return value
        if not isinstance(value, str):
            raise RulesError("bad_type", f"{self.where(name)} must be a string; got {type_name(value)}.")
        if len(value) > max_len:
            raise RulesError("limit", f"{self.where(name)} may be at most {max_len} characters long.")
        if choices is not None and value not in choices:
            allowed = ", ".join(repr(c) for c in choices)
            raise RulesError("bad_value", f"{self.where(name)} must be one of {allowed}; got {value!r}.")
        return value

    def items(self, name: str, default: Any = _MISSING, *, max_len: int = 100) -> Any:
        value = self._get(name, default)
        if value is None and default is None:
            return None
        if not isinstance(value, list | tuple):
            raise RulesError("bad_type", f"{self.where(name)} must be a list; got {type_name(value)}.")
        if len(value) > max_len:
            raise RulesError(
                "limit", f"{self.where(name)} may hold at most {max_len} items; got {len(value)}."
            )
        return [*value]

    def mapping(self, name: str, default: Any = _MISSING) -> Any:
        value = self._get(name, default)
        if value is None and default is None:
            return None
        if not isinstance(value, Mapping):
            raise RulesError("bad_type", f"{self.where(name)} must be a map; got {type_name(value)}.")
        return {**value}

    def finish(self) -> None:
        """Refuse any argument that no read asked for."""
        # Keys from MessagePack may be ints or bytes; sort by their text so mixed types cannot crash.
        if self._read.issuperset(self._values):
            return
        unknown = sorted((k for k in self._values if k not in self._read), key=str)
        if unknown:
            known = ", ".join(sorted(self._read.union(self._grouped) - {"system"})) or "none"
            raise RulesError(
                "unknown_argument",
                f"{self.system} does not take {', '.join(repr(str(k)) for k in unknown)}; "
                f"its arguments are: {known}.",
            )
