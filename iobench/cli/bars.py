"""Progress on the command line: a configuration's bar over its epochs, a sweep's bar, tune's bar over its budget,
and where a run of several configurations stands with the time left."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from iobench.cli.console import ConsoleEvents, err, say
from iobench.events import Events


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


class RunEvents(ConsoleEvents):
    """A run's events on the console: each configuration gets its bar over its epochs."""

    def configuration(self, label: str, total_epochs: int) -> AbstractContextManager[Events]:
        return run_progress(label, total_epochs, self.quiet)


class _EpochBar(ConsoleEvents):
    """One configuration's bar, moved by each epoch (no bar: nothing shown)."""

    def __init__(self, progress: Progress | None, task: TaskID | None, label: str) -> None:
        super().__init__(quiet=progress is None)
        self.bar, self.task, self.label = progress, task, label

    def epoch_done(self, run: int, epoch: int, warmup: bool, seconds: float) -> None:
        if self.bar is not None and self.task is not None:
            kind = "warm-up" if warmup else "epoch"
            self.bar.update(self.task, advance=1, description=f"{self.label} run {run + 1} {kind} {seconds:.2f} s")

    def running(self, label: str) -> None:
        self.label = label

    def configuration_done(self, median_epoch_s: float) -> None:
        """The bar ends on the run's median epoch."""
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, description=f"{self.label} median {median_epoch_s:.3f} s")


class _SweepBar(ConsoleEvents):
    """A sweep's one overall bar, moved as each configuration starts."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        super().__init__()
        self.bar, self.task = progress, task

    def run_started(self, index: int, total: int, label: str) -> None:
        self.bar.update(self.task, completed=index, description=f"{index + 1}/{total} {label}")


class SweepEvents(ConsoleEvents):
    """A sweep's events on the console: one bar over its configurations (its time left covers the whole sweep)."""

    @contextmanager
    def configurations(self, total: int) -> Iterator[Events]:
        columns = (
            TextColumn("{task.description:<60}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=err, disable=self.quiet or not err.is_terminal) as progress:
            task = progress.add_task("sweep", total=total)
            yield _SweepBar(progress, task)
            progress.update(task, completed=total)


class TuneEvents(ConsoleEvents):
    """tune's events on the console: a bar over its time budget, moved as each candidate ends its share of a round."""

    @contextmanager
    def search(self, budget_seconds: float) -> Iterator[Events]:
        columns = (TextColumn("{task.description:<60}", markup=False), BarColumn(), TimeElapsedColumn())
        with Progress(*columns, console=err, disable=self.quiet or not err.is_terminal) as progress:
            yield RoundBar(progress, progress.add_task("tune", total=budget_seconds))


class RoundBar(ConsoleEvents):
    """tune's bar over its time budget, moved as each candidate ends its share of a round."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        super().__init__()
        self.bar, self.task, self.started = progress, task, time.monotonic()

    def round_done(self, round_index: int, label: str) -> None:
        elapsed = time.monotonic() - self.started
        self.bar.update(self.task, completed=elapsed, description=f"round {round_index + 1}: {label}")


class CheckpointEvents(ConsoleEvents):
    """checkpoint's events on the console: one bar over its saves, restores and kills, each step's result and the
    time left as its description (piped: a line each)."""

    @contextmanager
    def trials(self, total: int) -> Iterator[Events]:
        if self.quiet or not err.is_terminal:
            yield _StepLines(self.quiet)
            return
        columns = (
            TextColumn("{task.description:<70}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=err) as progress:
            yield _StepBar(progress, progress.add_task("checkpoint", total=total))


class _StepBar(ConsoleEvents):
    def __init__(self, progress: Progress, task: TaskID) -> None:
        super().__init__()
        self.bar, self.task = progress, task

    def trial_done(self, label: str, left: str) -> None:
        self.bar.update(self.task, advance=1, description=f"{label}{'; ' + left if left else ''}")


class _StepLines(ConsoleEvents):
    def trial_done(self, label: str, left: str) -> None:
        if not self.quiet:
            say(f"{label}{'; ' + left if left else ''}")
