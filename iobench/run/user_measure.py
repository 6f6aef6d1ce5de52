"""A user's own pipeline measured through the one epoch loop (`iobench.run.epochs`): `iobench.measure` over their
DataLoader (or Dataset), and `run --dataset-factory` over what their function builds. Both give a `RunRecord` that
`report` and `compare` read beside the formats': iobench did not write the data, so it has no ceiling, no
shuffle-quality score and page-cache control only of the files the user names.

The clock is `iobench run`'s (it stops after the device has finished with the last batch), with the same split
(waiting for the loader, host-to-device, step) and AU against the step.
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

from iobench.errors import IobenchError, RunFailed, UserExit, one_line
from iobench.events import QUIET, Events
from iobench.loaders.base import Loader
from iobench.measuring.aggregate import epoch_stats
from iobench.measuring.clocks import EpochTiming
from iobench.measuring.steps import parse_step, user_function
from iobench.measuring.user_loader import UserLoader, split_batch, user_step
from iobench.plan.recorded import recorded_config
from iobench.plan.run_options import Cache
from iobench.plan.selection import FACTORY_LOADER
from iobench.plan.timing import Timing
from iobench.results.record import DatasetInfo, EpochStats, RecordedConfig, RunRecord, SystemStats
from iobench.results.record_base import HostLoad
from iobench.results.record_parts import Environment
from iobench.run.epochs import EpochLoop
from iobench.settings import LoaderSettings, read_back
from iobench.system.contention import RECENT_SECONDS, other_cores_busy
from iobench.system.environment import environment
from iobench.system.sysmetrics import peak_rss_bytes

MEASURE_FORMAT = "user"  # the records' format for a loader handed to iobench.measure


class UserEpochs(EpochLoop):
    """A user's loader, built by `make` per run; cold: `files` evicted before each timed epoch."""

    def __init__(self, make: Callable[[], Loader], what: str, files: Iterable[Path] = ()) -> None:
        self.make, self.what, self.files = make, what, list(files)
        self.cold = bool(self.files)

    def build(self) -> Loader:
        return self.make()

    def make_cold(self, epoch: int) -> None:
        from iobench.storage.local import LocalStorage

        LocalStorage(self.files, self.files[0].parent).make_cold()

    def failure(self, exc: Exception, epoch: int) -> RunFailed:
        if isinstance(exc, IobenchError):  # the batches are not tensors: said as it is
            raise exc
        if isinstance(exc, UserExit):
            return RunFailed(f"{self.what} {exc} during epoch {epoch}")
        # a worker's exception carries its traceback as text: the last line is the reason, with its type
        said = ([line.strip() for line in str(exc).splitlines() if line.strip()] or [""])[-1]
        if not said.startswith(type(exc).__name__):
            said = f"{type(exc).__name__}: {said}"
        return RunFailed(f"{self.what} failed during epoch {epoch}: {one_line(said)}")


@dataclass(frozen=True)
class Described:
    """What a user's batches look like, from the first one."""

    n_samples: int | None  # None: an iterable without a length (counted from the epochs)
    shape: tuple[int, ...]
    dtype: str
    sample_bytes: int
    batch: int


def described(first: Any, n_samples: int | None) -> Described:
    features, _ = split_batch(first)
    sample_bytes = features[0].numel() * features.element_size() if len(features) else 0
    dtype = str(features.dtype).removeprefix("torch.")
    return Described(n_samples, tuple(features.shape[1:]), dtype, sample_bytes, len(features))


def user_record(
    config: RecordedConfig,
    what: Described,
    timings: list[EpochTiming],
    device: torch.device,
    source: str,
    measured: tuple[SystemStats, HostLoad],
) -> RunRecord:
    """The record of a user's pipeline: the data as its first batch showed it, the epochs as the loop timed them."""
    n = what.n_samples or int(statistics.median(t.samples for t in timings))
    system, host = measured
    if device.type == "cuda":
        system = replace(
            system,
            cuda_max_memory_allocated_bytes=torch.cuda.max_memory_allocated(device),
            cuda_max_memory_reserved_bytes=torch.cuda.max_memory_reserved(device),
        )
    return RunRecord(
        timestamp=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        config=config,
        dataset=DatasetInfo(
            data_dir=os.getcwd(),
            n_samples=n,
            sample_shape=list(what.shape),
            dtype=what.dtype,
            sample_bytes=what.sample_bytes,
            dataset_bytes=n * what.sample_bytes,
            workload="custom",
            source=source,
        ),
        epochs=epoch_stats(timings, what.sample_bytes, n, has_step=config.step != "none"),
        system=system,
        host=host,
        environment=Environment(**environment(Path.cwd(), device)),
    )


def measured_system(started: float, load_before: float, other_before: float | None) -> tuple[SystemStats, HostLoad]:
    """The machine around a user's run: its time and peak memory; the load before and after."""
    system = SystemStats(total_seconds=time.perf_counter() - started, **peak_rss_bytes())
    return system, HostLoad(
        load_before=load_before,
        load_after=os.getloadavg()[0],
        other_cpu_before=other_before,
        other_cpu_after=other_cores_busy(),
    )


@dataclass(frozen=True, kw_only=True)
class Measurement(RunRecord):
    """What `iobench.measure` measured: a record (`report` and `compare` read it once appended to a JSONL file with
    `iobench.results.store.append_record`), with every timed epoch and a one-line summary."""

    timings: tuple[EpochTiming, ...] = ()

    @property
    def stats(self) -> EpochStats:
        return self.epochs

    @property
    def samples_per_s(self) -> float:
        return self.epochs.samples_per_s

    @property
    def accelerator_utilisation(self) -> float | None:
        return self.epochs.accelerator_utilisation

    @property
    def sample_bytes(self) -> int:
        return self.dataset.sample_bytes

    @property
    def cache(self) -> str:
        return self.config.cache

    @property
    def device(self) -> str:
        return self.config.device

    @property
    def step(self) -> str:
        return self.config.step

    def summary(self) -> str:
        s = self.epochs
        au = f", AU {s.accelerator_utilisation:.0%} ({self.step})" if s.accelerator_utilisation is not None else ""
        return (
            f"{s.samples_per_s:,.0f} samples/s ({s.mb_per_s:,.1f} MB/s) on {self.device}, {self.cache}, "
            f"epochs {s.epoch_seconds_min:.3f}-{s.epoch_seconds_max:.3f} s; per batch: waiting "
            f"{s.wait_ms_per_batch:.2f} ms, host-to-device {s.h2d_ms_per_batch:.2f} ms, "
            f"step {s.step_ms_per_batch:.2f} ms{au}"
        )


def measure(
    loader_or_dataset: Iterable[Any] | Dataset,
    *,
    device: str | torch.device = "cpu",
    step: str | Callable[..., object] = "none",
    epochs: int = 3,
    warmup: int = 1,
    cache: str | None = None,
    files: Iterable[str | Path] = (),
    batch_size: int = 1024,
    max_seconds: float | None = None,
    non_blocking: bool = True,
    seed: int = 0,
    events: Events = QUIET,
) -> Measurement:
    """Time `epochs` epochs of the user's DataLoader (a Dataset is wrapped in a shuffling DataLoader of
    `batch_size`) on `device`, after `warmup` untimed ones.

    step: none, sleep:MS[:SD], mlp (stand-ins for the model), module:function or a function: your own training
    step, called as `step(features, labels)` with each batch on the device; AU is measured against it.
    cache: warm (after the warm-up; the default with one), as-is (the default without), or cold: `files` (the data
    files the pipeline reads) are evicted from the page cache before each timed epoch; the pipeline must not keep
    them mapped. Checked as a run's (`iobench.plan.timing.Timing`): warm needs a warm-up epoch."""
    dev = torch.device(device)
    own = step if callable(step) else None
    step_name = (
        f"{getattr(step, '__module__', '?')}:{getattr(step, '__qualname__', 'step')}" if own else parse_step(step)
    )
    cache = cache if cache is not None else "warm" if warmup > 0 else "as-is"
    timing = Timing(epochs=epochs, warmup=warmup, runs=1, max_seconds=max_seconds, seed=seed, cache=cache)
    paths = [Path(f) for f in files]
    if timing.cache is Cache.COLD and not paths:
        raise IobenchError("cache='cold' needs files=[...]: the data files to evict before each epoch")
    batches = loader_or_dataset
    if isinstance(loader_or_dataset, Dataset) and not isinstance(loader_or_dataset, Iterable):
        if hasattr(loader_or_dataset, "__len__") and len(loader_or_dataset) == 0:
            raise IobenchError("iobench.measure: the loader or dataset yielded no batch; give it at least one sample")
        batches = DataLoader(loader_or_dataset, batch_size=batch_size, shuffle=True)
    loader = UserLoader(batches, dev, non_blocking)
    source = getattr(batches, "dataset", None)
    first = next(iter(loader.epoch(0)), None)
    loader.end_epoch()
    if first is None:
        raise IobenchError("iobench.measure: the loader or dataset yielded no batch; give it at least one sample")
    what = described(first, len(source) if hasattr(source, "__len__") else None)
    per_sample = int(torch.Size(what.shape).numel())
    run_step = user_function(own, step_name) if own is not None else user_step(step_name, per_sample, dev, seed)
    started = time.perf_counter()
    load_before, other_before = os.getloadavg()[0], other_cores_busy(recent=RECENT_SECONDS)
    subject = UserEpochs(lambda: loader, "your loader", paths if timing.cache is Cache.COLD else ())
    timings = subject.run(1, warmup, epochs, run_step, max_seconds=max_seconds, events=events)
    shuffled = isinstance(getattr(batches, "sampler", None), RandomSampler)
    own_settings = read_back(batches) if isinstance(batches, DataLoader) else {}
    settings = LoaderSettings(**{**own_settings, "batch_size": what.batch or 1, "non_blocking": non_blocking})
    config = recorded_config(
        dataset=type(source if source is not None else batches).__name__,
        format=MEASURE_FORMAT,
        loader=FACTORY_LOADER.value if isinstance(batches, DataLoader) else "user",
        settings=settings,
        shuffle=shuffled,
        epochs=epochs,
        warmup=warmup,
        runs=1,
        max_seconds=max_seconds,
        device=str(dev),
        step=step_name,
        seed=seed,
        options={"cache": timing.cache},
    )
    record = user_record(
        config, what, timings, dev, "iobench.measure", measured_system(started, load_before, other_before)
    )
    fields = {name: getattr(record, name) for name in record.__dataclass_fields__}
    return Measurement(**fields, timings=tuple(timings))
