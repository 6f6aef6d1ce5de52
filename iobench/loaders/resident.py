"""The 'put everything in device memory' baseline: read once, then slice batches on the device."""

from __future__ import annotations

import time
from collections.abc import Iterator

import torch

from iobench.errors import IobenchError
from iobench.loaders.base import DeviceBatch, Loader, LoaderContext
from iobench.loaders.device import synchronize

HEADROOM = 0.9  # leave a tenth of free memory to the step


def available_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return free
    with open("/proc/meminfo") as f:
        info = dict(line.split(":", 1) for line in f)
    return int(info["MemAvailable"].split()[0]) * 1024


class ResidentLoader(Loader):
    def __init__(self, ctx: LoaderContext) -> None:
        reader, device = ctx.reader, ctx.device
        super().__init__(ctx.order, ctx.settings, ctx.device)
        spec = reader.spec
        need = spec.payload_bytes
        have = available_bytes(device)
        if need > HEADROOM * have:
            raise IobenchError(
                f"gpu-resident: the dataset needs {need / 1e9:.2f} GB but {device} has {have / 1e9:.2f} GB free; "
                "use a smaller dataset or another loader"
            )
        t0 = time.perf_counter()
        self.features = torch.empty((spec.n_samples, *spec.shape), dtype=getattr(torch, spec.dtype), device=device)
        self.labels = torch.empty(spec.n_samples, dtype=torch.int64, device=device)
        step = spec.chunk_rows
        for start in range(0, spec.n_samples, step):
            stop = min(start + step, spec.n_samples)
            f, lb = reader.read_range(start, stop)
            self.features[start:stop].copy_(torch.from_numpy(f))
            self.labels[start:stop].copy_(torch.from_numpy(lb))
        synchronize(device)
        self._setup = time.perf_counter() - t0
        reader.close()

    def setup_seconds(self) -> float:
        return self._setup

    def _batches(self, epoch: int) -> Iterator[torch.Tensor | slice]:
        for window in self.order.batches(epoch):
            yield window if isinstance(window, slice) else torch.from_numpy(window).to(self.device)

    def to_device(self, batch: torch.Tensor | slice) -> DeviceBatch:
        """Already there: a slice is a view, an index tensor gathers on the device."""
        return self.features[batch], self.labels[batch]

    def _release(self) -> None:
        self.features = self.labels = None
