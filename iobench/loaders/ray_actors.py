"""Ray: actors on a Ray cluster read and assemble batches; the training process only receives them.

The distributed-preprocessing comparison point against DataLoader workers. --num-workers actors
each open the format themselves and read whole batches; the loader keeps num_workers x
--prefetch-factor batches in flight (torch's 2 by default), round robin, and yields them in order. Batches travel
through Ray's object store (shared memory on the same node, the network from others); numpy arrays arrive
in this process without a further copy. Every node that runs an actor must see the dataset at the
same path and have iobench installed.
"""

from __future__ import annotations

import platform
import time
import warnings
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from iobench.errors import RunFailed
from iobench.loaders.base import Loader, LoaderContext
from iobench.loaders.ray_cluster import connect, watch_new_processes
from iobench.loaders.ray_readers import BatchReader
from iobench.settings import batches_ahead
from iobench.system.processes import process_alive


class RayLoader(Loader):
    def __init__(self, ctx: LoaderContext) -> None:
        reader, settings, transform = ctx.reader, ctx.settings, ctx.transform
        format_name, options = ctx.format_name, ctx.format_options
        super().__init__(ctx.order, ctx.settings, ctx.device)
        self.ray = connect(settings.ray_address)
        started = time.perf_counter()
        actor = self.ray.remote(BatchReader).options(scheduling_strategy="SPREAD")
        name = transform.name if transform is not None else "none"
        args = (
            format_name,
            str(reader.directory),
            reader.spec.to_json(),
            options,
            reader.sequential,
            name,
            reader.larger_than_memory,
        )
        self.actors = [actor.remote(*args) for _ in range(settings.num_workers)]
        try:  # started before any epoch is timed
            here = platform.node()
            self.local_pids = [pid for host, pid in self._get([a.ready.remote() for a in self.actors]) if host == here]
            watch_new_processes()
        except RuntimeError as exc:
            self.close()
            raise RunFailed(f"starting {len(self.actors)} Ray actor(s) for {format_name} failed: {exc}") from None
        self._setup = time.perf_counter() - started
        self.in_flight = settings.num_workers * batches_ahead(settings)

    def setup_seconds(self) -> float:
        return self._setup

    def process_ids(self) -> list[int]:
        return list(self.local_pids)  # Ray's workers are the raylet's children, not ours

    def _get(self, refs: Any) -> Any:
        try:
            return self.ray.get(refs)
        except self.ray.exceptions.RayError as exc:
            lines = [line for line in str(exc).splitlines() if line.strip()]
            raise RuntimeError(f"a Ray actor failed: {lines[-1] if lines else type(exc).__name__}") from None

    def _batches(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        windows = iter(self.order.batches(epoch))
        pending: deque = deque()
        submitted = 0

        def submit() -> None:
            nonlocal submitted
            window = next(windows, None)
            if window is None:
                return
            actor = self.actors[submitted % len(self.actors)]
            if isinstance(window, slice):
                pending.append(actor.read_range.remote(window.start, window.stop))
            else:
                pending.append(actor.read_indices.remote(window))
            submitted += 1

        for _ in range(self.in_flight):
            submit()
        while pending:
            features, labels = self._get(pending.popleft())
            submit()
            yield self._host(features), self._host(labels)

    def _host(self, array: np.ndarray) -> torch.Tensor:
        with warnings.catch_warnings():
            # Object-store arrays are read-only views of shared memory; nothing here writes to them.
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            tensor = torch.from_numpy(array)
        return tensor.pin_memory() if self.settings.pin_memory else tensor

    def _release(self) -> None:
        for actor in getattr(self, "actors", []):
            self.ray.kill(actor)  # its process ends, and with it every mapping of the files
        self.actors = []
        # ray.kill does not wait; a cold epoch's eviction must not find an actor still mapping the files.
        wait_for_exit(getattr(self, "local_pids", []))
        self.local_pids = []


def wait_for_exit(pids: list[int], timeout: float = 30.0) -> None:
    """Until every process has ended (or is a zombie, which maps nothing), at most timeout seconds."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
