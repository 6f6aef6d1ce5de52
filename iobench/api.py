"""iobench from Python: a prepared dataset as a torch Dataset that reads whole batches.

`tune` prints code built on `open_dataset` and `Batches`, so what a user pastes reads the way the winning
run read: a sampler that hands the dataset one numpy array of indices per batch (no Python list of ints
per batch: at millions of samples/s that alone cost a third of the rate), one read per batch, a run of
consecutive samples as one range read, never a pickled object from the dataset folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from iobench.errors import IobenchError
from iobench.loaders.dataloader import passthrough  # noqa: F401 - re-exported for tune's script
from iobench.loaders.order import as_slice
from iobench.measuring.user_loader import split_batch  # noqa: F401 - re-exported for tune's script


def _window(indices: list[int] | np.ndarray) -> slice | np.ndarray:
    """A run of consecutive indices as a slice (one range read, as a sequential epoch reads), else the array."""
    idx = np.asarray(indices, dtype=np.int64)
    return as_slice(idx) or idx


class BatchReads(Dataset):
    """A format reader as a map-style Dataset: `dataset[i]` is one sample, `__getitems__` a whole batch."""

    def __init__(self, reader: Any, transform: Any = None) -> None:
        from iobench.loaders.dataloader import ReaderDataset

        self._inner = ReaderDataset(reader, transform)

    def __len__(self) -> int:
        return len(self._inner)

    def __getitem__(self, index: int | np.ndarray) -> Any:
        """One sample for an int; a whole batch for an array of indices (what `Batches` hands over)."""
        if isinstance(index, np.ndarray):
            return self._inner[_window(index)]
        return self._inner[int(index)]

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        return self._inner[_window(indices)]


class ThreadBatches:
    """A dataset's batch reads for threads (torchdata.nodes' `ParallelMapper(method="thread")`): each thread
    reads through its own copy of the format's reader; LMDB, one opening per process, keeps a transaction
    per thread. Call it with a batch's indices (what `Batches` yields)."""

    def __init__(self, dataset: BatchReads) -> None:
        from iobench.loaders.nodes import ThreadDatasets

        inner = dataset._inner
        self._readers = ThreadDatasets(inner.reader, inner.transform, carry=False)

    def __call__(self, indices: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return self._readers.read(_window(indices))

    def close(self) -> None:
        self._readers.close()


class TensorclassReads(Dataset):
    """The memmap format as tensordict's tensorclass, indexed a batch at a time (tensordict's recipe)."""

    def __init__(self, reader: Any, transform: Any = None) -> None:
        from iobench.loaders.tensorclass import TensorclassBatches

        self._inner = TensorclassBatches(reader, pin=False, readahead_mb=32, transform=transform)

    def __len__(self) -> int:
        return len(self._inner)

    def __getitem__(self, indices: np.ndarray) -> Any:
        return self._inner[_window(indices)]

    def __getitems__(self, indices: list[int]) -> Any:
        return self._inner[_window(indices)]


class Batches(Sampler):
    """Each batch's indices as one numpy array, a new shuffle every epoch (seeded): use it with
    `DataLoader(dataset, sampler=Batches(...), batch_size=None, collate_fn=passthrough)`."""

    def __init__(self, n: int, batch_size: int, shuffle: bool = True, seed: int = 0) -> None:
        self.n, self.batch_size, self.shuffle, self.seed, self.epoch = n, batch_size, shuffle, seed, 0

    def __iter__(self) -> Any:
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(self.n)
        else:
            order = np.arange(self.n)
        self.epoch += 1
        for start in range(0, self.n, self.batch_size):
            yield order[start : start + self.batch_size]

    def __len__(self) -> int:
        return -(-self.n // self.batch_size)


def _opened(
    path: str | Path, format: str, transform: str, read_options: dict[str, Any] | None = None, hints: Any = None
) -> tuple:
    """The format's reader (its read options set, checked; told how it will be read) and iobench's host transform
    (None: none)."""
    from iobench.data.format_options import check_read_options
    from iobench.data.manifest import Manifest
    from iobench.formats import FORMATS
    from iobench.loaders.transforms import make_transform
    from iobench.storage import NO_HINTS

    folder = Path(path)
    manifest = Manifest.load(folder)
    if format not in manifest.formats:
        have = ", ".join(manifest.formats) or "none"
        raise IobenchError(f"{folder} has no {format} format (it has {have}); run `iobench prepare --formats {format}`")
    if format not in FORMATS:
        raise IobenchError(f"unknown format {format!r}; known: {', '.join(FORMATS)}")
    fmt, entry, spec = FORMATS[format], manifest.formats[format], manifest.spec
    FORMATS.import_library(format)  # as `iobench run` does: workers forked per epoch inherit it
    check_read_options(format, list(read_options or {}))
    options = fmt.options_from_json({**entry.options, **(read_options or {})})
    reader = fmt.reader(entry.folder(folder), spec, options, hints or NO_HINTS)
    return reader, make_transform(transform, spec.shape, spec.dtype) if transform != "none" else None


def open_dataset(path: str | Path, format: str, *, transform: str = "none", tensorclass: bool = False) -> Dataset:
    """A dataset prepared by `iobench prepare` (its folder, holding manifest.json) in one of its formats.

    `transform` is iobench's host transform (none, augment, cpu:US), applied per sample where the
    batch is read (in the worker). `tensorclass=True` (memmap only) yields tensorclass batches."""
    reader, host = _opened(path, format, transform)
    if tensorclass:
        if format != "memmap":
            raise IobenchError("tensorclass batches need the memmap format")
        return TensorclassReads(reader, host)
    return BatchReads(reader, host)


class NativeBatches:
    """A format's own library pipeline, as `--loader native` read it: each pass over it is one epoch (a new
    shuffle each, seeded as iobench seeds it) of (features, labels) batches."""

    def __init__(
        self, reader: Any, format: str, transform: Any, batch_size: int, shuffle: bool, seed: int, settings: Any
    ) -> None:
        from iobench.loaders.native import format_of

        self.reader, self.transform, self.settings = reader, transform, settings
        self.batch_size, self.shuffle, self.seed, self.epoch = batch_size, shuffle, seed, 0
        self.format = format_of(format)

    def __iter__(self) -> Any:
        from iobench.loaders.native import epoch_batches, native_read
        from iobench.settings import dataloader_arguments

        read = native_read(
            self.batch_size, self.shuffle, self.seed, self.epoch, self.settings.num_workers, self.transform
        )
        self.epoch += 1
        for features, labels, _ in epoch_batches(self.format, self.reader, read, dataloader_arguments(self.settings)):
            yield features, labels


def native_loader(
    path: str | Path,
    format: str,
    *,
    batch_size: int,
    shuffle: bool = True,
    options: dict[str, Any] | None = None,
    transform: str = "none",
    seed: int = 0,
    **dataloader: Any,
) -> NativeBatches:
    """A prepared dataset read by its format's own library (WebDataset's shards, shuffle buffer and DataLoader;
    LitData's StreamingDataLoader; TFRecord's shuffle queue): what `tune` pastes when `--loader native` won.
    `options` are the library's knobs, the format's read options (`iobench info` lists them); `dataloader` the
    DataLoader keywords of iobench's settings that its library's loader takes (num_workers, pin_memory, ...)."""
    from iobench.settings import SETTINGS, LoaderSettings
    from iobench.storage import ReadHints

    named = {s.dataloader: s.name for s in SETTINGS.values() if s.dataloader}
    if unknown := sorted(set(dataloader) - set(named)):
        raise IobenchError(f"native_loader takes the DataLoader keywords {', '.join(named)}; not {', '.join(unknown)}")
    settings = LoaderSettings(batch_size=batch_size, **{named[k]: v for k, v in dataloader.items()})
    reader, host = _opened(path, format, transform, options, ReadHints(sequential=not shuffle))
    return NativeBatches(reader, format, host, batch_size, shuffle, seed, settings)


def device_transform(path: str | Path, name: str) -> Any:
    """iobench's transform `name` for the dataset's samples, as a function of a batch (on any device)."""
    from iobench.data.manifest import Manifest
    from iobench.loaders.transforms import make_transform

    spec = Manifest.load(Path(path)).spec
    return make_transform(name, spec.shape, spec.dtype).batch


def stand_in_step(name: str, features_per_sample: int, n_classes: int, device: Any, seed: int = 0) -> Any:
    """iobench's stand-in step `name` (mlp, sleep:MS, sleep:MS:SD) as a function of (features, labels) on the
    device: what `tune`'s script calls when the search ran with it."""
    import torch

    from iobench.measuring.steps import make_step

    step = make_step(name, features_per_sample, n_classes, torch.device(device), seed)
    return lambda features, labels: step((features, labels))


def training_state(params: int, layout: str = "llama", source: str | None = None, seed: int = 0) -> dict:
    """The training state `iobench checkpoint` saves (bf16 weights, fp32 master weights and Adam moments, the step,
    the RNG state), as `checkpoint --tune`'s script makes it to check its figure: your own state_dicts take its
    place."""
    from iobench.checkpoint.state import StateSpec, make_state

    spec = StateSpec.of_file(Path(source), seed) if source else StateSpec(params, layout, seed)
    return make_state(spec)
