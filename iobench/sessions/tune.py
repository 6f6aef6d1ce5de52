"""One `iobench tune`, whole: the candidates of a prepared format (its dataset found or prepared, served when read
from object storage) or of the user's own Dataset, the search within its budget (`iobench.run.tune`), the winner
measured again, its script written beside the results and run as the user would run it. It talks through `Events`
and prints nothing: the command line prints the `TuneOutcome`."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from iobench.errors import IobenchError
from iobench.events import Events
from iobench.loaders import DEFAULT_LOADER
from iobench.plan.command_values import config_of
from iobench.plan.config import RunConfig
from iobench.plan.place import RunPlace
from iobench.plan.resolve import RunTarget, device_of, settle_device
from iobench.plan.selection import tuned_loaders
from iobench.results.store import pasted_code_path
from iobench.run.dataset_factory import FactoryRequest
from iobench.run.paste_check import PasteCheck
from iobench.run.tune import CONFIRM_SHARE, Candidate, TuneResult, TuneSearch, confirm, tune
from iobench.settings import LoaderSettings
from iobench.system.fsutil import atomic_write_text


@dataclass(frozen=True)
class TuneRequest:
    """A search as its command gave it: a prepared format (its base configuration: step, order, run options), or the
    user's Dataset (a FactoryRequest); the batch sizes, the budget in minutes and in rounds, the shuffle floor."""

    place: RunPlace  # its device as given (auto, cpu, cuda:N): `device` is it resolved here
    batch_sizes: list[int]
    searched_sizes: bool  # a comma list of batch sizes was given: each is a candidate
    budget_minutes: float
    rounds: int | None
    min_shuffle: float
    check_paste: bool = True
    base: RunConfig | None = None  # a prepared format's
    factory: FactoryRequest | None = None  # or the user's own pipeline

    @property
    def device(self) -> torch.device:
        """The place's device, usable here (auto resolved), or a one-line refusal."""
        return device_of(str(self.place.device))


@dataclass
class TuneOutcome:
    """What the search found, for the command line to print: the ranking, the recommendation (the script written,
    or, where no script reads as the search did, the run that measures it again), the pasted script's check."""

    what: str
    candidates: int
    result: TuneResult
    script: Path | None = None
    script_text: str | None = None
    command: str | None = None  # no script (object storage through iobench's readers): the run to paste
    figure: str | None = None  # the recommendation's figure as pasted
    paste_check: PasteCheck | None = None
    settled: bool = False  # the best has an interval: a recommendation; else the best measured so far, unsettled


def tune_session(request: TuneRequest, events: Events) -> TuneOutcome:
    """The search of `request` (see the module's docstring)."""
    if request.factory is not None:
        return _searched(factory_search(request), request, events)
    from iobench.run.preparing import dataset_for_run
    from iobench.run.serving import served
    from iobench.system.world import SINGLE

    where, fmt = request.place, request.base.format
    dataset_dir = dataset_for_run(SINGLE, where.data_dir, where.dataset, (fmt,), events)
    with served(where.remote, where.endpoint_url, dataset_dir, where.fuse) as remote:
        return _searched(format_search(request, dataset_dir, remote, events), request, events)


def _searched(search: TuneSearch, request: TuneRequest, events: Events) -> TuneOutcome:
    """The search (within most of the budget), the winner measured again in a fresh run (the rest of it), its script
    written and checked."""
    results, floor = request.place.results, request.min_shuffle
    script_path = pasted_code_path(results, "best") if search.script is not None else None  # checked before the search
    events.say(
        f"tuning {search.what} on {request.device}: {len(search.found)} candidate settings, at most "
        f"{request.budget_minutes:g} min"
    )
    budget = request.budget_minutes * 60
    with events.search(budget) as bar:
        result = tune(search.found, search.trials, budget * (1 - CONFIRM_SHARE), results, bar, floor, request.rounds)
        confirm(result, search.trials, results, bar)
    outcome = TuneOutcome(search.what, len(search.found), result)
    if not result.ranked or not result.best.rates or not result.best.meets(floor):
        return outcome
    # an unsettled best (fewer than two epochs) is still printed as code, with its caveat: the user leaves with
    # something runnable (`--budget-minutes 2` said "inconclusive" and printed nothing)
    outcome.settled = recommendable(result)
    best = result.best
    outcome.figure = pasted_figure(best)
    if search.script is None:
        outcome.command = search.command(best.config) if search.command is not None else None
        return outcome
    outcome.script_text = search.script(best.config, outcome.figure)
    outcome.script = script_path
    atomic_write_text(outcome.script, outcome.script_text)
    if request.check_paste and best.confirmed is not None and outcome.settled:
        from iobench.run.paste_check import check_paste

        epoch = best.confirmed.epochs.epoch_seconds_median
        events.say(f"checking the pasted script in a fresh process: {outcome.script}")
        outcome.paste_check = check_paste(outcome.script_text, str(outcome.script), timeout_s=120 + 30 * epoch)
    return outcome


def recommendable(result: TuneResult) -> bool:
    """A winner that meets the shuffle floor and has an interval (two epochs or more)."""
    if not result.ranked or not result.best.meets(result.min_shuffle):
        return False
    return result.best.interval().finite


def pasted_figure(best: Candidate) -> str:
    """The figure pasted: the winner's fresh run after the search where it has one, else the search's median."""
    spread = f"{min(best.rates):,.0f}-{max(best.rates):,.0f}"
    if best.confirmed is not None and (again := best.confirmed_rates):
        return (
            f"{statistics.median(again):,.0f} samples/s measured again after the search (epochs "
            f"{min(again):,.0f}-{max(again):,.0f})"
        )
    return f"{best.median:,.0f} samples/s measured (epochs {spread})"


def format_search(request: TuneRequest, dataset_dir: Path, remote: Any, events: Events) -> TuneSearch:
    """A prepared format's candidates: the DataLoader (and tensorclass, torchdata.nodes where they apply); from
    object storage (`remote`), its workers and threads, each trial in a process of its own."""
    from iobench.plan.paste import best_script, run_command
    from iobench.run.serving import limits_of
    from iobench.run.tune import FormatTrials
    from iobench.run.tune_candidates import candidates

    base, target = request.base, request.device
    fmt = base.format
    sizes = request.batch_sizes if request.searched_sizes else None
    found = candidates(
        base, fmt, target.type == "cuda", sizes, tuned_loaders(fmt, remote is not None), remote=remote is not None
    )
    limits = limits_of(remote, dataset_dir, target, request.place.results, events)
    trials = FormatTrials(RunTarget(dataset_dir, target, remote), limits)
    if remote is None:
        script, command = partial(best_script, dataset_dir=dataset_dir, device=str(target)), None
    else:
        place = request.place.remote_flags()
        script, command = None, partial(run_command, place=place, device=str(target))
    return TuneSearch(fmt, [settle_device(c, target) for c in found], trials, script, command)


def format_base(fmt: str, batch: int, shuffle: bool, step: str, run_options: dict[str, Any]) -> RunConfig:
    """A prepared format's base configuration: the user's transform and step (workers pay off with a per-sample
    augmentation and not without) and the run options tune takes."""
    base = config_of(fmt, DEFAULT_LOADER, LoaderSettings(batch_size=batch), shuffle=shuffle, block_size=0)
    return replace(base, step=step, **run_options)


def factory_search(request: TuneRequest) -> TuneSearch:
    """tune over the user's Dataset: the factory called once, each candidate a DataLoader over it."""
    from iobench.plan.paste import factory_script
    from iobench.run.dataset_factory import FactoryTrials, factory_candidates, plan

    base, device = request.factory, request.device
    planned = plan(base, device)
    if planned.own_loader:
        raise IobenchError(f"{base.factory} returns a DataLoader: tune needs the Dataset, to build DataLoaders over it")
    sizes = request.batch_sizes if request.searched_sizes else None
    found = factory_candidates(base, device.type == "cuda", sizes)
    features = math.prod(planned.shape) if planned.shape else 1
    script = partial(factory_script, folder=Path.cwd(), device=str(device), features_per_sample=features)
    return TuneSearch(base.factory, found, FactoryTrials(planned), script)
