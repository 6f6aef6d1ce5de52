"""The kill test: step N saved and durable; then, again and again, a process saving step N+1 over it (in place, or
safely: beside it, then the pointer moved) is SIGKILLed at a random moment within the save's duration, and a fresh
process restores: N intact, N+1 intact, a clean error (the library refused what it found: step N is lost too),
silent corruption (neither), or a restore that crashed."""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from iobench.checkpoint.job import CheckpointJob
from iobench.checkpoint.processes import Started, in_a_process, timeout_of, trial
from iobench.errors import IobenchError
from iobench.results.checkpoint_record import KILL_OUTCOMES

N, N_PLUS_1 = 1, 2  # the seeds of step N's state and of step N+1's


def kill_test(
    job: CheckpointJob,
    kills: int,
    env: Mapping[str, str],
    seed: int = 0,
    each: Callable[[int, str], None] | None = None,
) -> dict[str, int]:
    """`job`: the library's save in one mode, to a place of its own (a local folder, emptied before each kill).
    `each(k, outcome)` is told after every kill."""
    rng = random.Random(seed)
    counts = dict.fromkeys(KILL_OUTCOMES, 0)
    folder = Path(job.place.folder)
    saving = job.with_(op="save", saves=1, spec=job.spec.with_seed(N), check=False)
    took = trial(saving, env)["durable_seconds"]
    for k in range(kills):
        shutil.rmtree(folder)
        folder.mkdir(mode=0o700)
        trial(saving, env)  # N, durable
        _killed_save(saving.with_(spec=job.spec.with_seed(N_PLUS_1), announce=True), env, rng.uniform(0, 1.1 * took))
        outcome = _classified(job, env)
        counts[outcome] += 1
        if each is not None:
            each(k + 1, outcome)
    return counts


def _killed_save(job: CheckpointJob, env: Mapping[str, str], after_s: float) -> None:
    """The save started as a trial is (in a fresh process, or as ranks) and SIGKILLed `after_s` seconds into it (or
    just after it ended). A save that failed by itself is not a kill: said in one line."""
    with Started(job, env) as save:
        if save.readline().strip() != "saving":  # its state made, its clock about to start
            raise IobenchError(f"kill test: {job.library}'s save ended before it began; nothing was killed")
        time.sleep(after_s)
        if save.failed():
            raise IobenchError(f"kill test: {job.library}'s save failed by itself before its kill")


def _classified(job: CheckpointJob, env: Mapping[str, str]) -> str:
    """The restore after a kill, in a fresh process (a torn file may crash a library's reader)."""
    classify = job.with_(op="classify", spec=job.spec.with_seed(N), candidates={"N": N, "N+1": N_PLUS_1})
    done = in_a_process(classify, timeout_of(job.spec), env)
    if done.returncode != 0:
        return "restore crashed"
    return json.loads(done.stdout.strip().splitlines()[-1])["outcome"]
