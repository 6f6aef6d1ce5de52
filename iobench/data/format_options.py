"""`--format-option FORMAT.NAME=VALUE`: any field of a format's options dataclass from the command line.

The dataclass is the one list of a format's knobs (plug-ins included), so the command line reads them from
it instead of growing an option per knob; a value is typed by the field's annotation. A field marked
`derived` (the shard count a writer arrives at, the kind of file `files` keeps) is the writer's to set.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from iobench.errors import IobenchError
from iobench.formats import FORMATS

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def settable_fields(name: str, reading: bool = False) -> dict[str, type]:
    """The fields of format `name`'s options a user may set when writing (or, `reading`, per run)."""
    options_type = FORMATS[name].options_type
    hints = typing.get_type_hints(options_type)
    return {
        f.name: hints[f.name]
        for f in dataclasses.fields(options_type)
        if not f.metadata.get("derived") and (f.metadata.get("read") or not reading)
    }


def check_read_options(name: str, given: list[str]) -> None:
    """The option names set for a run of format `name`'s own pipeline must be among its read options."""
    readable = settable_fields(name, reading=True)
    if unknown := [k for k in given if k not in readable]:
        known = ", ".join(readable) or "none"
        raise IobenchError(f"{name} has no read option {unknown[0]!r} (its read options: {known})")


def parse_format_options(texts: list[str], names: tuple[str, ...], reading: bool = False) -> dict[str, dict[str, Any]]:
    """['webdataset.shard_samples=5000', ...] -> {'webdataset': {'shard_samples': 5000}}, one line per mistake.
    `reading` (run): only the fields the format's own pipeline reads; the rest were fixed when written."""
    given: dict[str, dict[str, Any]] = {}
    for text in texts:
        key, equals, value = text.partition("=")
        fmt, dot, field = key.strip().lower().partition(".")
        if not equals or not dot or not field:
            raise IobenchError(f"--format-option {text!r}: write FORMAT.NAME=VALUE, e.g. webdataset.shard_samples=5000")
        if fmt not in names:
            among = f"the formats read natively (--loader native: {', '.join(names) or 'none'})" if reading else (
                f"the formats written ({', '.join(names)})")  # fmt: skip
            raise IobenchError(f"--format-option {text}: {fmt} is not among {among}")
        fields = settable_fields(fmt, reading)
        if field not in fields:
            known = ", ".join(fields) or "none"
            if reading and field in settable_fields(fmt):
                raise IobenchError(
                    f"--format-option {text}: {fmt}.{field} is fixed when the format is written (prepare "
                    f"--format-option); a run sets {fmt}'s read options only: {known}"
                )
            raise IobenchError(f"--format-option {text}: {fmt} has no option {field!r} (its options: {known})")
        given.setdefault(fmt, {})[field] = _typed(fields[field], value.strip(), text)
    return given


def _typed(kind: type, value: str, text: str) -> Any:
    if kind is bool:
        if value.lower() in TRUE + FALSE:
            return value.lower() in TRUE
        raise IobenchError(f"--format-option {text}: {value!r} is not true or false")
    if kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise IobenchError(f"--format-option {text}: {value!r} is not {what}") from None
    return value
