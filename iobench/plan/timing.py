"""How a thing is timed, whatever is timed: its epochs, warm-up epochs and runs, a cut per epoch, the step on each
batch, the seed of its order, the cache and torch's threads. A prepared format's `RunConfig`, the user's own Dataset
(`FactoryRequest`, `--dataset-factory`) and `iobench.measure` are each a `Timing`, checked here once (cache and
threads as their run options declare them): the three had checked the cache three times in three ways."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from iobench.errors import IobenchError
from iobench.measuring.steps import parse_step
from iobench.plan.run_options import RUN_OPTIONS, Cache

TIMING_OPTIONS = ("cache", "torch_threads")  # the run options a Timing holds itself


@dataclass(frozen=True, kw_only=True)
class Timing:
    epochs: int = 1
    warmup: int = 1
    runs: int = 3
    max_seconds: float | None = None
    step: str = "none"
    seed: int = 0
    cache: Cache = field(default=Cache.WARM)
    torch_threads: int | None = None

    def __post_init__(self) -> None:
        for name in TIMING_OPTIONS:  # each as its declaration checks and holds it
            object.__setattr__(self, name, RUN_OPTIONS[name].value(getattr(self, name)))
        object.__setattr__(self, "step", parse_step(self.step))
        at_least(
            ("--epochs", self.epochs, 1),
            ("--runs", self.runs, 1),
            ("--warmup", self.warmup, 0),
            ("--seed", self.seed, 0),
        )
        if self.cache is Cache.WARM and self.warmup < 1:
            raise IobenchError(
                "--cache warm (the default) needs --warmup >= 1: the untimed epoch is what warms the cache; "
                "for no warm-up say --cache as-is or --cache cold"
            )
        if self.max_seconds is not None and not (math.isfinite(self.max_seconds) and self.max_seconds > 0):
            raise IobenchError(f"--max-seconds must be a number > 0, got {self.max_seconds}")


def at_least(*checks: tuple[str, int, int]) -> None:
    """(option, value, lowest allowed) for each count a command line gives: the first too low is refused."""
    for name, value, low in checks:
        if value < low:
            raise IobenchError(f"{name} must be >= {low}, got {value}")
