"""Measuring from the command line: a configuration from its values, the session (`iobench.run.session`) run with
the console's bars and messages, its results printed, the what-if table. Imported by the commands that measure,
when they run."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from rich.table import Table

from iobench.choices import split_list
from iobench.cli.app import ARGV
from iobench.cli.bars import RunEvents
from iobench.cli.console import out, say
from iobench.cli.render import print_run
from iobench.errors import IobenchError
from iobench.loaders import LOADERS, LoaderName
from iobench.plan.config import RunConfig, order_of
from iobench.report.whatif import error, predict
from iobench.run.place import RunPlace
from iobench.run.session import RunInterrupted, SessionResult, measure_session
from iobench.run.what_if_checks import WhatIfCheck, what_if_checks
from iobench.settings import LoaderSettings

if TYPE_CHECKING:
    pass


def step_times(text: str, ranks: bool) -> list[float]:
    if ranks:
        raise IobenchError("--what-if measures its checks in one process; run it without torchrun or --nproc")
    try:
        values = [float(x) for x in split_list(text, "--what-if step time")]
    except ValueError:
        raise IobenchError(f"--what-if takes step times in ms, e.g. 2.5,10; got {text!r}") from None
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise IobenchError(f"--what-if step times must be >= 0 ms, got {text!r}")
    return values


def print_what_if(checks: list[WhatIfCheck]) -> None:
    """Each configuration predicted at other step times from its run, beside what was measured with that step."""
    table = Table(title="what-if: predicted from the run above, then measured with that step")
    for col in ("configuration", "step now", "samples/s now", "what-if step", "predicted samples/s",
                "predicted AU", "bound", "measured samples/s", "error"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("configuration", "bound") else "right")
    for check in checks:
        record, ms, measured = check.record, check.step_ms, check.measured
        p = predict(record, ms)
        rate = f"{p.samples_per_s_low:,.0f}" + (
            f"-{p.samples_per_s_high:,.0f}" if p.samples_per_s_high > p.samples_per_s_low * 1.005 else ""
        )
        au = f"{p.utilisation_low:.0%}" + (
            f"-{p.utilisation_high:.0%}" if p.utilisation_high > p.utilisation_low + 0.005 else ""
        )
        table.add_row(
            record.label, record.config.step, f"{record.epochs.samples_per_s:,.0f}", f"sleep:{ms:g}", rate, au,
            p.bound, f"{measured.epochs.samples_per_s:,.0f}", f"{error(p, measured):+.1%}",
        )  # fmt: skip
    out.print(table)


def read_options_of(texts: list[str], pairs: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """--format-option of a run, per format: a pipeline's for the (format, loader) pairs read natively, and those
    every loader reads through for the formats read by another loader."""
    from iobench.data.format_options import any_loader_formats, parse_format_options

    own = {ld for _, ld in pairs if LOADERS[LoaderName.parse(ld, "--loader")].own_pipeline}
    natively = tuple(dict.fromkeys(f for f, ld in pairs if ld in own))
    by_index = any_loader_formats(tuple(dict.fromkeys(f for f, ld in pairs if ld not in own)))
    return parse_format_options(texts, natively, True, by_index)


def config_of(
    fmt: str, loader: str, settings: LoaderSettings, *, shuffle: bool, block_size: int,
    read_options: dict[str, dict[str, Any]] | None = None, **kw: Any,
) -> RunConfig:  # fmt: skip
    """A run configuration from command-line values (shared by run and sweep): strings become enums.
    `read_options` (--format-option, per format) apply to the formats' own pipelines (--loader native), and
    those every loader reads through (npy's object-storage client) to any loader."""
    from iobench.data.format_options import settable_fields

    own = (read_options or {}).get(fmt, {})
    if not LOADERS[LoaderName.parse(loader, "--loader")].own_pipeline and own:
        own = {k: v for k, v in own.items() if k in settable_fields(fmt, reading=True, native=False)}
    return RunConfig(
        format=fmt, loader=loader, settings=settings, order=order_of(shuffle, block_size), block_size=block_size,
        format_options=tuple(sorted(own.items())), **kw,
    )  # fmt: skip


def settings_of(params: dict[str, Any]) -> LoaderSettings:
    """The loader settings among a command's values (its options are named as the settings' fields)."""
    return LoaderSettings(**{f.name: params[f.name] for f in fields(LoaderSettings) if f.name in params})


def measure_run(
    configs: list[RunConfig],
    notes: list[str],
    where: RunPlace,
    *,
    nproc: int | None,
    quiet: bool,
    min_au: float | None,
    what_if_ms: list[float] | None,
    wide: bool = False,
    loaders_named: str | None = None,
) -> None:
    """`iobench run` once its values are checked: the session (iobench.run.session) measures and saves, this prints
    its results, or, interrupted, what had finished before the interruption's line."""
    events = RunEvents(quiet)
    try:
        result = measure_session(configs, notes, where, events, argv=ARGV, nproc=nproc, loaders_named=loaders_named,
                                 estimate=not quiet)  # fmt: skip
    except RunInterrupted as stopped:
        if stopped.result.main:
            _print(stopped.result, where, min_au, wide)
            say(stopped.said)
        raise
    if result is None or not result.main:  # torchrun was launched, or another rank prints
        return
    _print(result, where, min_au, wide)
    if what_if_ms:
        print_what_if(what_if_checks(result.todo, result.records, what_if_ms, where.results, result.limits, events))


def _print(result: SessionResult, where: RunPlace, min_au: float | None, wide: bool) -> None:
    print_run(result.records, result.dataset, where.results, min_au, wide, where.place_flags(result.dataset))
