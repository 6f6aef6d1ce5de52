"""What a long job tells the person waiting for it, as one object every driver takes.

A driver (prepare, a run, a sweep, tune, the limits) calls these methods and never prints: the command
line passes `ConsoleEvents` (iobench/cli/console.py), which draws bars and writes on stderr; a library
caller or a test passes `Events()`, which says nothing, or a subclass that records what happened. The
arguments are plain values so that every layer can take the object without importing the others.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from iobench.progress import NullReporter, Reporter


class Events:
    """Every event a driver reports; each method does nothing unless a front end overrides it."""

    def say(self, text: str) -> None:
        """A message for the person waiting (what will be written, which dataset was picked)."""

    def heading(self, text: str) -> None:
        """What a long step is about to do, and how much (left out where the user asked for quiet)."""

    def progress(self) -> AbstractContextManager[Reporter]:
        """A fresh progress reporter (one bar per file or format) for one long step, as a context."""
        return NullReporter()

    def measuring_limits(self) -> None:
        """No ceilings are stored for this machine and disk: they are being measured (tens of seconds)."""

    def run_started(self, index: int, total: int, label: str) -> None:
        """Configuration `index` (from 0) of `total` starts."""

    def epoch_done(self, run: int, epoch: int, warmup: bool, seconds: float) -> None:
        """One epoch of a run ended (warm-up epochs included), after `seconds`."""

    def configuration(self, label: str, total_epochs: int) -> AbstractContextManager[Events]:
        """One configuration's progress over its epochs (warm-ups included), as the events its runs report to."""
        return nullcontext(self)

    def configurations(self, total: int) -> AbstractContextManager[Events]:
        """A sweep's progress over its `total` configurations, as the events each run reports to (`run_started`)."""
        return nullcontext(self)

    def running(self, label: str) -> None:
        """The configuration whose run comes next, where one progress shows several configurations in turn."""

    def configuration_done(self, median_epoch_s: float) -> None:
        """A configuration's runs ended; its median epoch took this long."""

    def search(self, budget_seconds: float) -> AbstractContextManager[Events]:
        """tune's search within its time budget, as the events its rounds report to (`round_done`)."""
        return nullcontext(self)

    def round_done(self, round_index: int, label: str) -> None:
        """tune: one candidate finished its share of round `round_index` (from 0)."""

    def trials(self, total: int) -> AbstractContextManager[Events]:
        """checkpoint's saves, restores and kills, `total` in all, as the events each reports to (`trial_done`)."""
        return nullcontext(self)

    def trial_done(self, label: str, left: str) -> None:
        """checkpoint: one save, restore or kill ended (`label` says which and what it measured); `left`: the time
        left, in words ("" once none is)."""


QUIET = Events()
