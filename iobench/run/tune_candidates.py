"""tune's candidates: which settings a search tries for a format, on local files and against object storage."""

from __future__ import annotations

import itertools
from dataclasses import fields, replace
from typing import Any

from iobench.formats import FORMATS
from iobench.formats.base import tune_values
from iobench.loaders import LoaderName
from iobench.plan.config import RunConfig
from iobench.system.environment import usable_cores


def candidates(
    base: RunConfig,
    fmt: str,
    cuda: bool,
    batch_sizes: list[int] | None,
    tensorclass: bool,
    threads: bool = False,
    native: bool = False,
    remote: bool = False,
) -> list[RunConfig]:
    """num_workers 0..cores, prefetch_factor, persistent workers, in_order, pinning on CUDA, batch sizes
    only when given; the tensorclass loader too when the format is memmap; with `threads` (torchdata is
    installed), torchdata.nodes with 1..cores threads against the worker processes; with `native`, the
    format's own pipeline with the library knobs its options list for tune. With `remote` (object storage),
    the requests in flight instead (`remote_candidates`)."""
    cores = usable_cores()
    if remote:
        return remote_candidates(base, fmt, cuda, batch_sizes, cores, threads, native)
    out = []
    loaders = [LoaderName.DATALOADER] + ([LoaderName.TENSORCLASS] if tensorclass else [])
    if threads:
        out += _thread_candidates(base, fmt, cuda, batch_sizes, cores)
    if native:
        out += _native_candidates(base, fmt, cuda, batch_sizes, cores)
    for loader in loaders:
        grid = worker_grid(batch_sizes or [base.settings.batch_size], cores, cuda, base.torch_threads,
                           unordered=loader is LoaderName.DATALOADER)  # fmt: skip
        for torch_threads, settings in grid:
            out.append(replace(base, format=fmt, loader=loader, torch_threads=torch_threads).with_settings(**settings))
    return out


def worker_grid(
    batch_sizes: list[int], cores: int, cuda: bool, torch_threads: int | None, unordered: bool = True
) -> list[tuple[int | None, dict]]:
    """(torch threads, settings) of a DataLoader's search: 0..cores workers, prefetch_factor default or 4,
    persistent or not, in order or not (`unordered`), pinned or not on CUDA."""
    out = []
    for batch, workers in itertools.product(batch_sizes, range(cores + 1)):
        # Loading in the main process: its torch threads compete with the rest of the job for the cores,
        # so one thread is tried beside torch's default (unless --torch-threads fixed it).
        searched = [None, 1] if workers == 0 and cores > 1 and torch_threads is None else [torch_threads]
        either = [False, True] if workers else [False]
        orders = [True, False] if workers and unordered else [True]
        grid = itertools.product(
            searched, [None, 4] if workers else [None], either, orders, [True, False] if cuda else [False]
        )
        for threads, factor, persistent, in_order, pin in grid:
            settings = dict(batch_size=batch, num_workers=workers, prefetch_factor=factor,
                            persistent_workers=persistent, in_order=in_order, pin_memory=pin)  # fmt: skip
            out.append((threads, settings))
    return out


def knob_combinations(fmt: str) -> list[tuple[tuple[str, Any], ...]]:
    """Every combination of the values the format's options list for tune, as run's format_options (sorted
    by name; a library default is left out, so the defaults are the empty combination)."""
    options_type = FORMATS[fmt].options_type
    knobs = tune_values(options_type)
    defaults = {f.name: f.default for f in fields(options_type)}
    return [
        tuple(sorted((k, v) for k, v in zip(knobs, values, strict=True) if v != defaults[k]))
        for values in itertools.product(*knobs.values())
    ]


def _native_candidates(
    base: RunConfig, fmt: str, cuda: bool, batch_sizes: list[int] | None, cores: int
) -> list[RunConfig]:
    """The format's own pipeline: 0..cores workers, prefetch default or 4, pinning on CUDA, every knob
    combination (a bigger shuffle buffer costs speed and buys shuffle quality: tune's gate weighs it)."""
    grid = itertools.product(batch_sizes or [base.settings.batch_size], range(cores + 1), [None, 4],
                             [True, False] if cuda else [False], knob_combinations(fmt))  # fmt: skip
    return [
        _pipeline(base, fmt, LoaderName.NATIVE, batch, n, factor, True, pin, knobs)
        for batch, n, factor, pin, knobs in grid
        if n or factor is None
    ]


def _pipeline(
    base: RunConfig, fmt: str, loader: LoaderName, batch: int, n: int, factor: int | None, in_order: bool,
    pin: bool, knobs: tuple = (),
) -> RunConfig:  # fmt: skip
    """A candidate of a loader without persistent workers (threads, or a library's own pipeline)."""
    return replace(base, format=fmt, loader=loader, format_options=knobs).with_settings(
        batch_size=batch, num_workers=n, prefetch_factor=factor, persistent_workers=False, in_order=in_order,
        pin_memory=pin,
    )  # fmt: skip


def _thread_candidates(
    base: RunConfig, fmt: str, cuda: bool, batch_sizes: list[int] | None, cores: int
) -> list[RunConfig]:
    """torchdata.nodes: 1..cores threads (none is the DataLoader without workers, searched already),
    prefetch 2 or 4, in order or not, pinning on CUDA."""
    grid = itertools.product(batch_sizes or [base.settings.batch_size], range(1, cores + 1), [None, 4],
                             [True, False], [True, False] if cuda else [False])  # fmt: skip
    return [
        _pipeline(base, fmt, LoaderName.NODES, batch, n, factor, in_order, pin)
        for batch, n, factor, in_order, pin in grid
    ]


# Threads that read against object storage: what pays there is requests in flight, not cores (docs/study/remote,
# sixth part: one file per sample 32, 125 and 439 samples/s with 1, 4 and 16 threads on 2 cores).
REMOTE_THREADS = (1, 4, 16)


def remote_candidates(
    base: RunConfig, fmt: str, cuda: bool, batch_sizes: list[int] | None, cores: int, threads: bool, native: bool
) -> list[RunConfig]:
    """Against object storage: the DataLoader with 0..cores workers, each with 1, 4 or 16 fetch threads;
    torchdata.nodes with 1..cores and 4 and 16 threads, each reading a batch or a sample at a time; the format's
    own pipeline as on local files. Prefetch,
    persistence and order keep their defaults (they move local reads; a remote epoch waits on requests)."""
    batches = batch_sizes or [base.settings.batch_size]
    pins = [True, False] if cuda else [False]
    out = [
        replace(base, format=fmt, loader=LoaderName.DATALOADER).with_settings(
            batch_size=batch, num_workers=n, fetch_threads=t, pin_memory=pin
        )
        for batch, n, t, pin in itertools.product(batches, range(cores + 1), REMOTE_THREADS, pins)
    ]
    if threads:  # each thread a batch, or a sample (every thread on one batch: a request each)
        counts = sorted({*range(1, cores + 1), *REMOTE_THREADS[1:]})
        grid = itertools.product(batches, counts, pins, ("batch", "item"))
        out += [_pipeline(base, fmt, LoaderName.NODES, batch, n, None, True, pin).with_settings(fetch=fetch)
                for batch, n, pin, fetch in grid]  # fmt: skip
    if native:
        out += _native_candidates(base, fmt, cuda, batch_sizes, cores)
    return out
