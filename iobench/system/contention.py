"""Sharing the cores: how busy the machine is with other programs, and rivals started on purpose.

Training jobs share cores (the step's own threads, other ranks, workers), and torch's intra-op threads
collapse when another process competes for them (9.5x measured on 2 cores) while numpy's single thread
barely moves. A run therefore records how much CPU other programs used just before and after it, and
`--cpu-contention N` starts N rivals beside it: each a single-threaded matrix multiply in a loop, as a
training step on another core would be.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from iobench.errors import IobenchError
from iobench.system.processes import python_code

# How long other programs' CPU use is sampled before and after a run: every run (and tune round) pays it
# twice; at 100 ticks/s it still resolves 0.04 cores, against a 0.25-core warning.
SAMPLE_SECONDS = 0.25
MAX_RIVALS = 64  # --cpu-contention's bound (checked by RunConfig)
# One thread each: the rival is a core's worth of work, not a second torch fighting over every core.
_ONE_THREAD = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
_RIVAL = (
    "import numpy as np, sys\n"
    "a = np.random.default_rng(0).random((256, 256), dtype=np.float32)\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    a @ a\n"
)


def _busy_jiffies() -> int:
    """CPU time spent by anything (user, nice, system, irq, softirq, steal), in clock ticks."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return user + nice + system + irq + softirq + steal


def process_jiffies(pid: int) -> int:
    """utime + stime of one process (its threads included), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            after_name = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(after_name[11]) + int(after_name[12])


# tune and sweep run configurations back to back: a run's "before" is the previous run's "after" when that
# ended this recently (with the same rivals), rather than another 0.25 s of waiting per candidate.
RECENT_SECONDS = 1.0
_last_sample: tuple[float, tuple[int, ...], float | None] | None = None  # (ended, rivals, cores)


def other_cores_busy(
    seconds: float = SAMPLE_SECONDS, rivals: tuple[int, ...] = (), recent: float = 0.0
) -> float | None:
    """Cores' worth of CPU used by other programs over the next `seconds` (not this process, not its
    rivals), or over the last sample when it ended at most `recent` seconds ago; None where /proc is not
    there to ask."""
    global _last_sample
    rivals = tuple(rivals)
    last = _last_sample
    if recent > 0 and last is not None and last[1] == rivals and time.monotonic() - last[0] <= recent:
        return last[2]
    if not os.path.exists("/proc/stat"):
        return None
    own = (os.getpid(), *rivals)
    hz = os.sysconf("SC_CLK_TCK")
    total, mine = _busy_jiffies(), sum(process_jiffies(p) for p in own)
    time.sleep(seconds)
    total, mine = _busy_jiffies() - total, sum(process_jiffies(p) for p in own) - mine
    cores = max(0.0, (total - mine) / hz / seconds)
    _last_sample = (time.monotonic(), rivals, cores)
    return cores


@contextmanager
def contending(n: int) -> Iterator[tuple[int, ...]]:
    """N rival processes busy for the body's duration (their PIDs), stopped after it whatever happens
    (N is bounded where the run's configuration is checked: RunConfig)."""
    rivals: list[subprocess.Popen] = []
    try:
        for _ in range(n):
            rivals.append(
                subprocess.Popen(
                    python_code(_RIVAL),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    text=True,
                    env={**os.environ, **_ONE_THREAD},
                    start_new_session=True,  # Ctrl-C is the run's to handle; the rivals are killed below
                )
            )
        for rival in rivals:
            if rival.stdout.readline().strip() != "ready":
                raise IobenchError("--cpu-contention: a rival process did not start")
        yield tuple(r.pid for r in rivals)
    finally:
        for rival in rivals:
            rival.kill()
        for rival in rivals:
            rival.wait()
            rival.stdout.close()


@contextmanager
def torch_threads(n: int | None) -> Iterator[int]:
    """The main process's torch intra-op threads set to n for the body (None: torch's own choice)."""
    import torch

    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
