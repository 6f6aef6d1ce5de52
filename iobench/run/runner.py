"""One run of a resolved configuration: its runs under the storage's controls and the CPU contention asked for,
then the record."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import torch

from iobench.events import QUIET, Events
from iobench.measuring.limit_rule import with_limits
from iobench.measuring.steps import make_step
from iobench.plan.resolve import ResolvedRun
from iobench.results.limits import MachineLimits, RemoteLimits
from iobench.results.record import RunRecord
from iobench.results.record_base import HostLoad, Waits
from iobench.run.building import build_loader
from iobench.run.device_work import decoder_of, device_transform, possible_cost, transform_cost
from iobench.run.epoch_log import EpochLog, record_of
from iobench.run.format_epochs import FormatEpochs
from iobench.system.contention import RECENT_SECONDS, contending, other_cores_busy, torch_threads
from iobench.system.sysmetrics import CpuCounters
from iobench.system.waits import WaitMeter


def run(
    resolved: ResolvedRun,
    limits: MachineLimits | RemoteLimits | None = None,
    profile_dir: Path | None = None,
    events: Events = QUIET,
) -> RunRecord:
    """Measure one configuration, all its runs; returns its record (the same on every rank).

    Per timed epoch: `cold` closes the loader (nothing may stay mapped), has the storage make the files
    cold and says how cold they are (`Storage.make_cold`, `residency`) before building a fresh loader;
    `warm` follows at least one untimed epoch; `as-is` touches nothing. Residency and what moved from the
    storage are recorded for every timed epoch, whatever the mode. Under torchrun one process per node
    makes the files cold while the others wait, and every rank starts each timed epoch together. The
    storage's controls (local: a read throttle and a cache budget, a cgroup around the run and every
    process it starts) hold for each run.
    """
    measuring = Measuring(resolved, limits, profile_dir, events)
    for _ in range(resolved.config.runs):
        measuring.one_run()
    return measuring.record()


class Measuring:
    """One configuration measured run by run: `one_run` (a fresh loader, its warm-up and timed epochs), then `record`
    of the runs done. `run` does all of a configuration's runs at once; `iobench run` interleaves several
    configurations' runs (A, B, A, B ...) so that a minute's drift of a shared machine is in each one's interval,
    not between them, and an interruption keeps a record of the runs each had finished."""

    def __init__(
        self,
        resolved: ResolvedRun,
        limits: MachineLimits | RemoteLimits | None = None,
        profile_dir: Path | None = None,
        events: Events = QUIET,
    ) -> None:
        config, device = resolved.config, resolved.device
        spec = resolved.manifest.spec
        self.resolved, self.limits, self.events = resolved, limits, events
        self.step = make_step(config.step, spec.features_per_sample, spec.n_classes, device, config.seed)
        self.log = EpochLog(resolved.storage.counters(), CpuCounters())
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        self.decoder = decoder_of(resolved)
        self.transform = device_transform(resolved, self.decoder)
        self.transform_cost = transform_cost(resolved)
        self.subject = FormatEpochs(resolved, self.log, self.step, self.transform, profile_dir)
        self.runs_done, self.seconds = 0, 0.0
        self.before: tuple[float, float | None] | None = None  # load average and other programs' cores
        self.after: tuple[float, float | None] | None = None
        self.peak_cache: int | None = None
        self.method: str | None = None
        self.threads = torch.get_num_threads()
        self.waits = Waits()  # each run's waits; its place in each round where runs are taken in turn

    def in_turn(self, session: str, position: int) -> None:
        """The next run is taken in turn with others (`session`), at `position` in its round."""
        self.waits = replace(self.waits, turn_session=session, turn_positions=[*self.waits.turn_positions, position])

    def one_run(self) -> None:
        """The configuration's next run, under its storage's controls and the CPU contention it asked for; what its
        processes waited for recorded (`iobench.system.waits`)."""
        config = self.resolved.config
        with contending(config.cpu_contention) as rivals, torch_threads(config.torch_threads) as threads:
            self.threads = threads  # what the runs had, for the record made after them
            if self.before is None:
                self.before = (os.getloadavg()[0], other_cores_busy(rivals=rivals, recent=RECENT_SECONDS))
            with self.resolved.storage.controls() as applied, WaitMeter(exclude=rivals) as meter:
                started = time.perf_counter()
                self.subject.run(
                    1,
                    config.warmup,
                    config.epochs,
                    self.step,
                    self.transform,
                    config.max_seconds,
                    self.events,
                    first_run=self.runs_done,
                )
                self.seconds += time.perf_counter() - started
            self.waits = self.waits.with_unit(meter.figures)
            self.after = (os.getloadavg()[0], other_cores_busy(rivals=rivals))
        self.runs_done += 1
        if applied.peak_cache_bytes is not None:
            self.peak_cache = max(self.peak_cache or 0, applied.peak_cache_bytes)
        self.method = applied.method

    def record(self, final: bool = True) -> RunRecord:
        """The record of the runs done (all of them, or those an interruption left); the resume check after the
        last of all (`final`: not for a look at the runs so far, as --until-decided takes after each round)."""
        config = replace(self.resolved.config, runs=self.runs_done)
        resolved = replace(self.resolved, config=config)
        if final and config.resume_check and self.runs_done == self.resolved.config.runs:  # after the clock
            from iobench.run.resume_check import resume_check

            with resolved.storage.controls():
                last = config.runs * (config.warmup + config.epochs) - 1
                self.log.resume = resume_check(resolved, last, build_loader).fields()
        cost = possible_cost(self.transform_cost, self.log, config)
        record = record_of(resolved, self.log, cost, self.seconds, self.subject.profile_path)
        (load_before, other_before), (load_after, other_after) = self.before, self.after  # type: ignore[misc]
        host = HostLoad(
            load_before=load_before, load_after=load_after, other_cpu_before=other_before, other_cpu_after=other_after
        )
        decoder = self.decoder.describe if self.decoder is not None else None
        record = replace(
            record,
            system=replace(record.system, decoder=decoder),
            host=host,
            waits=self.waits,
            environment=replace(record.environment, torch_threads=self.threads),
        )
        if self.resolved.confinement:
            budget = self.resolved.confinement.cache_budget_bytes
            system = replace(
                record.system,
                cache_budget_bytes=budget,
                cache_peak_bytes=self.peak_cache if budget is not None else None,
                confinement_method=self.method,
            )
            record = replace(record, system=system)
        return with_limits(record, self.limits)
