"""What runs in a Ray actor (`--loader ray`, `--loader ray-data`): a format's reader in the actor's process. Kept apart
from the loaders and light on purpose: an actor imports this module, the format and numpy, and torch only for a
host transform (torch's import is a second of every actor's start, and Ray Data starts its actors each epoch)."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import numpy as np


class BatchReader:
    """The actor: one format reader in its own process, on whichever node Ray chose."""

    def __init__(
        self,
        format_name: str,
        directory: str,
        spec: dict,
        options: dict,
        sequential: bool,
        transform: str = "none",
        larger_than_memory: bool = False,
    ) -> None:
        from iobench.formats import FORMATS
        from iobench.spec import DatasetSpec
        from iobench.storage import ReadHints

        fmt = FORMATS[format_name]
        dataset = DatasetSpec.from_json(spec)
        hints = ReadHints(sequential=sequential, larger_than_memory=larger_than_memory)
        self.reader = fmt.reader(Path(directory), dataset, fmt.options_from_json(options), hints)
        self.transform = None
        if transform != "none":  # torch, imported only then
            from iobench.loaders.transforms import make_transform

            self.transform = make_transform(transform, dataset.shape, dataset.dtype)

    def _transformed(self, batch: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        if self.transform is None:
            return batch
        import torch

        return self.transform.per_samples(torch.from_numpy(batch[0])).numpy(), batch[1]

    def ready(self) -> tuple[str, int]:
        """Where the actor runs: close() waits for local actors' processes to end."""
        return platform.node(), os.getpid()

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        return self._transformed(self.reader.read_range(start, stop))

    def read_indices(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._transformed(self.reader.batch(indices))


class WindowReader(BatchReader):
    """`map_batches`' callable class: reads the epoch's batch each row names (its indices, and whether they are a
    range, read in one call as every loader reads one)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.pid = os.getpid()

    def __call__(self, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        (indices,) = rows["indices"]
        indices = np.asarray(indices, dtype=np.int64)
        if rows["range"][0]:
            features, labels = self.read_range(int(indices[0]), int(indices[-1]) + 1)
        else:
            features, labels = self.read_indices(indices)
        # which process read it (a column has a row per sample): close() waits for this host's actors to end
        return {"features": features, "labels": labels, "indices": indices, "pid": np.full(len(indices), self.pid)}
