"""Which device batches go to, and how to wait until it is done with them."""

from __future__ import annotations

import torch

from iobench.system.devices import device_here


def resolve_device(text: str) -> torch.device:
    """auto | cpu | cuda | cuda:N -> a usable torch.device, or a one-line refusal (`system.devices.device_here`)."""
    return device_here(text)


def synchronize(device: torch.device) -> None:
    """Block until the device has finished all queued work (copies included)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
