"""Clocks that stop only when the device is done: per-epoch wall time and a per-batch split.

Per batch the runner times three stages: waiting for the loader (host clock), host-to-device and
the step. On CUDA the last two are CUDA events on the compute stream, read after the epoch's final
synchronize, so measuring them adds no synchronisation that would stop copies overlapping steps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from iobench.loaders.base import DeviceBatch, Loader
from iobench.loaders.device import synchronize
from iobench.system.signals import signals_held
from iobench.system.waits import EpochWaits


@dataclass(frozen=True)
class EpochTiming:
    """What the clock measured for one epoch (on every rank: summed or maximised over ranks)."""

    seconds: float
    first_batch_seconds: float
    batches: int
    samples: int
    wait_seconds: float
    h2d_seconds: float
    step_seconds: float
    partial: bool  # stopped early by max_seconds
    transform_seconds: float = 0.0  # --transform-on device: the batched transform after the copy
    # the step loop's own thread's wait for a CPU over the epoch (runnable, not running): time the loop lost to the
    # cores being busy, on the epoch's critical path; NaN where the kernel keeps no schedstat
    loop_wait_seconds: float = math.nan
    # the mean DataLoader worker's wait for a CPU over the epoch (the rank's descendants, read as the epoch starts and
    # before its workers stop): their batches came that much later; 0 without workers, NaN without schedstat
    worker_wait_seconds: float = math.nan
    # the step loop's own thread's time on a CPU over the epoch (NaN without schedstat): with its wait, what of the
    # epoch the loop was neither stepping nor blocked
    loop_cpu_seconds: float = math.nan


def time_epoch(
    loader: Loader,
    epoch: int,
    step: Callable[[DeviceBatch], None],
    max_seconds: float | None = None,
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> EpochTiming:
    """Run one epoch; the clock stops after the device has finished with the last batch.

    A device transform (`--transform-on device`) runs on each batch between the copy and the step,
    timed as its own stage."""
    device = loader.device
    cuda = device.type == "cuda"
    events: list[tuple[torch.cuda.Event, ...]] = []
    wait = h2d = step_s = transform_s = 0.0
    batches = samples = 0
    first = 0.0
    partial = False
    clock = time.perf_counter
    to_device = loader.to_device
    deadline = float("inf") if max_seconds is None else max_seconds
    waits = EpochWaits()
    start = clock()
    with signals_held():  # DataLoader workers fork here
        iterator = iter(loader.epoch(epoch))
    fetch = iterator.__next__
    try:
        while True:
            t0 = clock()
            try:
                batch = fetch()
            except StopIteration:
                break
            t1 = clock()
            wait += t1 - t0
            if cuda:
                marks = tuple(torch.cuda.Event(enable_timing=True) for _ in range(4))
                marks[0].record()
                moved = to_device(batch)
                marks[1].record()
                if transform is not None:
                    moved = (transform(moved[0]), moved[1])
                marks[2].record()
                if batches == 0:
                    marks[2].synchronize()  # time to first batch: on the device, not just queued
                    first = clock() - start
                step(moved)
                marks[3].record()
                events.append(marks)
                t3 = clock()
            else:
                moved = to_device(batch)
                t2 = clock()
                if transform is not None:
                    moved = (transform(moved[0]), moved[1])
                t2b = clock()
                step(moved)
                t3 = clock()
                h2d += t2 - t1
                transform_s += t2b - t2
                step_s += t3 - t2b
                if batches == 0:
                    first = t2b - start
            batches += 1
            samples += moved[1].shape[0]
            if t3 - start > deadline:
                partial = True
                break
    finally:  # the epoch's end, a break (--max-seconds) or an interruption: what it started is stopped
        waits.workers_stopping()
        del iterator, fetch
        loader.end_epoch()
    synchronize(device)
    seconds = time.perf_counter() - start
    loop_cpu, loop_wait, worker_wait = waits.ended()
    if cuda:
        h2d, transform_s, step_s = _on_device(events)
    return EpochTiming(
        seconds, first, batches, samples, wait, h2d, step_s, partial, transform_s, loop_wait, worker_wait, loop_cpu
    )


def _on_device(events: list[tuple[torch.cuda.Event, ...]]) -> tuple[float, float, float]:
    """Seconds of the copies, the device transforms and the steps, from each batch's four CUDA events."""
    copies, transforms, steps = (sum(e[k].elapsed_time(e[k + 1]) for e in events) / 1000 for k in range(3))
    return copies, transforms, steps


def time_bare_epoch(loader: Loader, epoch: int, step: Callable[[DeviceBatch], None]) -> float:
    """The same epoch with no per-batch bookkeeping: the reference for the harness' overhead."""
    start = time.perf_counter()
    try:
        for batch in loader.epoch(epoch):
            step(loader.to_device(batch))
    finally:
        loader.end_epoch()
    synchronize(loader.device)
    return time.perf_counter() - start
