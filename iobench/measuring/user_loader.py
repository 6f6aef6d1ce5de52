"""A user's own batches as a `Loader` (`iobench.measure`, `run --dataset-factory`): any iterable of tensors,
(features, labels) or dicts, moved to the device as iobench's loaders move theirs; and the stand-in step fed
with them (`iobench.run.user_measure` measures them)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch

from iobench.errors import IobenchError
from iobench.loaders.base import DeviceBatch, Loader
from iobench.measuring.steps import make_step
from iobench.settings import LoaderSettings

N_CLASSES = 1000  # the mlp step's classes when labels do not say (labels are taken modulo it)


class UserLoader(Loader):
    """Any iterable of batches: (features, labels), a tensor, or a dict of tensors (the first is the
    features); an epoch is one pass over it."""

    def __init__(self, batches: Iterable[Any], device: torch.device, non_blocking: bool = True) -> None:
        super().__init__(None, LoaderSettings(non_blocking=non_blocking), device)  # type: ignore[arg-type]
        self.batches = batches

    def _batches(self, epoch: int) -> Iterator[Any]:
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

    def _release(self) -> None:
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
