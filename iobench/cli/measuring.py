"""Measuring from the command line: a configuration from its values, one run with a progress bar, a
record saved (or rescued), the what-if check. Imported by the commands that measure, when they run."""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import replace
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from iobench.choices import split_list
from iobench.cli.console import err, out, say
from iobench.errors import IobenchError
from iobench.results.record import EpochTiming, MachineLimits, RunRecord
from iobench.results.store import append_record
from iobench.results.whatif import error, predict
from iobench.run.config import ResolvedRun, RunConfig, order_of
from iobench.run.loaders.base import LoaderSettings
from iobench.run.runner import run


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


def measure_what_if(
    todo: list[ResolvedRun],
    records: list[RunRecord],
    steps_ms: list[float],
    results: Path,
    limits: MachineLimits | None,
    quiet: bool,
) -> None:
    """Predict each configuration at other step times, then measure them to show the model's error."""
    table = Table(title="what-if: predicted from the run above, then measured with that step")
    for col in ("configuration", "step now", "samples/s now", "what-if step", "predicted samples/s",
                "predicted AU", "bound", "measured samples/s", "error"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("configuration", "bound") else "right")
    for resolved, record in zip(todo, records, strict=True):
        for ms in steps_ms:
            p = predict(record, ms)
            check = replace(resolved, config=replace(resolved.config, step=f"sleep:{ms:g}"))
            measured = run_one(check, quiet, limits, None)
            save(results, measured)
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


def config_of(fmt: str, loader: str, settings: LoaderSettings, *, shuffle: bool, block_size: int, **kw) -> RunConfig:
    """A run configuration from command-line values (shared by run and sweep): strings become enums."""
    return RunConfig(
        format=fmt, loader=loader, settings=settings, order=order_of(shuffle, block_size), block_size=block_size, **kw
    )


def save(results: Path, record: RunRecord) -> None:
    """Append the record; if that fails after a long measurement, keep it somewhere and say where."""
    try:
        append_record(results, record)
    except IobenchError as exc:
        rescue = Path(tempfile.gettempdir()) / f"iobench-unsaved-{os.getpid()}.jsonl"
        try:
            append_record(rescue, record)
            say(f"{exc}; the record was saved to {rescue} instead")
        except IobenchError:
            say(f"{exc}; the record follows on stderr")
            err.print(json.dumps(record.to_json()), highlight=False, soft_wrap=True, markup=False)
        raise


def run_one(resolved: ResolvedRun, quiet: bool, limits: MachineLimits | None, profile_dir: Path | None) -> RunRecord:
    c = resolved.config
    label = c.label
    total = c.runs * (c.warmup + c.epochs)
    if quiet:
        return run(resolved, None, limits, profile_dir)
    with Progress(
        TextColumn("{task.description:<40}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
    ) as progress:
        task = progress.add_task(label, total=total)

        def on_epoch(r: int, e: int, warm: bool, timing: EpochTiming) -> None:
            kind = "warm-up" if warm else "epoch"
            progress.update(task, advance=1, description=f"{label} run {r + 1} {kind} {timing.seconds:.2f} s")

        record = run(resolved, on_epoch, limits, profile_dir)
        progress.update(task, description=f"{label} median {record.epochs.epoch_seconds_median:.3f} s")
        return record
