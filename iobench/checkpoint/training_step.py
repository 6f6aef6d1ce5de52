"""The training beside a save (`checkpoint --step`): the run's step emulations (sleep:MS, mlp, the user's
module:function) called on one synthetic batch, in the trial's process, as a training loop calls them. Its rate is
taken with no save running, then again while an asynchronous save works in the background; what PyTorch's account of
async checkpointing names (the time training is blocked, the background time, the throughput lost beside it) comes from
these three clocks. A synchronous save blocks the loop for the whole save."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import torch

from iobench.measuring.steps import make_step

FEATURES, CLASSES, BATCH = 1024, 1000, 256  # the synthetic batch: an mlp step of a few ms on one core
BASELINE_SECONDS = 1.0  # the rate with no save: at least this long, and at least MIN_STEPS steps
MIN_STEPS = 5


@dataclass(frozen=True)
class Beside:
    """The loop's figures around one save."""

    rate: float  # steps a second with no save running
    rate_during: float | None  # steps a second while the save ran in the background (None: none ran)
    steps_during: int


class TrainingLoop:
    """One step function and its batch, made before any clock (the model, its optimizer, the batch on the device)."""

    def __init__(self, step: str, device: str, seed: int = 0) -> None:
        target = torch.device(device)
        generator = torch.Generator().manual_seed(seed)
        features = torch.randn(BATCH, FEATURES, generator=generator).to(target)
        labels = torch.randint(0, CLASSES, (BATCH,), generator=generator).to(target)
        self.batch = (features, labels)
        self.step = make_step(step, FEATURES, CLASSES, target, seed)
        self.device = target

    def _one(self) -> None:
        self.step(self.batch)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # a step is done when the device is

    def rate(self) -> float:
        """Steps a second with nothing else running (after one step to warm it)."""
        self._one()
        steps, start = 0, time.perf_counter()
        while steps < MIN_STEPS or time.perf_counter() - start < BASELINE_SECONDS:
            self._one()
            steps += 1
        return steps / (time.perf_counter() - start)

    def until_done(self, pending: Any) -> tuple[int, float, float]:
        """Steps until an asynchronous save's future is done: (steps, the seconds they took, when the future was done
        on `time.perf_counter`'s clock, told by the future itself, not by the loop's next look)."""
        done_at: list[float] = []
        finished = threading.Event()

        def mark(_: Future) -> None:
            done_at.append(time.perf_counter())
            finished.set()

        pending.add_done_callback(mark)
        steps, start = 0, time.perf_counter()
        while not finished.is_set():
            self._one()
            steps += 1
        seconds = time.perf_counter() - start
        pending.result()  # its error, where it failed
        return steps, seconds, done_at[0]
