"""A run's epoch that failed, said in one line: a worker that died, a read that broke, what a store refused, an
epoch that skipped samples."""

from __future__ import annotations

import os
import signal
import time

from iobench.errors import RunFailed, UserExit, reason
from iobench.loaders.base import Loader
from iobench.measuring.clocks import EpochTiming
from iobench.plan.config import RunConfig


def failure(exc: Exception, config: RunConfig) -> RunFailed:
    """A run's epoch that failed, in one line: a worker that died, a read that broke, what a store refused."""
    from iobench.storage.remote.bounds import refused

    label = config.label
    if isinstance(exc, UserExit):
        return RunFailed(f"{label}: code it ran {exc}")
    if isinstance(exc, RuntimeError):
        text = reason(exc)
        if "DataLoader worker" in text:
            return RunFailed(f"a DataLoader worker died during {label}: {text}")
        return RunFailed(f"{label} failed: {text}")
    expected = isinstance(exc, (OSError, EOFError, ValueError, KeyError, IndexError))
    # a batch's handover broken mid-way (its worker's socket reset, half a pickle read: any error) can be seen
    # before the killed worker is a zombie: wait for it a moment then, and not for an error of the read itself
    handover = isinstance(exc, (ConnectionError, EOFError)) or not expected
    killed = killed_child(HANDOVER_WAIT_S if handover else 0.0)
    if killed:  # the read broke because the worker handing the batch over was killed
        return RunFailed(f"a DataLoader worker died during {label}: {killed}")
    if not expected:  # no worker died: an error of iobench's or a library's, shown whole
        raise exc
    said = refused()  # an answer a library read through a file object, refused in its own words
    return RunFailed(f"reading {config.format} failed: {said or reason(exc)}")


HANDOVER_WAIT_S = 1.0


def check_delivered(loader: Loader, timing: EpochTiming, label: str) -> None:
    """An epoch that was not cut short (--max-batches, --max-seconds) delivers every sample of the dataset: a
    library that skips what it cannot read (a damaged shard) made a record of 1,500 of 2,000 samples labelled
    partial, as if the user had asked for less. One rank's share is its pipeline's own; it is not checked."""
    order = loader.order
    if timing.partial or order.max_batches is not None or order.world > 1:
        return
    if timing.samples < order.n_samples:
        raise RunFailed(
            f"{label} delivered {timing.samples:,} of the {order.n_samples:,} samples of an epoch (a file "
            "its library could not read and skipped?); `iobench verify` checks the dataset"
        )


def killed_child(wait_s: float = 0.0) -> str | None:
    """A child process killed by a signal and not yet reaped (left for its owner to reap), looked for during
    `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return None
        if info is not None and info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
            return f"worker (pid {info.si_pid}) was killed by {signal.Signals(info.si_status).name}"
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)
