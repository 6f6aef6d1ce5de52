"""A command's values as configurations: the loader settings among its options, a run configuration from a format, a
loader and those values (strings become enums), and --format-option's read options per format. Shared by run, sweep
and tune; the command line only hands its values over."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from iobench.loaders import LOADERS, LoaderName
from iobench.plan.config import RunConfig, order_of
from iobench.settings import LoaderSettings


def read_options_of(texts: list[str], pairs: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """--format-option of a run, per format: a pipeline's for the (format, loader) pairs read natively, and those
    every loader reads through for the formats read by another loader."""
    from iobench.data.format_options import any_loader_formats, parse_format_options

    own = {ld for _, ld in pairs if LOADERS[LoaderName.parse(ld, "--loader")].own_pipeline}
    natively = tuple(dict.fromkeys(f for f, ld in pairs if ld in own))
    by_index = any_loader_formats(tuple(dict.fromkeys(f for f, ld in pairs if ld not in own)))
    return parse_format_options(texts, natively, True, by_index)


def config_of(
    fmt: str,
    loader: str,
    settings: LoaderSettings,
    *,
    shuffle: bool,
    block_size: int,
    read_options: dict[str, dict[str, Any]] | None = None,
    **kw: Any,
) -> RunConfig:
    """A run configuration from command-line values (shared by run and sweep): strings become enums.
    `read_options` (--format-option, per format) apply to the formats' own pipelines (--loader native), and
    those every loader reads through (npy's object-storage client) to any loader."""
    from iobench.data.format_options import settable_fields

    own = (read_options or {}).get(fmt, {})
    if not LOADERS[LoaderName.parse(loader, "--loader")].own_pipeline and own:
        own = {k: v for k, v in own.items() if k in settable_fields(fmt, reading=True, native=False)}
    return RunConfig(
        format=fmt,
        loader=loader,
        settings=settings,
        order=order_of(shuffle, block_size),
        block_size=block_size,
        format_options=tuple(sorted(own.items())),
        **kw,
    )


def settings_of(params: dict[str, Any]) -> LoaderSettings:
    """The loader settings among a command's values (its options are named as the settings' fields)."""
    return LoaderSettings(**{f.name: params[f.name] for f in fields(LoaderSettings) if f.name in params})
