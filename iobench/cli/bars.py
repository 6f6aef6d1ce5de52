"""Progress on the command line: a configuration's bar over its epochs, a sweep's bar, tune's bar over its budget,
and where a run of several configurations stands with the time left."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from iobench.cli.console import ConsoleEvents, err, out, say
from iobench.plan.resolve import ResolvedRun
from iobench.results.ceilings import MachineLimits, RemoteLimits
from iobench.results.record import RunRecord
from iobench.run.estimates import Estimate
from iobench.run.sweep import run_sweep


@contextmanager
def run_progress(label: str, total_epochs: int, quiet: bool) -> Iterator[_EpochBar]:
    """One configuration's bar over its epochs (warm-ups included); none with --quiet."""
    if quiet:
        yield _EpochBar(None, None, label)
        return
    if not err.is_terminal:  # piped or redirected: a line as each configuration starts, none of a bar's redraws
        say(f"{label}: {total_epochs} epochs ...")
        yield _EpochBar(None, None, label)
        return
    with Progress(
        TextColumn("{task.description:<40}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
    ) as progress:
        yield _EpochBar(progress, progress.add_task(label, total=total_epochs), label)


class _EpochBar(ConsoleEvents):
    """One configuration's bar, moved by each epoch (no bar: nothing shown)."""

    def __init__(self, progress: Progress | None, task: TaskID | None, label: str) -> None:
        super().__init__(quiet=progress is None)
        self.bar, self.task, self.label = progress, task, label

    def epoch_done(self, run: int, epoch: int, warmup: bool, seconds: float) -> None:
        if self.bar is not None and self.task is not None:
            kind = "warm-up" if warmup else "epoch"
            self.bar.update(self.task, advance=1, description=f"{self.label} run {run + 1} {kind} {seconds:.2f} s")

    def done(self, record: RunRecord) -> RunRecord:
        """The bar ends on the run's median epoch."""
        if self.bar is not None and self.task is not None:
            median = record.epochs.epoch_seconds_median
            self.bar.update(self.task, description=f"{self.label} median {median:.3f} s")
        return record


class _SweepBar(ConsoleEvents):
    """A sweep's one overall bar, moved as each configuration starts."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        super().__init__()
        self.bar, self.task = progress, task

    def run_started(self, index: int, total: int, label: str) -> None:
        self.bar.update(self.task, completed=index, description=f"{index + 1}/{total} {label}")


class RoundBar(ConsoleEvents):
    """tune's bar over its time budget, moved as each candidate ends its share of a round."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        super().__init__()
        self.bar, self.task, self.started = progress, task, time.monotonic()

    def round_done(self, round_index: int, label: str) -> None:
        elapsed = time.monotonic() - self.started
        self.bar.update(self.task, completed=elapsed, description=f"round {round_index + 1}: {label}")


def standing(k: int, n: int, elapsed: float, estimates: list[Estimate | None] | None = None) -> str:
    """Where a run of several configurations stands, with the time left: before any has finished, the range their
    measured batches give; after, those estimates scaled by how the finished ones compared with theirs (a run's
    batches are not its probe's); without estimates, at the pace so far."""
    if n == 1:
        return ""
    known = estimates or []
    if len(known) == n and all(x is not None for x in known):
        ahead = known[k:]
        if k == 0:
            left = f", about {time_range(sum(x.low for x in ahead), sum(x.high for x in ahead))} left"  # type: ignore
        else:
            pace = elapsed / max(1e-9, sum(x.middle for x in known[:k]))  # type: ignore[union-attr]
            left = f", about {minutes(pace * sum(x.middle for x in ahead))} left"  # type: ignore[union-attr]
    else:
        left = "" if k == 0 else f", about {minutes(elapsed / k * (n - k))} left"
    return f"configuration {k + 1} of {n}{left}"


def time_range(low: float, high: float) -> str:
    """A time range as a person reads it: one figure where its ends round to the same."""
    a, b = minutes(low), minutes(high)
    if a == b:
        return a
    unit = a.split()[1]
    return f"{a.split()[0]}-{b}" if unit == b.split()[1] else f"{a}-{b}"


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def sweep_with_progress(todo: list[ResolvedRun], results: Path, limits: MachineLimits | RemoteLimits | None,
                        quiet: bool, isolated: bool = False) -> None:  # fmt: skip
    """Run a sweep's configurations with one overall bar (its ETA covers the whole sweep)."""
    columns = (
        TextColumn("{task.description:<60}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err, disable=quiet) as progress:
        task = progress.add_task("sweep", total=len(todo))
        run_sweep(todo, results, limits, _SweepBar(progress, task), isolated)
        progress.update(task, completed=len(todo))
    out.print(
        f"{len(todo)} record(s) appended to {results}; `iobench report {results}` makes the report",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )
