"""The resume check (`run --resume-check`): what a preempted job gets back when it restores its loader's state
mid-epoch. After the clock (it costs the timed epochs nothing), on the run's last timed epoch:

1. the epoch uninterrupted, through a loader built for the check (`LoaderContext.stateful`: torchdata's
   StatefulDataLoader for the DataLoader paths, nodes' Loader, LitData's StreamingDataLoader), gives the reference
   order of sample indices;
2. a fresh loader stops after half the batches and hands over its library's `state_dict()`, which goes through a
   checkpoint's round trip (`torch.save`, then `torch.load(weights_only=True)`);
3. another fresh loader restores it, stops at three quarters and hands over its state again (a second resume is
   where `datasets` 8308 started the epoch over); a third restores that and finishes the epoch.

The delivered indices against the reference: samples lost, samples repeated, and whether the order is the one the
uninterrupted epoch had. `resume_seconds` is the longer of the two resumes, from building the fresh loader to its
first batch. The fresh loaders are built in this process (each with its own reader and workers); a library that
keeps state in its process beyond its loader would resume better here than in a new process. A pipeline whose
library has no state API is recorded as such (`resume_supported: false`); a check that fails says why in
`resume_error`, and the timed figures are kept.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from iobench.errors import one_line
from iobench.loaders.base import Loader
from iobench.plan.resolve import ResolvedRun

Build = Callable[[ResolvedRun, bool], Loader]  # a loader of the run, stateful or not (building.build_loader)


@dataclass(frozen=True)
class ResumeResult:
    """The record's resume fields (EpochStats), as checked."""

    resume_supported: bool
    resume_seconds: float | None = None
    resume_lost_samples: int | None = None
    resume_repeated_samples: int | None = None
    resume_same_order: bool | None = None
    resume_error: str | None = None

    def fields(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Segment:
    """What one loader delivered before it stopped: its indices, its state then, and its first batch's delay."""

    delivered: np.ndarray
    state: dict[str, Any] | None
    first_batch_seconds: float


def cuts(batches: int) -> list[int]:
    """The batches after which the epoch is interrupted: half, then three quarters (each at least one batch on)."""
    half = batches // 2
    return [c for c in dict.fromkeys((half, max(half + 1, 3 * batches // 4))) if 0 < c < batches]


def checkpointed(state: dict[str, Any]) -> dict[str, Any]:
    """The state as a checkpoint gives it back: saved by torch, loaded with weights only (no pickle of code)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def segment(
    build: Build, resolved: ResolvedRun, epoch: int, state: dict[str, Any] | None, stop_after: int | None
) -> Segment:
    """A fresh loader (restored from `state`), `stop_after` batches of the epoch (None: the rest)."""
    started = time.perf_counter()
    loader = build(resolved, True)
    try:
        if state is not None:
            loader.load_state_dict(state)
        loader.prepare(epoch)
        batches = loader.epoch(epoch)
        first, taken, samples = None, 0, 0
        for batch in batches:
            _features, labels = loader.to_device(batch)  # a host batch is the loader's own (direct: its buffers)
            first = time.perf_counter() - started if first is None else first
            taken, samples = taken + 1, samples + len(labels)
            if taken == stop_after:
                break
        now = loader.state_dict() if stop_after is not None else None
        del batches
        loader.end_epoch()  # its workers and threads stop here, before the next loader opens the files
        return Segment(loader.delivered(epoch, samples), now, first if first is not None else 0.0)
    finally:
        loader.close()


def resume_check(resolved: ResolvedRun, epoch: int, build: Build) -> ResumeResult:
    """The check on `epoch` (see the module), its loaders made by `build(resolved, stateful=True)` (the runner's);
    never raises for the pipeline's failure: it is the result."""
    try:
        return _check(build, resolved, epoch)
    except Exception as exc:  # the library's failure to resume is what is measured
        return ResumeResult(resume_supported=True, resume_error=f"{type(exc).__name__}: {one_line(exc)}")


def _check(build: Build, resolved: ResolvedRun, epoch: int) -> ResumeResult:
    reference = segment(build, resolved, epoch, None, None)
    batch_size = resolved.config.settings.batch_size
    stops = cuts(-(-len(reference.delivered) // batch_size))
    if not stops:  # whether it has state, from its only batch; nothing to interrupt
        supported = segment(build, resolved, epoch, None, 1).state is not None
        said = "the epoch is one batch: nothing to interrupt" if supported else None
        return ResumeResult(resume_supported=supported, resume_error=said)
    parts, state, waits = [], None, []
    for k, stop in enumerate([*stops, None]):
        try:
            part = segment(build, resolved, epoch, state, None if stop is None else stop - (stops[k - 1] if k else 0))
        except Exception as exc:  # which resume failed, in the record
            if k == 0:
                raise
            said = f"{type(exc).__name__}: {one_line(exc)}".rstrip(": ")
            return ResumeResult(resume_supported=True, resume_error=f"resume {k} of {len(stops)} failed: {said}")
        parts.append(part.delivered)
        if state is not None:
            waits.append(part.first_batch_seconds)
        if stop is not None:
            if part.state is None:
                return ResumeResult(resume_supported=False)
            state = checkpointed(part.state)
    got = np.concatenate(parts)
    n = int(max(reference.delivered.max(initial=-1), got.max(initial=-1))) + 1
    expected, delivered = np.bincount(reference.delivered, minlength=n), np.bincount(got, minlength=n)
    return ResumeResult(
        resume_supported=True,
        resume_seconds=max(waits),
        resume_lost_samples=int(np.maximum(expected - delivered, 0).sum()),
        resume_repeated_samples=int(np.maximum(delivered - expected, 0).sum()),
        resume_same_order=bool(np.array_equal(got, reference.delivered)),
    )
