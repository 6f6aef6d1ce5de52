"""A format's own library pipeline (`--loader native`): WebDataset's shard shuffle and buffer, and so on.

The library decides the order, so every batch carries its samples' indices (the keys the writer stored)
and the loader keeps them: the delivered order is scored as delivered. Each format module provides
`native_batches(reader, settings, shuffle, seed, transform)`, an iterator of (features, labels, indices).
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from iobench.formats.base import FormatReader
from iobench.run.loaders.base import Loader, LoaderSettings
from iobench.run.loaders.dataloader import Carrying, carried_order
from iobench.run.loaders.order import EpochOrder
from iobench.run.transforms import Transform


class NativeLoader(Loader):
    def __init__(
        self,
        reader: FormatReader,
        order: EpochOrder,
        settings: LoaderSettings,
        device: torch.device,
        transform: Transform | None = None,
    ) -> None:
        super().__init__(order, settings, device)
        self.reader, self.transform = reader, transform
        self._batches = importlib.import_module(type(reader).__module__).native_batches
        self._carried: list[torch.Tensor] = []

    def epoch(self, epoch: int) -> Iterator[Any]:
        self._carried = []
        seed = self.order.seed * 1_000_003 + epoch  # a new shuffle each epoch, the same for the same seed
        batches = self._batches(self.reader, self.settings, self.order.shuffle, seed, self.transform)
        if self.order.max_batches is not None:
            batches = itertools.islice(batches, self.order.max_batches)
        return Carrying(batches, self._carried)

    def delivered(self, epoch: int, samples: int) -> np.ndarray:
        return carried_order(self._carried, samples)

    def close(self) -> None:
        self.reader.close()
