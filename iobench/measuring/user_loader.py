"""`iobench.measure`: the user's own DataLoader (or Dataset) timed with iobench's clocks.

The same clock as `iobench run` (it stops after the device has finished with the last batch), the same
split (waiting for the loader, host-to-device, step) and the same AU against a stand-in step, over a
pipeline iobench did not build: the question is the user's, not the formats'.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from iobench.errors import IobenchError
from iobench.loaders.base import DeviceBatch, Loader, LoaderSettings
from iobench.measuring.clocks import time_epoch
from iobench.measuring.steps import make_step, parse_step, user_function
from iobench.results.record import EpochStats, EpochTiming

N_CLASSES = 1000  # the mlp step's classes when labels do not say (labels are taken modulo it)


class UserLoader(Loader):
    """Any iterable of batches: (features, labels), a tensor, or a dict of tensors (the first is the
    features); an epoch is one pass over it."""

    def __init__(self, batches: Iterable[Any], device: torch.device, non_blocking: bool = True) -> None:
        super().__init__(None, LoaderSettings(non_blocking=non_blocking), device)  # type: ignore[arg-type]
        self.batches = batches

    def epoch(self, epoch: int) -> Iterator[Any]:
        sampler = getattr(self.batches, "sampler", None)
        if hasattr(sampler, "set_epoch"):  # DistributedSampler: a new order per epoch, as in training
            sampler.set_epoch(epoch)
        return iter(self.batches)

    def to_device(self, batch: Any) -> DeviceBatch:
        nb = self.settings.non_blocking
        features, labels = split_batch(batch)
        features = features.to(self.device, non_blocking=nb)
        if labels is None:  # no labels in the batch: a placeholder, so samples can be counted and a step fed
            return features, torch.zeros(len(features), dtype=torch.long, device=self.device)
        return features, labels.to(self.device, non_blocking=nb)

    def close(self) -> None:
        pass


def split_batch(batch: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    if isinstance(batch, torch.Tensor):
        return batch, None
    if isinstance(batch, dict):
        tensors = [v for v in batch.values() if isinstance(v, torch.Tensor)]
        if tensors:
            return tensors[0], (tensors[1] if len(tensors) > 1 else None)
    if isinstance(batch, Sequence) and len(batch) >= 1 and isinstance(batch[0], torch.Tensor):
        labels = batch[1] if len(batch) > 1 and isinstance(batch[1], torch.Tensor) else None
        return batch[0], labels
    raise IobenchError(
        f"iobench.measure needs batches of tensors ((features, labels), a tensor or a dict), got {type(batch).__name__}"
    )


def user_step(name: str, features_per_sample: int, device: torch.device, seed: int) -> Callable[[DeviceBatch], None]:
    """The stand-in step for a user's batches: mlp takes their labels modulo N_CLASSES (they may be anything)."""
    step = make_step(name, max(1, features_per_sample), N_CLASSES, device, seed)
    return step if name != "mlp" else (lambda b: step((b[0], b[1] % N_CLASSES)))


@dataclass(frozen=True)
class Measurement:
    """What `iobench.measure` measured: every timed epoch, and the figures a record would carry."""

    device: str
    step: str
    cache: str
    sample_bytes: int
    timings: list[EpochTiming]
    stats: EpochStats

    @property
    def samples_per_s(self) -> float:
        return self.stats.samples_per_s

    @property
    def accelerator_utilisation(self) -> float | None:
        return self.stats.accelerator_utilisation

    def summary(self) -> str:
        s = self.stats
        au = f", AU {s.accelerator_utilisation:.0%} ({self.step})" if s.accelerator_utilisation is not None else ""
        return (
            f"{s.samples_per_s:,.0f} samples/s ({s.mb_per_s:,.1f} MB/s) on {self.device}, {self.cache}, "
            f"epochs {s.epoch_seconds_min:.3f}-{s.epoch_seconds_max:.3f} s; per batch: waiting "
            f"{s.wait_ms_per_batch:.2f} ms, host-to-device {s.h2d_ms_per_batch:.2f} ms, "
            f"step {s.step_ms_per_batch:.2f} ms{au}"
        )

    def to_json(self) -> dict:
        fields = {k: getattr(self.stats, k) for k in self.stats.__dataclass_fields__}
        return {"device": self.device, "step": self.step, "cache": self.cache, "sample_bytes": self.sample_bytes,
                **fields}  # fmt: skip


def measure(
    loader_or_dataset: Iterable[Any] | Dataset,
    *,
    device: str | torch.device = "cpu",
    step: str | Callable[..., object] = "none",
    epochs: int = 3,
    warmup: int = 1,
    cache: str = "warm",
    files: Iterable[str | Path] = (),
    batch_size: int = 1024,
    max_seconds: float | None = None,
    non_blocking: bool = True,
    seed: int = 0,
) -> Measurement:
    """Time `epochs` epochs of the user's DataLoader (a Dataset is wrapped in a shuffling DataLoader of
    `batch_size`) on `device`, after `warmup` untimed ones.

    step: none, sleep:MS[:SD], mlp (stand-ins for the model), module:function or a function: your own training
    step, called as `step(features, labels)` with each batch on the device; AU is measured against it.
    cache: warm (after the warm-up), as-is, or cold: `files` (the data files the pipeline reads) are
    evicted from the page cache before each timed epoch; the pipeline must not keep them mapped."""
    dev = torch.device(device)
    own = step if callable(step) else None
    step_name = (
        f"{getattr(step, '__module__', '?')}:{getattr(step, '__qualname__', 'step')}" if own else parse_step(step)
    )
    if cache not in ("warm", "cold", "as-is"):
        raise IobenchError(f"cache must be warm, cold or as-is, got {cache!r}")
    if epochs < 1 or warmup < 0:
        raise IobenchError("epochs must be >= 1 and warmup >= 0")
    paths = [Path(f) for f in files]
    if cache == "cold" and not paths:
        raise IobenchError("cache='cold' needs files=[...]: the data files to evict before each epoch")
    batches = loader_or_dataset
    if isinstance(loader_or_dataset, Dataset) and not isinstance(loader_or_dataset, Iterable):
        batches = DataLoader(loader_or_dataset, batch_size=batch_size, shuffle=True)
    loader = UserLoader(batches, dev, non_blocking)
    features, _ = split_batch(next(iter(loader.epoch(0))))
    sample_bytes = features[0].numel() * features.element_size() if len(features) else 0
    if own is not None:
        run_step = user_function(own, step_name)
    else:
        run_step = user_step(step_name, features[0].numel() if len(features) else 1, dev, seed)
    for e in range(warmup):
        time_epoch(loader, e, run_step, max_seconds)
    timings = []
    for e in range(warmup, warmup + epochs):
        if cache == "cold":
            from iobench.storage.local import LocalStorage

            LocalStorage(paths, paths[0].parent).make_cold()
        timings.append(time_epoch(loader, e, run_step, max_seconds))
    n = len(batches.dataset) if hasattr(batches, "dataset") else int(statistics.median(t.samples for t in timings))
    stats = EpochStats.of(timings, sample_bytes, n, has_step=step_name != "none")
    return Measurement(str(dev), step_name, cache, sample_bytes, timings, stats)
