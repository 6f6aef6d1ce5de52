"""What happens to each batch on the device: nothing, a fixed delay, or one small training step.

The mlp step is identical for every format and loader (same seed, same model), so formats are
compared under one training function.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from iobench.errors import IobenchError
from iobench.run.loaders.base import DeviceBatch

Step = Callable[[DeviceBatch], None]


def parse_step(text: str) -> str:
    """none | sleep:MS | mlp, validated early so a typo fails before any work."""
    name = text.strip().lower()
    if name in ("none", "mlp"):
        return name
    if name.startswith("sleep:"):
        try:
            ms = float(name.split(":", 1)[1])
        except ValueError:
            ms = -1.0
        if ms >= 0:
            return f"sleep:{ms:g}"
    raise IobenchError(f"unknown step {text!r}; use none, sleep:MS or mlp")


def make_step(name: str, features_per_sample: int, n_classes: int, device: torch.device, seed: int) -> Step:
    if name == "none":
        return _no_step
    if name.startswith("sleep:"):
        seconds = float(name.split(":", 1)[1]) / 1000
        return lambda batch: time.sleep(seconds)
    return _mlp_step(features_per_sample, n_classes, device, seed)


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
