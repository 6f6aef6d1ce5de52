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
from iobench.spec import DatasetSpec

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def settable_fields(name: str, reading: bool = False, native: bool = True) -> dict[str, type]:
    """The fields of format `name`'s options a user may set when writing (or, `reading`, per run: with a loader
    other than its own pipeline, `native` False, only those every loader reads through)."""
    options_type = FORMATS[name].options_type
    hints = typing.get_type_hints(options_type)
    return {
        f.name: hints[f.name]
        for f in dataclasses.fields(options_type)
        if not f.metadata.get("derived")
        and (not reading or (f.metadata.get("read") and (native or f.metadata.get("any_loader"))))
    }


def object_storage_fields(name: str) -> set[str]:
    """The read options of format `name` that only reading from object storage uses (a client, a cache budget)."""
    return {f.name for f in dataclasses.fields(FORMATS[name].options_type) if f.metadata.get("object_storage_only")}


def written_options(name: str, options: dict[str, Any], spec: DatasetSpec) -> str:
    """How format `name` was written where `prepare` would have written it otherwise: the write options of its
    manifest (not the read options a run sets, nor what a writer arrives at itself, such as a shard count) whose
    value differs from the defaults resolved for the same spec, as name=value, sorted; "" for the defaults. Two
    datasets of one spec written differently (LitData's chunk size, WebDataset's shard size) are not the same
    configuration, though their folders have one name."""
    fmt = FORMATS[name]
    defaults = fmt.options_to_json(fmt.resolve_options(spec, fmt.options_type()))
    fields = dataclasses.fields(fmt.options_type)
    chosen = {f.name for f in fields if not (f.metadata.get("read") or f.metadata.get("derived"))} & set(options)
    return ",".join(f"{k}={options[k]}" for k in sorted(chosen) if options[k] != defaults.get(k))


def check_read_options(name: str, given: list[str], native: bool = True) -> None:
    """The option names set for a run of format `name` must be among its read options (`native`: its own
    pipeline's; otherwise those every loader reads through)."""
    readable = settable_fields(name, reading=True, native=native)
    if unknown := [k for k in given if k not in readable]:
        known = ", ".join(readable) or "none"
        raise IobenchError(f"{name} has no read option {unknown[0]!r} (its read options: {known})")


def any_loader_formats(names: tuple[str, ...]) -> tuple[str, ...]:
    """Those of `names` with read options that every loader reads through (npy's object-storage client)."""
    return tuple(n for n in names if settable_fields(n, reading=True, native=False))


def parse_format_options(
    texts: list[str], names: tuple[str, ...], reading: bool = False, by_index: tuple[str, ...] = ()
) -> dict[str, dict[str, Any]]:
    """['webdataset.shard_samples=5000', ...] -> {'webdataset': {'shard_samples': 5000}}, one line per mistake.
    `reading` (run): only the fields the format's own pipeline reads (`names`: the formats read natively), or,
    for the formats read by other loaders (`by_index`), those every loader reads; the rest were fixed when
    written."""
    given: dict[str, dict[str, Any]] = {}
    for text in texts:
        key, equals, value = text.partition("=")
        fmt, dot, field = key.strip().lower().partition(".")
        if not equals or not dot or not field:
            raise IobenchError(f"--format-option {text!r}: write FORMAT.NAME=VALUE, e.g. webdataset.shard_samples=5000")
        if fmt not in names and fmt not in by_index:
            among = (
                f"the formats read natively (--loader native: {', '.join(names) or 'none'})"
                if reading
                else (f"the formats written ({', '.join(names)})")
            )
            if by_index:
                among += f" or with read options for any loader ({', '.join(by_index)})"
            raise IobenchError(f"--format-option {text}: {fmt} is not among {among}")
        fields = settable_fields(fmt, reading, native=fmt in names)
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
