"""tune's candidates: which settings a search tries for a format, on local files and against object storage.

What it tries of each loader is the loader's declaration (`LoaderKind.tuned`, `tuned_remote`) and the values are
each setting's (`Setting.tune`, `tune_remote`): a setting that counts or keeps workers keeps its default without
them. The workers and batch sizes are tune's own: 0 to the cores (threads from 1; against object storage, a
thread loader also 4 and 16), the batch sizes given.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

from iobench.formats import FORMATS
from iobench.formats.base import tune_values
from iobench.loaders import LOADERS, LoaderKind, LoaderName
from iobench.plan.config import RunConfig
from iobench.plan.selection import FACTORY_LOADER
from iobench.settings import SETTINGS
from iobench.system.environment import usable_cores


def candidates(
    base: RunConfig,
    fmt: str,
    cuda: bool,
    batch_sizes: list[int] | None,
    loaders: Sequence[LoaderName],
    remote: bool = False,
) -> list[RunConfig]:
    """Each loader's search, in the order given (`plan.selection.tuned_loaders`): its settings as it declares them
    (`LoaderKind.tuned`), and for the format's own pipeline every combination of the library knobs its options list
    for tune. With `remote` (object storage), what each loader searches there (requests in flight, not prefetch or
    persistence)."""
    names = list(loaders)
    batches = batch_sizes or [base.settings.batch_size]
    return [c for name in names for c in _searched(base, fmt, LOADERS[name], batches, cuda, remote)]


def _searched(
    base: RunConfig, fmt: str, kind: LoaderKind, batches: list[int], cuda: bool, remote: bool
) -> list[RunConfig]:
    knobs = knob_combinations(fmt) if kind.own_pipeline else [()]
    start = replace(base, format=fmt, loader=kind.name, format_options=())
    out = []
    counts = worker_counts(kind, remote)
    if kind.forks and not FORMATS[fmt].reader_type.traits.fork_safe:  # Lance: its reads refuse forked workers
        counts = [w for w in counts if w == 0]
    for batch, workers in itertools.product(batches, counts):
        for (threads, settings), knob in itertools.product(
            setting_grid(kind, batch, workers, cuda, base.torch_threads, remote), knobs
        ):
            out.append(replace(start, torch_threads=threads, format_options=knob).with_settings(**settings))
    return out


def worker_counts(kind: LoaderKind, remote: bool, cores: int | None = None) -> list[int]:
    """0 to the cores (a loader that needs workers from its least); against object storage a loader whose workers
    are threads also tries as many threads as the fetch threads tune tries there (requests in flight, not cores:
    docs/study/object-storage, one file per sample 32, 125 and 439 samples/s with 1, 4 and 16 threads on 2 cores)."""
    cores = usable_cores() if cores is None else cores
    least = max(kind.min_workers, 0 if kind.forks else 1)
    counts = set(range(least, cores + 1))
    if remote and not kind.forks:
        counts |= {n for n in SETTINGS["fetch_threads"].tune_remote if n > 1}
    return sorted(counts)


def setting_grid(
    kind: LoaderKind, batch: int, workers: int, cuda: bool, torch_threads: int | None, remote: bool = False
) -> list[tuple[int | None, dict]]:
    """(torch threads, settings) of one loader's search at one batch size and worker count: the values of every
    setting it searches (a setting that needs workers at its default without them). torch's threads compete for the
    cores with loading in the main process, and with the workers too (2 threads fought 2 decode workers on 2 cores:
    79.8 images/s, 1 thread with 2 workers 141): one thread is tried beside torch's default at every worker count
    (unless --torch-threads fixed it)."""
    names = kind.tuned_remote if remote else kind.tuned
    values = [
        SETTINGS[n].searched(cuda, remote) if workers or not SETTINGS[n].needs_workers else (SETTINGS[n].default,)
        for n in names
    ]
    main = kind.tune_main_threads and not remote and usable_cores() > 1 and torch_threads is None
    out = []
    for threads, chosen in itertools.product([None, 1] if main else [torch_threads], itertools.product(*values)):
        out.append((threads, dict(batch_size=batch, num_workers=workers, **dict(zip(names, chosen, strict=True)))))
    return out


def worker_grid(
    batch_sizes: list[int], cores: int, cuda: bool, torch_threads: int | None
) -> list[tuple[int | None, dict]]:
    """(torch threads, settings) of torch's DataLoader over a user's Dataset: the DataLoader loader's search."""
    kind = LOADERS[FACTORY_LOADER]
    return [
        g for batch in batch_sizes for w in range(cores + 1) for g in setting_grid(kind, batch, w, cuda, torch_threads)
    ]


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
