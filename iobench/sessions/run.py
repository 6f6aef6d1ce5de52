"""One `iobench run`, whole: the ranks joined, the dataset found or prepared, its formats served when read from
object storage, every configuration resolved before any is measured, the limits measured once (rank 0, the others
waiting), each configuration measured (one after another, or their runs in turn) and its record saved as it ends.
Interrupted, what finished is saved and handed back in `RunInterrupted`. The command line parses before it and
prints after it; nothing here prints."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from iobench.errors import IobenchError
from iobench.events import Events
from iobench.loaders.device import resolve_device
from iobench.plan.config import RunConfig
from iobench.plan.place import RunPlace
from iobench.plan.resolve import ResolvedRun, RunTarget, settle_device
from iobench.plan.selection import without_memory_resident
from iobench.results.limits import MachineLimits, RemoteLimits
from iobench.results.record import RunRecord
from iobench.run.estimates import Estimate, Finished, finished_of, standing, time_range
from iobench.run.preparing import batch_notes, dataset_for_run, launch_torchrun, resolve_all
from iobench.run.runner import Measuring, run
from iobench.run.saving import save
from iobench.run.serving import limits_of, served
from iobench.run.what_if_checks import WhatIfCheck, what_if_checks
from iobench.system.contention import other_cores_busy
from iobench.system.world import World, joined
from iobench.units import QUICK_SIZE

Limits = MachineLimits | RemoteLimits | None


@dataclass(frozen=True)
class RunRequest:
    """`iobench run` once its values are checked: the configurations, where they run, and how.

    `estimate`: time a few batches of each configuration first, for the time left (not worth it unseen).
    `what_if_ms`: after the runs, each configuration measured again with each of these step times (`--what-if`)."""

    configs: tuple[RunConfig, ...]
    place: RunPlace
    notes: tuple[str, ...] = ()
    nproc: int | None = None
    formats_named: str | None = None  # --format as typed (None: the standard comparison's pairs)
    loaders_named: str | None = None
    estimate: bool = True
    what_if_ms: tuple[float, ...] = ()
    until_decided_minutes: float | None = None  # more rounds in turn until the answer is decided, at most this long
    printing: tuple[str, ...] = ()  # the command line's options for what it prints: each rank prints by them

    @classmethod
    def of_one(cls, config: RunConfig, place: RunPlace, printing: tuple[str, ...] = ()) -> RunRequest:
        """One configuration's request, its format and loader named (what feed starts a count's ranks from)."""
        return cls((config,), place, formats_named=config.format, loaders_named=str(config.loader), printing=printing)

    def to_argv(self) -> list[str]:
        """`run`'s arguments for this request as each of `--nproc`'s ranks takes it, from its typed values
        (`iobench.plan.argv`); tests/plan/test_argv.py parses them back into the same request."""
        from iobench.plan.argv import configs_argv

        args = configs_argv(self.configs, self.place, self.formats_named, self.loaders_named)
        args += ["--what-if", ",".join(map(repr, self.what_if_ms))] if self.what_if_ms else []
        minutes = self.until_decided_minutes
        return [*args, *(["--until-decided", repr(minutes)] if minutes is not None else []), *self.printing]


@dataclass
class RunOutcome:
    """What a session measured, for the command line to print (rank 0's; other ranks print nothing)."""

    records: list[RunRecord]
    todo: list[ResolvedRun]
    dataset: str
    limits: Limits
    main: bool  # this process is rank 0 (or the only one)
    notes: list[str] = field(default_factory=list)
    what_ifs: list[WhatIfCheck] = field(default_factory=list)  # --what-if: each prediction's step, measured


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during the runs: the records of what had finished (saved already) and where it stood."""

    def __init__(self, outcome: RunOutcome, said: str) -> None:
        super().__init__(said)
        self.outcome, self.said = outcome, said


def run_session(request: RunRequest, events: Events) -> RunOutcome | None:
    """Launch torchrun (None: the ranks report), or find the dataset, resolve every configuration, measure the
    limits once, run each configuration and save its record as it ends."""
    configs, notes, where = list(request.configs), list(request.notes), request.place
    loaders_named, estimate, what_if_ms = request.loaders_named, request.estimate, list(request.what_if_ms)
    if request.nproc is not None:
        launch_torchrun(request.nproc, request.to_argv(), where, configs, events)
        return None
    with joined(where.device, timeout_s=where.rank_timeout) as (world, own_device):
        events = events if world.is_main else Events()  # one progress and one set of messages, from rank 0
        target_device = resolve_device(own_device)
        configs, skipped = without_memory_resident(configs, loaders_named, target_device.type == "cpu")
        notes = [*notes, *skipped]
        if not configs:
            raise IobenchError(skipped[0])
        configs = [settle_device(c, target_device) for c in configs]  # machine checks before any dataset
        formats = tuple(dict.fromkeys(c.format for c in configs))
        dataset_dir = dataset_for_run(world, where.data_dir, where.dataset, formats, events, where.size)
        with served(where.remote, where.endpoint_url, dataset_dir, where.fuse) as remote:
            todo = resolve_all(configs, RunTarget(dataset_dir, target_device, remote), world)
            todo = _alike_beside_others(todo, world, events)  # every check passed: about to measure
            notes = [*notes, *batch_notes(configs, todo)]
            limits: Limits = None
            if world.is_main:
                for note in notes:
                    events.say(note)
                if remote is not None and todo and todo[0].manifest.spec.n_samples >= QUICK_SIZE:
                    n = todo[0].manifest.spec.n_samples
                    events.say(
                        f"reading {n:,} samples from object storage: a configuration can take minutes (a "
                        "GET per run of samples, each its first byte's wait); `--size 2e4` for a first look"
                    )
                read_limit = configs[0].read_limit_mb_per_s  # a run option: every configuration has the same
                limits = limits_of(remote, dataset_dir, target_device, where.results, events, read_limit)
            world.barrier()  # no rank reads while rank 0 measures the machine's limits
            outcome = RunOutcome([], todo, dataset_dir.name, limits, world.is_main)
            profile_dir = where.results.parent / "profiles" if where.cprofile else None
            estimates = _estimates(todo, events, skip=not estimate or not world.is_main or world.size > 1)
            if interleaved(todo):
                outcome.records = run_interleaved(
                    todo, limits, profile_dir, world, where, events, outcome, estimates, request.until_decided_minutes
                )
            else:
                _one_after_another(todo, limits, profile_dir, world, where, events, outcome, estimates)
            if what_if_ms and world.is_main:
                events.say(f"what-if: {len(todo)} configuration(s) measured again at {len(what_if_ms)} step time(s)")
                again = lambda check: _measured_and_saved(check, limits, where, events)  # noqa: E731
                outcome.what_ifs = what_if_checks(todo, outcome.records, what_if_ms, again)
    return outcome


def _alike_beside_others(todo: list[ResolvedRun], world: World, events: Events) -> list[ResolvedRun]:
    """Beside other programs, configurations ranked against each other each get one torch thread where --torch-threads
    was not given (as torchrun gives its workers): torch's intra-op threads compete with the other programs, and a
    ranking is decided only where contention falls alike (`iobench.judge.paired`). Beside two busy loops on 2 cores,
    tensorclass at the default threads waited for a CPU 49% of its time and lost 22x, npy 36% and 1.7x; at one thread
    each they waited 32-35%."""
    from iobench.judge.evidence import busy

    configs = [r.config for r in todo]
    if world.active or len(todo) < 2 or any(c.torch_threads is not None or c.cpu_contention for c in configs):
        return todo
    cores = other_cores_busy()
    if not busy(cores):
        return todo
    events.say(
        f"other programs use {cores:.1f} cores: each configuration at one torch thread, so that contention falls "
        "alike on them (--torch-threads N to choose)"
    )
    return [replace(r, config=replace(r.config, torch_threads=1)) for r in todo]


def _measured_and_saved(resolved: ResolvedRun, limits: Limits, where: RunPlace, events: Events) -> RunRecord:
    record = run_one(resolved, limits, None, events)
    save(where.results, record, events)
    return record


def _one_after_another(
    todo: list[ResolvedRun],
    limits: Limits,
    profile_dir: Path | None,
    world: World,
    where: RunPlace,
    events: Events,
    outcome: RunOutcome,
    estimates: list[Estimate | None],
) -> None:
    started = time.monotonic()
    finished: list[Finished] = []
    try:
        for k, resolved in enumerate(todo):
            at = standing(k, len(todo), time.monotonic() - started, estimates, finished)
            began = time.monotonic()
            outcome.records.append(run_one(resolved, limits, profile_dir, events, at))
            finished.append(finished_of(outcome.records[-1], time.monotonic() - began))
            if world.is_main:
                save(where.results, outcome.records[-1], events)
    except BaseException as exc:
        if not _interruption(exc):
            raise
        if outcome.records:
            raise RunInterrupted(
                outcome,
                f"interrupted after {len(outcome.records)} of {len(todo)} configurations; their records are kept",
            ) from None
        raise


def _interruption(exc: BaseException) -> bool:
    """Ctrl-C or SIGTERM, also where a library turned it into a failure of its own once the signal came (the command
    line then says "interrupted"): the records finished before it are kept and said so. Under load, a test's Ctrl-C in
    the second configuration ended with "nothing half-written was kept" though the first's record was."""
    from iobench.system.signals import ENDING

    return isinstance(exc, KeyboardInterrupt) or (isinstance(exc, Exception) and ENDING.is_set())


def run_one(
    resolved: ResolvedRun, limits: Limits, profile_dir: Path | None, events: Events, place: str = ""
) -> RunRecord:
    """One configuration with its own progress; `place` ("configuration 2 of 5, about 3 min left") heads it."""
    c = resolved.config
    label = f"{place}: {c.label}" if place else c.label
    with events.configuration(label, c.runs * (c.warmup + c.epochs)) as bar:
        record = run(resolved, limits, profile_dir, bar)
        bar.configuration_done(record.epochs.epoch_seconds_median)
    return record


def interleaved(todo: list[ResolvedRun]) -> bool:
    """Several configurations of several runs each: measured run by run in turn (A, B, A, B ...)."""
    return len(todo) > 1 and all(r.config.runs > 1 for r in todo)


def run_interleaved(
    todo: list[ResolvedRun],
    limits: Limits,
    profile_dir: Path | None,
    world: World,
    where: RunPlace,
    events: Events,
    outcome: RunOutcome,
    estimates: list[Estimate | None],
    until_minutes: float | None = None,
) -> list[RunRecord]:
    """Run k of every configuration before run k + 1 of any (hyperfine's and pyperf's way: a shared machine's drift
    over minutes then falls inside each configuration's runs, not between two configurations, which two identical runs
    90 s apart had called -16.4%); each configuration's record once its last run is done. Interrupted, each
    configuration that finished a run is recorded with the runs it had, and those records are kept."""
    runs = max(r.config.runs for r in todo)
    total = sum(r.config.runs * (r.config.warmup + r.config.epochs) for r in todo)
    known = [x for x in estimates if x is not None]
    ahead = (
        f", about {time_range(sum(x.low for x in known), sum(x.high for x in known))}"
        if len(known) == len(todo)
        else ""
    )
    if until_minutes is not None:
        ahead += f", then rounds until the answer is decided, {until_minutes:g} min at most"
    with events.configuration(f"{len(todo)} configurations, their runs in turn{ahead}", total) as bar:
        measuring = [Measuring(r, limits, profile_dir, bar) for r in todo]
        session = new_turns(world)
        started = time.monotonic()
        try:
            k = 0
            while k < runs or _undecided(measuring, world, started, until_minutes, events):
                for position, m in enumerate(round_order(measuring, session, k)):
                    if k < m.resolved.config.runs or k >= runs:
                        bar.running(m.resolved.config.label)
                        m.in_turn(session, position)
                        m.one_run()
                k += 1
        except BaseException as exc:
            if not _interruption(exc):
                raise
            outcome.records = [m.record() for m in measuring if m.runs_done]
            if world.is_main:
                for record in outcome.records:
                    save(where.results, record, events)
            if outcome.records:
                raise RunInterrupted(
                    outcome,
                    f"interrupted in run {k + 1} of {runs}; the runs each configuration had finished are recorded",
                ) from None
            raise
    records = [m.record() for m in measuring]
    if world.is_main:
        for record in records:
            save(where.results, record, events)
    return records


def _undecided(
    measuring: list[Measuring], world: World, started: float, until_minutes: float | None, events: Events
) -> bool:
    """--until-decided: whether another round is run: the answer from the runs so far is not decided and the minutes
    are not spent (the same on every rank: rank 0's decision)."""
    if until_minutes is None:
        return False
    from iobench.judge.answer import main_answer

    answer = main_answer([m.record(final=False) for m in measuring])
    left = until_minutes * 60 - (time.monotonic() - started)
    more = answer is not None and not (answer.winner is not None and answer.settled) and left > 0
    more = bool(world.gather([1.0 if more else 0.0])[0][0])
    if more:
        events.say(
            f"not decided after {measuring[0].runs_done} rounds: another round in turn ({left / 60:.1f} min left)"
        )
    elif answer is not None and not (answer.winner is not None and answer.settled):
        events.say(f"not decided in {until_minutes:g} minutes: {answer.verdict()}")
    return more


def new_turns(world: World) -> str:
    """A fresh id for records measured in turn together, rank 0's on every rank (the rounds' order comes from it:
    every rank must take the same configuration at the same time)."""
    import secrets

    return f"{int(world.gather([float(secrets.randbits(48))])[0][0]):012x}"


def round_order(measuring: list[Measuring], session: str, k: int) -> list[Measuring]:
    """Round k's order: a fresh random order each round (a configuration never always first after the warm-up of the
    one before it), the same on every rank (seeded by the session and the round)."""
    import random

    order = list(measuring)
    random.Random(f"{session}:{k}").shuffle(order)
    return order


def _estimates(todo: list[ResolvedRun], events: Events, skip: bool) -> list[Estimate | None]:
    """Each configuration's time, from a few measured batches of each (several configurations, one process only)."""
    if skip or len(todo) < 2:
        return [None] * len(todo)
    from iobench.run.estimates import estimated_seconds

    found = [estimated_seconds(r) for r in todo]
    if all(x is not None for x in found) and not interleaved(todo):  # in turn: the runs' bar says it, once
        total = time_range(sum(x.low for x in found), sum(x.high for x in found))  # type: ignore[union-attr]
        events.say(f"{len(todo)} configurations, about {total} in all (from a few measured batches of each)")
    return found
