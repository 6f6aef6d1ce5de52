"""Clocks that stop only when the device is done: per-epoch wall time and a per-batch split.

Per batch the runner times three stages: waiting for the loader (host clock), host-to-device and
the step. On CUDA the last two are CUDA events on the compute stream, read after the epoch's final
synchronize, so measuring them adds no synchronisation that would stop copies overlapping steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from iobench.results.record import EpochTiming
from iobench.run.device import synchronize
from iobench.run.loaders.base import DeviceBatch, Loader
from iobench.signals import signals_held


def time_epoch(
    loader: Loader,
    epoch: int,
    step: Callable[[DeviceBatch], None],
    max_seconds: float | None = None,
) -> EpochTiming:
    """Run one epoch; the clock stops after the device has finished with the last batch."""
    device = loader.device
    cuda = device.type == "cuda"
    events: list[tuple[torch.cuda.Event, torch.cuda.Event, torch.cuda.Event]] = []
    wait = h2d = step_s = 0.0
    batches = samples = 0
    first = 0.0
    partial = False
    clock = time.perf_counter
    to_device = loader.to_device
    deadline = float("inf") if max_seconds is None else max_seconds
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
                marks = (
                    torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True),
                )
                marks[0].record()
                moved = to_device(batch)
                marks[1].record()
                if batches == 0:
                    marks[1].synchronize()  # time to first batch: on the device, not just queued
                    first = clock() - start
                step(moved)
                marks[2].record()
                events.append(marks)
                t3 = clock()
            else:
                moved = to_device(batch)
                t2 = clock()
                step(moved)
                t3 = clock()
                h2d += t2 - t1
                step_s += t3 - t2
                if batches == 0:
                    first = t2 - start
            batches += 1
            samples += moved[1].shape[0]
            if t3 - start > deadline:
                partial = True
                break
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()
        del iterator
    synchronize(device)
    seconds = time.perf_counter() - start
    if cuda:
        h2d = sum(a.elapsed_time(b) for a, b, _ in events) / 1000
        step_s = sum(b.elapsed_time(c) for _, b, c in events) / 1000
    return EpochTiming(seconds, first, batches, samples, wait, h2d, step_s, partial)


def time_bare_epoch(loader: Loader, epoch: int, step: Callable[[DeviceBatch], None]) -> float:
    """The same epoch with no per-batch bookkeeping: the reference for the harness' overhead."""
    start = time.perf_counter()
    for batch in loader.epoch(epoch):
        step(loader.to_device(batch))
    synchronize(loader.device)
    return time.perf_counter() - start
