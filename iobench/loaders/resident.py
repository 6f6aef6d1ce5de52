"""The 'put everything in device memory' baseline: read once, inside the clock of the first epoch, then slice
batches on the device."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from iobench.errors import IobenchError
from iobench.formats.base import FormatReader
from iobench.loaders.base import DeviceBatch, Loader, LoaderContext, ReadMethod
from iobench.loaders.device import synchronize
from iobench.loaders.whole_read import RowsFile, WholeRead
from iobench.system.fsutil import open_regular
from iobench.system.memory import memory_room

HEADROOM = 0.9  # leave a tenth of free memory to the step


def available_bytes(device: torch.device) -> int:
    """Free device memory, or host memory this process can take (a memory cgroup's limit included)."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return free
    return memory_room().available


def free_words(device: torch.device) -> str:
    """How the free memory of `available_bytes` is named in a refusal."""
    return f"free on {device}" if device.type == "cuda" else memory_room().says()


class ResidentLoader(Loader):
    """The dataset read into device memory by a fresh loader's first epoch, inside its clock (a cold epoch is the
    load and the epoch, as a user's first epoch is); its epochs then slice or gather there. npy and memmap are read
    whole in large sequential reads (`whole_read`: cold, O_DIRECT), other formats through their reader in chunks."""

    def __init__(self, ctx: LoaderContext) -> None:
        reader, device = ctx.reader, ctx.device
        super().__init__(ctx.order, ctx.settings, ctx.device)
        spec = reader.spec
        need = spec.payload_bytes
        have = available_bytes(device)
        if need > HEADROOM * have:
            reader.close()
            raise IobenchError(
                f"gpu-resident: the dataset needs {need / 1e9:.2f} GB and {have / 1e9:.2f} GB are "
                f"{free_words(device)}; use a smaller dataset or another loader"
            )
        self.reader: FormatReader | None = reader
        self.cold = ctx.cold
        self.features: torch.Tensor | None = None
        self.labels: torch.Tensor | None = None
        self.reading: WholeRead | None = None
        self.method: ReadMethod | None = None

    @property
    def read_method(self) -> ReadMethod | None:
        return self.method

    def _load(self) -> None:
        reader, device = self.reader, self.device
        assert reader is not None
        spec = reader.spec
        features = torch.empty((spec.n_samples, *spec.shape), dtype=getattr(torch, spec.dtype), device=device)
        labels = torch.empty(spec.n_samples, dtype=torch.int64, device=device)
        layout = reader.fixed_layout()
        if layout is not None:
            flat = features.view(spec.n_samples, -1).view(torch.uint8)

            def put(first: int, rows: torch.Tensor) -> None:
                flat[first : first + len(rows)].copy_(rows)  # from the staging buffer, before it is reused

            source = RowsFile(layout.features, layout.features_offset, spec.n_samples, spec.feature_bytes)
            self.reading = WholeRead(source, put, direct=self.cold)
            self.method = ReadMethod.WHOLE_DIRECT if self.reading.direct else ReadMethod.WHOLE_CACHED
            try:
                self.reading.run()
            finally:
                self.reading = None
            with open(open_regular(layout.labels), "rb") as f:
                stored = np.fromfile(f, dtype=np.int64, count=spec.n_samples, offset=layout.labels_offset)
            labels.copy_(torch.from_numpy(stored))
        else:
            step = spec.chunk_rows
            for start in range(0, spec.n_samples, step):
                stop = min(start + step, spec.n_samples)
                f, lb = reader.read_range(start, stop)
                features[start:stop].copy_(torch.from_numpy(f))
                labels[start:stop].copy_(torch.from_numpy(lb))
        synchronize(device)
        self.features, self.labels = features, labels
        self.reader = None
        reader.close()

    def _batches(self, epoch: int) -> Iterator[torch.Tensor | slice]:
        if self.features is None:
            self._load()  # inside the clock: the first epoch of a fresh loader reads the dataset
        for window in self.order.batches(epoch):
            yield window if isinstance(window, slice) else torch.from_numpy(window).to(self.device)

    def to_device(self, batch: torch.Tensor | slice) -> DeviceBatch:
        """Already there: a slice is a view, an index tensor gathers on the device."""
        assert self.features is not None and self.labels is not None
        return self.features[batch], self.labels[batch]

    def _stop(self) -> bool:
        reading = self.reading
        return reading.stop() if reading is not None else True

    def _release(self) -> None:
        self.features = self.labels = None
        if self.reader is not None:
            self.reader.close()
            self.reader = None
