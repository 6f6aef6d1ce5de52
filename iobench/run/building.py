"""A run's loader over a fresh reader of its format, built the same way for the timed epochs, the untimed prime,
the estimates' probe and the resume check."""

from __future__ import annotations

import torch

from iobench.errors import RunFailed, one_line
from iobench.formats import FORMATS
from iobench.formats.base import FormatReader
from iobench.loaders import LOADERS
from iobench.loaders.base import Loader, LoaderContext
from iobench.loaders.factory import make_loader
from iobench.loaders.transforms import Transform, TransformOn, make_transform
from iobench.plan.config import Cache
from iobench.plan.resolve import ResolvedRun
from iobench.storage.remote import check_fork_safe


def build_loader(resolved: ResolvedRun, stateful: bool = False) -> Loader:
    """A fresh loader over a fresh reader of the resolved format (one per run, and per cold epoch; `stateful`: the
    resume check's); a file that cannot be opened as checked (swapped mid-run, truncated) ends the run in one line."""
    try:
        return _build_loader(resolved, stateful)
    except (OSError, ValueError) as exc:
        raise RunFailed(f"opening {resolved.config.format} failed: {type(exc).__name__}: {one_line(exc)}") from None


def _build_loader(resolved: ResolvedRun, stateful: bool) -> Loader:
    c = resolved.config
    # torch imports a profiler module lazily at the first batch of any DataLoader (record_function's first use): a
    # worker killed then made it log a 23-line traceback beside the run's one line. Imported here, before workers.
    with torch.autograd.profiler.record_function("iobench"):
        pass
    check_fork_safe(resolved.storage, c.settings.num_workers if LOADERS[c.loader].forks else 0)
    reader = open_reader(resolved)
    host = transform_on(resolved, TransformOn.HOST)
    ctx = LoaderContext(
        reader,
        resolved.epoch_order(),
        c.settings,
        resolved.device,
        transform=host,
        cold=c.cache is Cache.COLD,
        format_name=c.format,
        format_options=resolved.entry.options,
        stateful=stateful,
    )
    return make_loader(c.loader, ctx)


def open_reader(resolved: ResolvedRun) -> FormatReader:
    """The format's reader over the run's storage, told how it will read (in order; larger than the cache)."""
    FORMATS.import_library(resolved.config.format)  # before workers fork: not imported again each epoch
    fmt, entry, storage = FORMATS[resolved.config.format], resolved.entry, resolved.storage
    hints = storage.hints(sequential=not resolved.config.shuffle)
    reader = fmt.reader(storage, resolved.manifest.spec, fmt.options_from_json(entry.options), hints)
    reader.import_libraries()
    return reader


def transform_on(resolved: ResolvedRun, side: TransformOn) -> Transform | None:
    """The run's transform when it runs on that side; None without one."""
    c, spec = resolved.config, resolved.manifest.spec
    if c.transform == "none" or c.transform_on is not side:
        return None
    return make_transform(c.transform, spec.shape, spec.dtype)
