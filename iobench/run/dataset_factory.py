"""`run --dataset-factory pkg.module:make_dataset`: the user's own pipeline timed as `run` times a format.

request -> plan -> result, as `prepare` works: a `FactoryRequest` (the command line's values) is planned
into a `FactoryPlan` (the function imported and called once, its first sample described, every refusal
made before anything is timed), whose result is one `RunRecord` per configuration, with format `factory`
and the function's name as its dataset, so `report` and `compare` read it beside the formats. The clock,
the split and AU are `iobench.measure`'s (`iobench.run.user_measure`): what the factory builds is the user's code, not a
format iobench wrote, so it has no page-cache control (cold needs the files: `iobench.measure(files=...)`),
no ceiling and no shuffle-quality score (its delivered order is not visible to iobench).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, RandomSampler, default_collate

from iobench.errors import IobenchError, exited, one_line
from iobench.events import QUIET, Events
from iobench.measuring.user_code import load_callable
from iobench.measuring.user_loader import UserLoader, user_step
from iobench.plan.recorded import recorded_config
from iobench.plan.run_options import Cache
from iobench.plan.selection import FACTORY_LOADER
from iobench.plan.timing import Timing
from iobench.results.record import RecordedConfig, RunRecord
from iobench.run.tune_candidates import worker_grid
from iobench.run.user_measure import Described, UserEpochs, described, measured_system, user_record
from iobench.settings import (
    TORCH_DATALOADER,
    Fetch,
    LoaderSettings,
    check_counts,
    check_workers,
    dataloader_arguments,
    read_back,
    refused,
)
from iobench.system.contention import RECENT_SECONDS, other_cores_busy, torch_threads
from iobench.system.environment import check_parallelism, usable_cores

FACTORY_FORMAT = "factory"  # the records' format for a user's pipeline


def load_factory(text: str) -> Callable[[], Any]:
    """`pkg.module:function` imported as `python -m` would import it: the working directory first."""
    return load_callable(text, "--dataset-factory")


@dataclass(frozen=True, kw_only=True)
class FactoryRequest(Timing):
    """What the command line asked for: the user's factory, the DataLoader's settings and order, and how it is timed
    (a Timing, checked as a prepared format's run is)."""

    factory: str
    settings: LoaderSettings
    shuffle: bool = True

    # what tune's table and paste read from a candidate, as from a RunConfig
    loader = FACTORY_LOADER
    label = f"{FACTORY_FORMAT}/{FACTORY_LOADER}"


@dataclass(frozen=True)
class FactoryPlan:
    """The request checked against what the factory built; `dataset` is a Dataset or the user's DataLoader."""

    request: FactoryRequest
    dataset: Any
    device: torch.device
    n_samples: int | None  # None: an iterable without a length (counted from the epochs)
    shape: tuple[int, ...]
    dtype: str
    sample_bytes: int
    batch: int  # the first batch's samples: a DataLoader with a batch sampler has no batch_size

    @property
    def own_loader(self) -> bool:
        """The factory built the DataLoader itself: its settings are the user's, recorded as they are."""
        return isinstance(self.dataset, DataLoader)

    def loader(self) -> DataLoader:
        """A fresh DataLoader per run (a persistent worker pool lives as long as one run)."""
        if self.own_loader:
            return self.dataset
        s, r = self.request.settings, self.request
        kwargs: dict[str, Any] = dict(batch_size=s.batch_size, shuffle=r.shuffle, **dataloader_arguments(s))
        if r.shuffle:
            kwargs["generator"] = torch.Generator().manual_seed(r.seed)
        return DataLoader(self.dataset, **kwargs)

    def settings(self) -> LoaderSettings:
        """The settings the timed DataLoader has (the user's own, when the factory built it); it fetches a
        batch per call only from a Dataset with `__getitems__`, else sample by sample."""
        source = self.dataset.dataset if self.own_loader else self.dataset
        fetch = Fetch.BATCH if hasattr(source, "__getitems__") else Fetch.ITEM
        if not self.own_loader:
            return replace(self.request.settings, fetch=fetch)
        d = self.dataset
        own = read_back(d)
        return replace(self.request.settings, **own, batch_size=d.batch_size or self.batch, fetch=fetch)


def plan(request: FactoryRequest, device: torch.device, given: tuple[str, ...] = ()) -> FactoryPlan:
    """Import and call the factory once and describe its first sample; `given` names the loader options
    typed on the command line (refused when the factory builds its own DataLoader)."""
    _check(request)
    if request.cache is Cache.COLD:
        raise IobenchError(
            "--dataset-factory: iobench does not know which files your pipeline reads, so it cannot evict them; "
            "time it cold from Python with iobench.measure(..., cache='cold', files=[...])"
        )
    made = _called(load_factory(request.factory), f"{request.factory}()")
    if isinstance(made, DataLoader):
        if given:
            raise IobenchError(
                f"{request.factory} returns a DataLoader, whose settings are its own: drop {', '.join(given)} "
                "(or return the Dataset and let iobench build the DataLoader)"
            )
        if made.batch_size is None and made.batch_sampler is None:
            raise IobenchError(f"{request.factory} returns a DataLoader of single samples (batch_size=None)")
        first = _called(lambda: next(iter(made)), f"{request.factory}: its first batch")
    elif isinstance(made, IterableDataset):
        if request.shuffle:
            raise IobenchError(f"{request.factory} returns an IterableDataset, which orders itself: add --no-shuffle")
        first = default_collate([_called(lambda: next(iter(made)), f"{request.factory}: its first sample")])
    elif isinstance(made, Dataset):
        if _length(made) == 0:
            raise IobenchError(f"{request.factory} returned an empty Dataset")
        first = default_collate([_called(lambda: made[0], f"{request.factory}: its first sample")])
    else:
        raise IobenchError(
            f"{request.factory} returned {type(made).__name__}; it must return a torch Dataset or DataLoader"
        )
    source = made.dataset if isinstance(made, DataLoader) else made
    what = described(first, _length(source))
    return FactoryPlan(request, made, device, what.n_samples, what.shape, what.dtype, what.sample_bytes, what.batch)


def _check(r: FactoryRequest) -> None:
    s = r.settings  # the Timing's epochs, runs, cache, threads and step are checked as it is made
    check_counts(s)
    check_workers(s)
    if (refusal := refused(s, TORCH_DATALOADER, FACTORY_LOADER.value, {})) is not None:
        own = refusal.removeprefix(f"--loader {FACTORY_LOADER} ")
        raise IobenchError(
            f"--dataset-factory: {own}: iobench builds a DataLoader over your Dataset with torch's own keywords"
        )
    check_parallelism(s.num_workers, r.torch_threads)


def _called(function: Callable[[], Any], what: str) -> Any:
    try:
        return function()
    except SystemExit as exc:  # the user's code ending the process: a failure, named
        raise IobenchError(f"{what} {exited(exc)}") from None
    except Exception as exc:  # the user's code: its failure in one line, named
        raise IobenchError(f"{what} failed: {type(exc).__name__}: {one_line(exc)}") from None


def _length(dataset: Any) -> int | None:
    """The dataset's length, None for one without (an iterable dataset); one that cannot say is refused."""
    try:
        return len(dataset)
    except TypeError:
        return None
    except Exception as exc:  # the user's __len__: its failure in one line (a negative length is a ValueError)
        raise IobenchError(f"the dataset's __len__ failed: {type(exc).__name__}: {one_line(exc)}") from None


def run_factory(planned: FactoryPlan, events: Events = QUIET) -> RunRecord:
    """`runs` fresh DataLoaders, each a warm-up and `epochs` timed epochs (`iobench.run.epochs`); one record."""
    r, device = planned.request, planned.device
    run_step = user_step(r.step, int(torch.Size(planned.shape).numel()), device, r.seed)
    started = time.perf_counter()
    with torch_threads(r.torch_threads):
        load_before, other_before = os.getloadavg()[0], other_cores_busy(recent=RECENT_SECONDS)
        # a fresh DataLoader per run: its workers end with it (persistent ones included)
        subject = UserEpochs(lambda: UserLoader(planned.loader(), device, r.settings.non_blocking), r.factory)
        timings = subject.run(r.runs, r.warmup, r.epochs, run_step, max_seconds=r.max_seconds, events=events)
        measured = measured_system(started, load_before, other_before)
    what = Described(planned.n_samples, planned.shape, planned.dtype, planned.sample_bytes, planned.batch)
    return user_record(_recorded(planned), what, timings, device, r.factory, measured)


def _recorded(planned: FactoryPlan) -> RecordedConfig:
    r, s = planned.request, planned.settings()
    shuffle = r.shuffle if not planned.own_loader else isinstance(planned.dataset.sampler, RandomSampler)
    return recorded_config(
        dataset=r.factory,
        format=FACTORY_FORMAT,
        loader=FACTORY_LOADER.value,
        settings=s,
        shuffle=shuffle,
        epochs=r.epochs,
        warmup=r.warmup,
        runs=r.runs,
        max_seconds=r.max_seconds,
        device=str(planned.device),
        step=r.step,
        seed=r.seed,
        options={"cache": r.cache, "torch_threads": r.torch_threads},
    )


def factory_candidates(base: FactoryRequest, cuda: bool, batch_sizes: list[int] | None) -> list[FactoryRequest]:
    """tune's DataLoader grid over the user's Dataset (the formats' grid without iobench's own loaders)."""
    grid = worker_grid(batch_sizes or [base.settings.batch_size], usable_cores(), cuda, base.torch_threads)
    return [replace(base, torch_threads=t, settings=replace(base.settings, **changes)) for t, changes in grid]


@dataclass
class FactoryTrials:
    """tune's candidates over one Dataset the factory built (built once: each candidate its own DataLoader)."""

    planned: FactoryPlan

    def trial(
        self, request: FactoryRequest, epochs: int, max_seconds: float | None
    ) -> tuple[tuple, Callable[[], RunRecord]]:
        round_request = replace(request, epochs=epochs, runs=1, warmup=1, max_seconds=max_seconds)
        planned = replace(self.planned, request=round_request)
        return _recorded(planned).identity(), lambda: run_factory(planned)
