"""The one loop every measured epoch runs through, whatever is measured: a prepared format through a loader
(`run.runner`), a `--dataset-factory` pipeline (`run.dataset_factory`) or a user's loader (`iobench.measure`).

Per run a fresh loader; per epoch the warm-up ones untimed, the timed ones cold if asked (the loader closed, the
subject's files evicted, a fresh loader built) and timed with the harness out of the garbage collector. A failure
inside an epoch is turned into one line by the subject (`EpochLoop.failure`). What a subject records around a
timed epoch (residency, counters, the order's score) it does in its hooks; the epoch clock is called here only.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from contextlib import nullcontext

import torch

from iobench.errors import RunFailed, UserExit
from iobench.events import QUIET, Events
from iobench.loaders.base import DeviceBatch, Loader
from iobench.measuring.clocks import EpochTiming, time_epoch
from iobench.measuring.collector import harness_out_of_the_collector

DeviceTransform = Callable[[torch.Tensor], torch.Tensor] | None  # batched, after the copy


class EpochLoop:
    """A subject of measurement: how its loader is built and made cold, what it does around a timed epoch and how
    its failures read. `run` is the loop."""

    cold = False  # evict before each timed epoch (`make_cold`), then build a fresh loader

    def build(self) -> Loader:
        raise NotImplementedError

    def make_cold(self, epoch: int) -> None:
        """Evict what the subject reads, its loader closed."""

    def prepare(self, loader: Loader, epoch: int) -> None:
        """The loader's before-the-loop work for the epoch, outside its clock."""
        loader.prepare(epoch)

    def starting(self, epoch: int) -> None:
        """Before a timed epoch's loader is built (cold) or prepared: what is resident now."""

    def started(self, loader: Loader, epoch: int) -> None:
        """A timed epoch's loader prepared, its clock about to start."""

    def ended(self, loader: Loader, epoch: int, timing: EpochTiming) -> None:
        """A timed epoch done, its clock stopped."""

    def run_done(self, loader: Loader, run: int, next_epoch: int) -> None:
        """A run's epochs done, its loader still open."""

    def delivered(self, loader: Loader, timing: EpochTiming) -> None:
        """Refuse an epoch that delivered less than it should have."""

    def failure(self, exc: Exception, epoch: int) -> RunFailed:
        """The epoch's failure as one line."""
        return RunFailed(f"epoch {epoch} failed: {type(exc).__name__}: {exc}")

    def clock(
        self,
        loader: Loader,
        epoch: int,
        step: Callable[[DeviceBatch], None],
        transform: DeviceTransform = None,
        max_seconds: float | None = None,
    ) -> EpochTiming:
        """One epoch on the clock (`time_epoch`): the only place any epoch is timed."""
        from iobench.storage.remote.bounds import forget

        forget()
        try:
            timing = time_epoch(loader, epoch, step, max_seconds, transform)
            self.delivered(loader, timing)
            return timing
        except RunFailed:
            raise
        except SystemExit as exc:  # a user's dataset (or a library) calling sys.exit inside the epoch
            raise self.failure(UserExit(exc), epoch) from None
        except Exception as exc:
            raise self.failure(exc, epoch) from None

    def run(
        self,
        runs: int,
        warmup: int,
        epochs: int,
        step: Callable[[DeviceBatch], None],
        transform: DeviceTransform = None,
        max_seconds: float | None = None,
        events: Events = QUIET,
        first_run: int = 0,
    ) -> list[EpochTiming]:
        """`runs` fresh loaders, each `warmup` untimed epochs then `epochs` timed ones; the timed epochs' timings.
        `first_run`: the index of the first of them (runs of one configuration measured between others' go on from
        where the last left: their epochs, and so their orders, are the ones a run of all of them has)."""
        timings: list[EpochTiming] = []
        per_run = warmup + epochs
        for r in range(first_run, first_run + runs):
            loader = self.build()
            try:
                for e in range(per_run):
                    epoch, timed = r * per_run + e, e >= warmup
                    if timed and self.cold:
                        loader.close()
                        gc.collect()  # drop any mapping still referenced from a cycle
                        self.make_cold(epoch)
                    if timed:
                        self.starting(epoch)
                    if timed and self.cold:
                        loader = self.build()
                    self.prepare(loader, epoch)
                    if timed:
                        self.started(loader, epoch)
                    with harness_out_of_the_collector() if timed else nullcontext():
                        timing = self.clock(loader, epoch, step, transform, max_seconds)
                    if timed:
                        self.ended(loader, epoch, timing)
                        timings.append(timing)
                    events.epoch_done(r, e, not timed, timing.seconds)
                self.run_done(loader, r, (r + 1) * per_run)
            finally:
                loader.close()
        return timings
