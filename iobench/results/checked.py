"""Reading stored JSON as typed values: every stored value is checked against its field's type, so a
damaged or crafted file is one line (RecordError), never a wrong figure or a traceback later."""

from __future__ import annotations

import types
import typing
from dataclasses import MISSING, fields
from typing import Any

from iobench.choices import Choice
from iobench.errors import IobenchError


class RecordError(IobenchError):
    """A stored record that is not one (wrong types, missing fields)."""


MAX_MEASURED = 1e15  # seconds (30 million years) or MB/s: anything larger is not a measurement


def mapping(data: object, what: str) -> dict:
    if not isinstance(data, dict):
        raise RecordError(f"a {what} must be a JSON object, got {type(data).__name__}")
    return data


def numbers(values: object, name: str) -> list[float]:
    return checked(values, list[float], name)


_HINTS: dict[type, dict[str, Any]] = {}
IN_PLACE = {"in_place": True}  # a nested part's fields stored in the object's own (a record's settings)


def parsed(cls: type, data: dict, required: tuple[str, ...] = ()) -> Any:
    """Build one part from the flat object, checking every stored value against its type; a nested part (the
    config's settings) is read from the same object. `required`: fields that must be stored, default or not."""
    hints = _HINTS.setdefault(cls, typing.get_type_hints(cls))
    values = {}
    for f in fields(cls):
        if f.metadata.get("in_place"):
            values[f.name] = parsed(hints[f.name], data, required)
        elif f.name in data:
            values[f.name] = checked(data[f.name], hints[f.name], f.name)
        elif f.name in required or (f.default is MISSING and f.default_factory is MISSING):
            raise RecordError(f"the field {f.name!r} is missing")
    return cls(**values)


def checked(value: Any, hint: Any, name: str) -> Any:
    if not fits(value, hint):
        raise RecordError(f"{name!r} holds {value!r:.60}, not {hint.__name__ if isinstance(hint, type) else hint}")
    return value


def fits(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, h) for h in typing.get_args(hint))
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(fits(v, item) for v in value)
    if origin is dict:
        key, item = typing.get_args(hint)
        return isinstance(value, dict) and all(fits(k, key) and fits(v, item) for k, v in value.items())
    if isinstance(hint, type) and issubclass(hint, Choice):  # stored as its text
        return isinstance(value, str) and value in {c.value for c in hint}
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)
