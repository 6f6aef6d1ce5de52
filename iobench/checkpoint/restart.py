"""A restart after a preemption, as the job waits for it (`checkpoint --restart`): its process started (Python, torch,
the library imported), the model's and optimizer's state allocated, the checkpoint read into it, its first training
step (the user's `--step`, or an optimizer step over the state). Each part on the wall clock from the moment the
parent started the process, so that the parts and the whole (the parent's, to the process's end) are one timeline;
what is left (the process's exit) is the whole less the parts."""

from __future__ import annotations

import time
from typing import Any

import torch

from iobench.checkpoint import save_modes
from iobench.checkpoint.job import CheckpointJob
from iobench.checkpoint.state import make_state_shapes
from iobench.checkpoint.training_step import TrainingLoop
from iobench.storage.trial_targets import trial_target

BETAS, EPS, LR, GRAD = (0.9, 0.999), 1e-8, 1e-4, 1e-3


def restart(job: CheckpointJob, loaded: Any, copied_into: Any, moved: Any) -> dict[str, float]:
    """`loaded(name)`: the library with its modules imported; `copied_into(state, restored)`: the restored tensors
    copied into the allocated state (a job's `load_state_dict`); `moved(state, device)`: a state on the device."""
    lib = loaded(job.library)
    device = None if job.device == "cpu" or lib.ceiling else torch.device(job.device)
    store = trial_target(job.place)  # its client with the imports, as a job makes it at its start
    imported = time.time()
    prepared = lib.before_restore(job.spec) if lib.before_restore is not None else None
    allocated_state = prepared if prepared is not None else make_state_shapes(job.spec)
    if device is not None:
        allocated_state = moved(allocated_state, device)
    loop = TrainingLoop(job.step, job.device) if job.step != "none" else None  # the model a user's step trains
    allocated = time.time()
    restored_state = lib.restore(save_modes.current(store, job.place, job.save_mode), job.spec, prepared)
    state = restored_state if prepared is not None and device is None else copied_into(allocated_state, restored_state)
    if state is not restored_state:  # what was read, freed once copied in (a job's load_state_dict(torch.load(...)))
        del restored_state
    _synchronized(device)
    restored = time.time()
    if loop is not None:
        loop.step(loop.batch)
    else:
        optimizer_step(state)
    _synchronized(device)
    stepped = time.time()
    return {
        "started_seconds": imported - job.started,
        "allocated_seconds": allocated - imported,
        "restored_seconds": restored - allocated,
        "stepped_seconds": stepped - restored,
    }


def optimizer_step(state: dict) -> None:
    """One Adam step over the state's fp32 master weights and moments (torch's foreach arithmetic, a constant gradient
    standing in for the backward pass), the bf16 weights then copied from the masters, as a mixed-precision step."""
    optimizer, model = state["optimizer"], state["model"]
    names = list(optimizer["master"])
    params = [optimizer["master"][n] for n in names]
    exp_avg = [optimizer["exp_avg"][n] for n in names]
    exp_avg_sq = [optimizer["exp_avg_sq"][n] for n in names]
    grads = [torch.full_like(p, GRAD) for p in params]
    torch._foreach_mul_(exp_avg, BETAS[0])
    torch._foreach_add_(exp_avg, grads, alpha=1 - BETAS[0])
    torch._foreach_mul_(exp_avg_sq, BETAS[1])
    torch._foreach_addcmul_(exp_avg_sq, grads, grads, value=1 - BETAS[1])
    denominator = torch._foreach_sqrt(exp_avg_sq)
    torch._foreach_add_(denominator, EPS)
    torch._foreach_addcdiv_(params, exp_avg, denominator, value=-LR)
    for name, master in zip(names, params, strict=True):
        model[name].copy_(master)


def _synchronized(device: torch.device | None) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)
