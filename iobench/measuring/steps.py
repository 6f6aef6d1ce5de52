"""What happens to each batch on the device: nothing, a fixed delay, or one small training step.

The mlp step is identical for every format and loader (same seed, same model), so formats are
compared under one training function.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable

import torch

from iobench.errors import IobenchError, RunFailed, exited, one_line
from iobench.loaders.base import DeviceBatch
from iobench.measuring.user_code import is_reference, load_callable

Step = Callable[[DeviceBatch], None]


MAX_SLEEP_MS = 3_600_000.0  # a step of an hour a batch: bounded where it is parsed (`sleep:1e12` ran into timeouts)


def parse_step(text: str) -> str:
    """none | sleep:MS | sleep:MS:SD | mlp | module:function (the user's own step), validated early so a typo fails
    before any work."""
    name = text.strip().lower()
    if name in ("none", "mlp"):
        return name
    if not name.startswith("sleep:") and is_reference(text.strip()):
        return text.strip()
    if name.startswith("sleep:"):
        try:
            values = [float(x) for x in name.split(":")[1:]]
        except ValueError:
            values = []
        if len(values) in (1, 2) and all(math.isfinite(v) and 0 <= v <= MAX_SLEEP_MS for v in values):
            return "sleep:" + ":".join(f"{v:g}" for v in values)
    raise IobenchError(
        f"unknown step {text!r}; use none, sleep:MS, sleep:MS:SD (normal, ms, each at most an hour), mlp or "
        "module:function "
        "(your own step, called with the batch's features and labels on the device)"
    )


def sleep_ms(name: str) -> tuple[float, float] | None:
    """(mean, standard deviation) in ms of a sleep step; None for other steps."""
    if not name.startswith("sleep:"):
        return None
    values = [float(x) for x in name.split(":")[1:]]
    return values[0], values[1] if len(values) > 1 else 0.0


def make_step(name: str, features_per_sample: int, n_classes: int, device: torch.device, seed: int) -> Step:
    if name == "none":
        return _no_step
    if is_reference(name):
        return user_function(load_callable(name, "--step"), name)
    if (sleep := sleep_ms(name)) is not None:
        return _sleep_step(*sleep, seed)
    return _mlp_step(features_per_sample, n_classes, device, seed)


def _sleep_step(mean_ms: float, sd_ms: float, seed: int) -> Step:
    """A stand-in for the model's compute, as DLIO does: a fixed time, or one drawn per batch from a
    normal distribution (cut at zero) whose draws repeat for the same seed."""
    if sd_ms == 0:
        seconds = mean_ms / 1000
        return lambda batch: time.sleep(seconds)
    rng = random.Random(seed)

    def step(batch: DeviceBatch) -> None:
        time.sleep(max(0.0, rng.gauss(mean_ms, sd_ms)) / 1000)

    return step


class StepFailed(RunFailed):
    """The user's step raised: one line naming it."""


def user_function(function: Callable[..., object], name: str) -> Step:
    """The user's own training step, called as `function(features, labels)` with the batch on the device; whatever
    it raises ends the run in one line naming it and the batch."""
    calls = [0]

    def step(batch: DeviceBatch) -> None:
        calls[0] += 1
        try:
            function(*batch)
        except SystemExit as exc:  # the user's code ending the process: a failure of the run, named
            raise StepFailed(f"the step {name} {exited(exc)} at batch {calls[0]}") from None
        except Exception as exc:  # the user's code: its reason, in one line
            raise StepFailed(
                f"the step {name} raised at batch {calls[0]}: {type(exc).__name__}: {one_line(exc)}"
            ) from None

    return step


def _no_step(batch: DeviceBatch) -> None:
    """The data only has to arrive; the runner waits for the device before stopping the clock."""


def _mlp_step(features_per_sample: int, n_classes: int, device: torch.device, seed: int) -> Step:
    generator = torch.Generator().manual_seed(seed)
    hidden = 256
    w1 = (torch.randn(features_per_sample, hidden, generator=generator) / features_per_sample**0.5).to(device)
    w2 = (torch.randn(hidden, n_classes, generator=generator) / hidden**0.5).to(device)
    model = torch.nn.Sequential(
        torch.nn.Linear(features_per_sample, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, n_classes)
    ).to(device)
    with torch.no_grad():
        model[0].weight.copy_(w1.T)
        model[2].weight.copy_(w2.T)
        model[0].bias.zero_()
        model[2].bias.zero_()
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(batch: DeviceBatch) -> None:
        features, labels = batch
        x = features.reshape(len(features), -1)
        x = x.float() / 255 if not x.is_floating_point() else x.float()
        optimiser.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), labels)
        loss.backward()
        optimiser.step()

    step.model = model  # type: ignore[attr-defined]  # for inspection (tests, profiling)
    return step
