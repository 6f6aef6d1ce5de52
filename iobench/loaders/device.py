"""Which device batches go to, and how to wait until it is done with them."""

from __future__ import annotations

import torch

from iobench.errors import IobenchError


def resolve_device(text: str) -> torch.device:
    """auto | cpu | cuda | cuda:N -> a usable torch.device, or a one-line refusal."""
    name = text.strip().lower()
    if name == "auto":
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise IobenchError(f"unknown device {text!r}; use auto, cpu, cuda or cuda:N") from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise IobenchError(f"unsupported device {text!r}; use auto, cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise IobenchError(f"--device {text}: no CUDA GPU is available (torch {torch.__version__})")
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise IobenchError(f"--device {text}: only {torch.cuda.device_count()} CUDA device(s) here")
    return torch.device("cuda", device.index if device.index is not None else torch.cuda.current_device())


def synchronize(device: torch.device) -> None:
    """Block until the device has finished all queued work (copies included)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
