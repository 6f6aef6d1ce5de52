"""Progress reporting that the core can call without knowing about terminals."""

from __future__ import annotations

import math
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.text import Text


class Reporter(Protocol):
    def start(self, key: str, description: str, total: int) -> None: ...

    def advance(self, key: str, n: int) -> None: ...

    def finish(self, key: str, description: str) -> None: ...


class NullReporter:
    """For tests, library use and --quiet: reports nothing."""

    def __enter__(self) -> NullReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def start(self, key: str, description: str, total: int) -> None:
        pass

    def advance(self, key: str, n: int) -> None:
        pass

    def finish(self, key: str, description: str) -> None:
        pass


class LiveSpeed(TransferSpeedColumn):
    """The bar's MB/s while it runs; once done, nothing: the finished line says its own measured MB/s, and rich's
    windowed figure beside it was a second, different MB/s on one line."""

    def render(self, task: Task) -> Text:
        return Text("") if task.finished else super().render(task)


class DataDone(DownloadColumn):
    """The bytes of data done of the total while the bar runs; once done, nothing: the finished line says the bytes
    stored, and "files 32 MB, 25 MB/s ... 75.3/75.3 MB" put stored bytes and data bytes side by side unnamed."""

    def render(self, task: Task) -> Text:
        return Text("") if task.finished else super().render(task)


def _stderr() -> Console:
    return Console(stderr=True)


class RichReporter:
    """One bar per key, with bytes done, MB/s (10^6 bytes) and time left; where the console is not a terminal (piped,
    redirected), no bar is redrawn into the file: each finished line alone is written."""

    def __init__(self, console: Console | None = None) -> None:
        self._console = console or _stderr()
        self._lines = not self._console.is_terminal
        self._progress = Progress(
            TextColumn("{task.description:<28}", markup=False),
            BarColumn(),
            DataDone(),
            LiveSpeed(),
            TimeRemainingColumn(),
            console=self._console,
            transient=False,
            disable=self._lines,
        )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> RichReporter:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def start(self, key: str, description: str, total: int) -> None:
        if key in self._tasks:
            self._progress.reset(self._tasks[key], total=total, description=description)
        else:
            self._tasks[key] = self._progress.add_task(description, total=total)

    def advance(self, key: str, n: int) -> None:
        self._progress.advance(self._tasks[key], n)

    def finish(self, key: str, description: str) -> None:
        self._progress.update(self._tasks[key], description=description)
        if self._lines:
            self._console.print(description, markup=False, highlight=False)


def make_reporter(quiet: bool, console: Console) -> RichReporter | NullReporter:
    """Progress bars on console, or none with --quiet; either is used as a context manager."""
    return NullReporter() if quiet else RichReporter(console)


def pace_of(took: float, estimated: float, ahead: float) -> float:
    """How the epochs ahead will compare with their estimates: what the finished ones showed, trusted as far as they
    weigh against what is ahead (the square root of their share). A tiny first configuration's pace (npy's probe
    was 3x its warm epochs) says little of a large one's, and moved "about 13 s" to "about 4 s" (it took 9 s)."""
    if estimated <= 0 or took <= 0:
        return 1.0
    weight = math.sqrt(estimated / (estimated + ahead)) if ahead > 0 else 1.0
    return 1.0 + (took / estimated - 1.0) * weight


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
