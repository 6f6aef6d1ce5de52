"""Which device a --device choice is here: the one "auto" rule (CUDA where there is a GPU, else the CPU) and the one
check that a named GPU exists, for a run, each rank of torchrun (cuda:LOCAL_RANK) and checkpoint's trials. The text
is parsed once, as `iobench.choices.DeviceChoice`; this module decides what it means on this machine."""

from __future__ import annotations

import torch

from iobench.choices import DeviceChoice
from iobench.errors import IobenchError


def device_here(choice: DeviceChoice | str, local_rank: int | None = None, cuda_ok: bool = True) -> torch.device:
    """The device `choice` names here, usable, or a one-line refusal. `local_rank` (under torchrun): "cuda" is that
    rank's GPU, cuda:N refused (every rank would share one). `cuda_ok=False`: "auto" is the CPU (where several processes
    would share a GPU: checkpoint's ranks)."""
    choice = DeviceChoice(choice)
    kind = choice.kind
    if kind == "auto":
        kind = "cuda" if cuda_ok and torch.cuda.is_available() else "cpu"
    if kind == "cpu":
        return torch.device("cpu")
    if local_rank is not None and choice.index is not None:
        raise IobenchError(f"under torchrun --device is auto, cpu or cuda (rank i uses cuda:LOCAL_RANK), not {choice}")
    if not torch.cuda.is_available():
        raise IobenchError(f"--device {choice}: no CUDA GPU is available (torch {torch.__version__})")
    index = local_rank if local_rank is not None else choice.index
    if index is not None and index >= torch.cuda.device_count():
        if local_rank is not None:
            raise IobenchError(
                f"local rank {local_rank} has no GPU: only {torch.cuda.device_count()} here; "
                "use --nproc-per-node <= the number of GPUs"
            )
        raise IobenchError(f"--device {choice}: only {torch.cuda.device_count()} CUDA device(s) here")
    return torch.device("cuda", index if index is not None else torch.cuda.current_device())
