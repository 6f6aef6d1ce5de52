"""Ray Data (`--loader ray-data`, `pip install 'iobench[ray]'`): the streaming engine people use for preprocessing at
scale, read the way its documentation feeds PyTorch: a `ray.data` dataset, `map_batches` on the cluster's CPUs, and
`iter_torch_batches` into the training process.

Each epoch is a dataset of the epoch's batches (one row, and one block, per batch of indices, in the run's order);
`map_batches` reads each through the format's reader in a pool of `--num-workers` actors (a datasource over iobench's
reader: Ray's own `read_numpy`, `read_parquet` and `read_images` read whole files in file order and shuffle with
`random_shuffle`, another access pattern than the shuffled indices every other loader reads), the host transform
runs there too, and `iter_torch_batches(batch_size=None)` hands each block over as one batch, `--prefetch-factor`
of them ahead (`prefetch_batches`). `--no-in-order` lets the streaming executor hand batches over as they finish
(`preserve_order` off). The epoch's execution starts its actors inside the timed epoch, as a training loop that
iterates a dataset each epoch pays it; runs on a local Ray instance, or the cluster at `--ray-address`.
"""

from __future__ import annotations

import logging
import platform
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from iobench.errors import IobenchError
from iobench.loaders.base import Loader, LoaderContext
from iobench.loaders.dataloader import carried_order
from iobench.loaders.order import indices_of
from iobench.loaders.ray_actors import wait_for_exit
from iobench.loaders.ray_cluster import connect
from iobench.loaders.ray_readers import WindowReader
from iobench.settings import batches_ahead


class RayDataLoader(Loader):
    def __init__(self, ctx: LoaderContext) -> None:
        super().__init__(ctx.order, ctx.settings, ctx.device)
        started = time.perf_counter()
        self.ray = connect(ctx.settings.ray_address)
        import ray.data

        # its "execution finished" line per epoch, and its warning that progress bars are off (the run has its own)
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        self.data = ray.data
        reader, transform = ctx.reader, ctx.transform
        name = transform.name if transform is not None else "none"
        self._args = (
            ctx.format_name,
            str(reader.directory),
            reader.spec.to_json(),
            ctx.format_options,
            reader.sequential,
            name,
            reader.larger_than_memory,
        )
        self._carried: list[torch.Tensor] = []
        self._pids: list[int] = []
        self._node = platform.node()  # actors on another node are not waited for
        self._setup = time.perf_counter() - started

    def setup_seconds(self) -> float:
        return self._setup

    def _dataset(self, epoch: int) -> Any:
        windows = [{"indices": indices_of(w), "range": isinstance(w, slice)} for w in self.order.batches(epoch)]
        context = self.data.DataContext.get_current()
        context.execution_options.preserve_order = self.settings.in_order
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        rows = self.data.from_items(windows, override_num_blocks=len(windows))
        return rows.map_batches(
            WindowReader,
            fn_constructor_args=self._args,
            batch_size=1,
            compute=self.data.ActorPoolStrategy(size=self.settings.num_workers),
            batch_format="numpy",
        )

    def _batches(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        self._carried = []
        batches = self._dataset(epoch).iter_torch_batches(
            batch_size=None,
            prefetch_batches=batches_ahead(self.settings),
            pin_memory=self.settings.pin_memory,
            device="cpu",  # to_device moves it, timed apart as every loader's batches are
        )
        try:
            here = platform.node() == self._node
            for batch in batches:
                self._carried.append(batch["indices"])
                if here:
                    self._pids.append(int(batch["pid"][0]))
                yield batch["features"], batch["labels"]
        except self.ray.exceptions.RayError as exc:
            lines = [line for line in str(exc).splitlines() if line.strip()]
            raise IobenchError(f"Ray Data failed: {lines[-1] if lines else type(exc).__name__}") from None

    def delivered(self, epoch: int, samples: int) -> np.ndarray:
        return carried_order(self._carried, samples)

    def _release(self) -> None:
        # An epoch's actor pool ends with its execution; wait for the local ones so a cold epoch's eviction finds
        # nothing mapping the files.
        wait_for_exit(sorted(set(self._pids)))
        self._pids = []
