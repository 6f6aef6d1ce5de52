"""`iobench tune`: which DataLoader settings to type, searched on the user's data and machine.

Successive halving: every candidate runs one short round; the better half runs a longer one, and so on,
while time is left. A candidate's evidence is every timed epoch it ran; the search stops early when the
leader's 95% confidence interval is tight (pyperf-style) and clear of the runner-up's. Every round is an
ordinary run whose record goes to the results file, so `report` shows the search and a stopped search
resumes: a round whose record is already there is not run again.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from iobench.events import QUIET, Events
from iobench.judge.intervals import Interval, interval_of
from iobench.judge.paired import record_share
from iobench.judge.search import (
    STOP_APART,
    STOP_BUDGET,
    STOP_ONE_LEFT,
    by_median,
    near,
    ranking,
    settled,
    settled_in_pairs,
)
from iobench.judge.shuffle import score_of, shuffles
from iobench.loaders import LOADERS
from iobench.plan.config import RunConfig
from iobench.plan.resolve import RunTarget, resolve
from iobench.results.limits import MachineLimits, RemoteLimits
from iobench.results.record import RunRecord
from iobench.results.store import append_record, load_records
from iobench.run.isolated import run_isolated
from iobench.run.runner import run
from iobench.settings import loading, settings_parts
from iobench.system.waits import share_of

TIGHT = 0.03  # the leader's CI half-width below this share of its median: enough evidence
ROUND_EPOCHS = (1, 2, 4, 8)  # timed epochs per round; later rounds repeat the last
# The first round's epochs are cut at the budget over 4x the candidates (a warm-up and a timed epoch each,
# and their set-up), within these bounds; later rounds read whole epochs.
FIRST_ROUND_MIN_S, FIRST_ROUND_MAX_S = 0.5, 10.0


# The winner is measured again after the search, in a fresh run of its own, and that figure is the one reported and
# pasted: the best median of many noisy candidates is biased upwards (the winner's curse; the pasted script ran at
# 0.64-0.74 of the search's figure on a shared machine). A share of the budget is kept for it and for the script's
# check; its epochs are a count no round has, so its record is its own.
CONFIRM_EPOCHS = 5
CONFIRM_SHARE = 0.15


@dataclass
class Candidate:
    config: Any  # a RunConfig, or a FactoryRequest (tune --dataset-factory): settings, loader, label
    rates: list[float] = field(default_factory=list)  # samples/s of every timed epoch it ran
    records: list[RunRecord] = field(default_factory=list)
    confirmed: RunRecord | None = None  # the winner's fresh run after the search (`confirm`)

    @property
    def confirmed_rates(self) -> list[float]:
        """samples/s of each epoch of its confirmation run (none before it)."""
        if self.confirmed is None:
            return []
        e = self.confirmed.epochs
        return [e.samples_per_epoch / x for x in e.epoch_seconds if x > 0]

    @property
    def median(self) -> float:
        return statistics.median(self.rates) if self.rates else 0.0

    @property
    def wait_share(self) -> float | None:
        """The share of its runs' runnable time their processes waited for a CPU, over every round (None where a
        round's waits were not recorded whole)."""
        shares = [record_share(r) for r in self.records]
        if not shares or any(s is None for s in shares):
            return None
        cpu = sum(sum(r.waits.unit_cpu_s) for r in self.records)
        return share_of(cpu, sum(sum(r.waits.unit_cpu_wait_s) for r in self.records))

    def interval(self) -> Interval:
        """The interval of the median samples/s, the figure tune ranks and prints (the judgement's `interval_of`:
        0.95 or more from 6 epochs on, the whole range, less sure, with fewer)."""
        return interval_of(self.rates)

    @property
    def epoch_seconds(self) -> float:
        """Its latest round's median epoch, in seconds (0: not run)."""
        return self.records[-1].epochs.epoch_seconds_median if self.records else 0.0

    @property
    def shuffle(self) -> float | None:
        """The worse of its delivered order's spread and order scores (1.0: as good as a uniform shuffle) in
        its latest round; None before it ran, or unscored (a user's own pipeline)."""
        return score_of(self.records[-1]) if self.records else None

    def meets(self, floor: float) -> bool:
        """Shuffles at least `floor` as the judgement decides it (`judge.shuffle.shuffles`); unscored or no floor:
        it does."""
        return self.shuffle is None or floor <= 0 or shuffles(self.records[-1], floor)

    @property
    def threads(self) -> bool:
        """Its --num-workers are threads of this process (torchdata.nodes, SPDL), not forked processes."""
        return not LOADERS[self.config.loader].forks

    @property
    def loading(self) -> str:
        """What loads: '2 processes' (DataLoader workers, or the main process without them), '2 threads',
        '2 processes x 16 threads' (threads inside each worker)."""
        return loading(self.config.settings, threads=not LOADERS[self.config.loader].forks)


@dataclass
class TuneResult:
    ranked: list[Candidate]  # best first
    rounds: int
    seconds: float
    stopped: str  # why the search ended
    reused: int = 0  # candidate rounds taken from the results file of a stopped search, not run again
    candidates: int = 0  # how many were searched (ranked holds those measured); 0: as many as ranked
    min_shuffle: float = 0.0  # the floor a recommendation's shuffle score met (0: none asked)

    @property
    def best(self) -> Candidate:
        return self.ranked[0]

    def within_noise(self) -> list[Candidate]:
        """Candidates (with an interval: two epochs or more) whose interval overlaps the best's: this search
        cannot tell them from it."""
        best = self.best.interval()
        return [c for c in self.ranked[1:] if near(best, c.interval()) and c.meets(self.min_shuffle)]


class Trials(Protocol):
    """How a candidate is measured: `trial` gives the identity of the record `epochs` timed epochs (after
    one warm-up) would have, so a stopped search's stored record is reused, and the measurement to run."""

    def trial(self, config: Any, epochs: int, max_seconds: float | None) -> tuple[tuple, Callable[[], RunRecord]]:
        """`max_seconds` cuts each epoch (the first round's, so one slow candidate cannot spend the budget)."""
        ...


@dataclass(frozen=True)
class TuneSearch:
    """What `tune` searches, whoever built it: the candidates, how each is measured, the script of the best."""

    what: str  # the format, or the user's factory, as the command says it
    found: list[Any]  # RunConfigs settled for the device, or a factory's requests
    trials: Trials
    # (the best candidate, the figure measured) -> the script to paste; None where no script reads as the
    # search did (object storage through iobench's readers), and `command` gives the run that does
    script: Callable[[Any, str], str] | None
    command: Callable[[Any], str] | None = None


@dataclass
class FormatTrials:
    """A prepared format's candidates, run as `iobench run` runs them."""

    target: RunTarget
    limits: MachineLimits | RemoteLimits | None

    def trial(self, config: RunConfig, epochs: int, max_seconds: float | None) -> tuple[tuple, Callable[[], RunRecord]]:
        round_config = replace(config, epochs=epochs, runs=1, warmup=1, max_seconds=max_seconds)
        resolved = resolve(round_config, self.target)
        if self.target.remote is not None:  # each from a process that has not read object storage (run.isolated)
            return resolved.recorded().identity(), lambda: run_isolated(resolved, self.limits)
        return resolved.recorded().identity(), lambda: run(resolved, self.limits)


@dataclass
class _Search:
    """What every round shares: how to measure, the records already stored, and the time budget."""

    trials: Trials
    results: Path
    budget_seconds: float
    # the stored records of each identity in file order: later rounds repeat 8 epochs, so one candidate's rounds share
    # an identity, and a resumed search takes them in the order they were run (one record for all of them changed
    # the ranking, and the resume confirmed another winner)
    known: dict[tuple, list[RunRecord]]
    events: Events = QUIET
    started: float = field(default_factory=time.monotonic)
    per_epoch: float | None = None  # the dearest epoch so far, with its share of warm-up and set-up
    reused: int = 0  # rounds whose record a stopped search had already stored
    order: random.Random = field(default_factory=random.Random)  # each round's order, fresh

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def round(self, k: int, epochs: int, alive: list[Candidate]) -> bool:
        """Each candidate runs `epochs` timed epochs; False when the budget stopped the round. The first
        round cuts every epoch at a share of the budget: a pipeline 100x slower than the rest (LitData's
        full shuffle window decoding chunk by chunk) shows it in seconds, and the rest still get measured."""
        cap = None if k else min(FIRST_ROUND_MAX_S, max(FIRST_ROUND_MIN_S, self.budget_seconds / (4 * len(alive))))
        turn = list(alive)  # ranked by the rounds before
        need = len(turn) * (self.per_epoch or 0.0) * (epochs + 1)
        if self.elapsed() + need <= self.budget_seconds:  # in turn, in a fresh order: a drift within the round falls
            self.order.shuffle(turn)  # on no one candidate
        # else the budget will cut the round: the leaders first, so that what it measures is what could win (taken in
        # a fresh order, a 5x leader of the first round waited at the end of a cut second one and lost, unmeasured)
        for cand in turn:
            identity, measure = self.trials.trial(cand.config, epochs, cap)
            if self.per_epoch is not None and self.elapsed() + self.per_epoch * (epochs + 1) > self.budget_seconds:
                return False
            stored = self.known.get(identity)
            record = stored.pop(0) if stored else None
            if record is None:
                record = measure()
                append_record(self.results, record)
            else:
                self.reused += 1
            cand.records.append(record)
            cand.rates += [record.epochs.samples_per_epoch / s for s in record.epochs.epoch_seconds if s > 0]
            total = record.system.total_seconds or sum(record.epochs.epoch_seconds)
            self.per_epoch = max(self.per_epoch or 0.0, total / (epochs + 1))
            self.events.round_done(k, f"{cand.config.label} {settings_text(cand.config)}")
        return True


def _settled(leader: Candidate, second: Candidate) -> bool:
    """The leader's interval is tight and clear of the runner-up's, or its lead in the rounds' pairs is tight and
    above 1, once the runner-up is credited with its wait for a CPU beyond the leader's."""
    shares = (leader.wait_share, second.wait_share)
    return settled(leader.interval(), second.interval(), TIGHT) or settled_in_pairs(
        leader.rates, second.rates, TIGHT, shares
    )


def tune(
    configs: list[Any],
    trials: Trials,
    budget_seconds: float,
    results: Path,
    events: Events = QUIET,
    min_shuffle: float = 0.0,
    max_rounds: int | None = None,
) -> TuneResult:
    """Successive halving over `configs` (RunConfigs settled for the device, or a factory's requests), within the time
    budget and at most `max_rounds` rounds (a budget a busy machine cannot make a search miss).

    A candidate whose delivered order scores below `min_shuffle` (a shard format's small buffer) leaves
    the search after the round that showed it and is ranked after every one that met it: speed alone
    would always pick the least shuffled."""
    alive = [Candidate(c) for c in configs]
    every = list(alive)
    known: dict[tuple, list[RunRecord]] = {}
    for r in load_records(results).records if results.is_file() else []:
        known.setdefault(r.identity(), []).append(r)
    search = _Search(trials, results, budget_seconds, known, events)
    rounds = 0
    for k in itertools.count():
        if not search.round(k, ROUND_EPOCHS[min(k, len(ROUND_EPOCHS) - 1)], alive):
            stopped = STOP_BUDGET
            break
        rounds = k + 1
        if max_rounds is not None and rounds >= max_rounds:
            stopped = f"{max_rounds} round(s), as --rounds asked"
            break
        alive = [c for c in alive if c.meets(min_shuffle)]
        alive = by_median(alive)
        if not alive:
            stopped = f"no candidate shuffled to {min_shuffle:g}"
            break
        if len(alive) == 1:
            stopped = STOP_ONE_LEFT
            break
        if _settled(alive[0], alive[1]):
            stopped = STOP_APART
            break
        alive = alive[: math.ceil(len(alive) / 2)]
    return TuneResult(
        ranking(every, min_shuffle), rounds, search.elapsed(), stopped, search.reused, len(every), min_shuffle
    )


def confirm(outcome: TuneResult, trials: Trials, results: Path, events: Events = QUIET) -> RunRecord | None:
    """The winner measured again in a fresh run (`CONFIRM_EPOCHS` timed epochs after a warm-up), its record appended
    to the results (a stored one of the same winner is taken instead: a finished search resumed runs nothing): the
    figure tune reports and pastes. None where nothing qualified."""
    best = outcome.best if outcome.ranked else None
    if best is None or not best.meets(outcome.min_shuffle) or len(best.rates) < 2:
        return None
    identity, measure = trials.trial(best.config, CONFIRM_EPOCHS, None)
    known = {r.identity(): r for r in load_records(results).records} if results.is_file() else {}
    record = known.get(identity)  # a finished search resumed: its confirmation is stored, not run again
    if record is None:
        record = measure()
        append_record(results, record)
    best.confirmed = record
    events.round_done(outcome.rounds, f"confirming {best.config.label} {settings_text(best.config)}")
    return record


def settings_text(c: Any) -> str:
    """A candidate's settings as reports write them."""
    threads = [f"threads={c.torch_threads}"] if c.torch_threads is not None else []
    knobs = [f"{k}={v}" for k, v in getattr(c, "format_options", ())]  # the library's own, --loader native
    fetch = getattr(c.settings, "fetch", None)  # a user's own pipeline's settings have none
    item = ["fetch=item"] if fetch is not None and fetch.value == "item" else []  # a sample per call, not a batch
    return " ".join(settings_parts(c.settings) + item + threads + knobs)
