"""One save or restore in a fresh process (`python -m iobench.checkpoint.trial JOB`), so that its peak memory is its
own (`ru_maxrss`; resident anonymous and file-backed memory from `/proc/self/smaps_rollup` at the clock's end), with
torch's intra-op threads set to the job's (every rank's the same: the count decides a restore's copies). It prints
one JSON object.

A save is timed twice in the process: the first save (a job's first checkpoint: the library's set-up, DCP's planning,
inside it) and the steady one after it (a job's next checkpoint, from the process it trains in), each until the call
returned, until done (an asynchronous save's future) and until durable (every file, folder and the checkpoint's entry
in its parent fsynced; safe mode: the pointer swapped and durable too). A restore is timed to the last byte, on the
device when it is one (the clock stopped when the device is done), and checked bit for bit after the clock. Every
clock runs with what existed before it out of Python's garbage collector, as a run's timed epoch does."""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from typing import Any

from iobench.checkpoint import save_modes
from iobench.checkpoint.job import CheckpointJob
from iobench.checkpoint.libraries import LIBRARIES, Library
from iobench.checkpoint.state import differences, make_state, make_state_shapes
from iobench.checkpoint.training_step import TrainingLoop
from iobench.errors import IobenchError
from iobench.measuring.collector import harness_out_of_the_collector
from iobench.storage.checkpoints import CheckpointTarget
from iobench.storage.trial_targets import trial_target
from iobench.system.sysmetrics import peak_rss_bytes

TRIAL_PID = "IOBENCH_TRIAL_PID"

if __name__ == "__mp_main__":  # a process DCP spawned from a trial (its process checkpointer imports the trial's
    import threading  # module as its main): it ends with the trial, which ends with iobench. Watched, not
    # PR_SET_PDEATHSIG, which fires when the spawning *thread* ends: DCP spawns from a thread of an executor it
    # drops after the first save, and the process died under the second.

    def _end_with(parent: int) -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(137)

    _trial = int(os.environ.get(TRIAL_PID, "0") or 0)  # the trial that spawned it (it may be gone already)
    threading.Thread(target=_end_with, args=(_trial,), name="iobench-ends-with-trial", daemon=True).start()


def memory() -> dict[str, int]:
    """Peak resident bytes of this process, and its resident anonymous and file-backed bytes now."""
    out = {"peak_rss_bytes": peak_rss_bytes()["peak_rss_bytes"]}
    try:
        with open("/proc/self/smaps_rollup") as f:
            fields = {
                k.strip(): int(v.split()[0]) * 1024
                for k, v in (line.split(":", 1) for line in f if ":" in line)
                if v.strip().endswith("kB")
            }
        out["anon_bytes"] = fields.get("Anonymous", 0)
        out["file_bytes"] = fields.get("Rss", 0) - fields.get("Anonymous", 0)
    except OSError:
        pass
    return out


def loaded(library: str) -> Library:
    """The library with its modules imported (before the clock, as a training job has them)."""
    lib = LIBRARIES[library]
    for module in lib.modules:
        importlib.import_module(module)
    return lib


def save(job: CheckpointJob) -> dict:
    """Under ranks (`--nproc`), every rank holds the state (data parallel) and saves it together (DCP splits the
    writes); rank 0 makes it durable once every rank's writes are done. With a training step (`job.step`), its rate
    is taken first, then the loop runs beside the steady save (`training_step`)."""
    state = make_state(job.spec)  # before the clock: the job has its state
    lib = loaded(job.library)
    loop = TrainingLoop(job.step, job.device) if job.step != "none" else None
    rate = loop.rate() if loop is not None else None
    store = trial_target(job.place)  # before the clock: its client made once, as a job's
    timed = [_save_once(job, lib, state, store, n, loop if n == job.saves else None) for n in range(1, job.saves + 1)]
    first, steady = timed[0], timed[-1]
    out = {**steady, **memory()}
    if rate is not None:
        out["step_rate"] = rate
    if job.saves > 1:
        out.update(first_seconds=first["seconds"], first_durable_seconds=first["durable_seconds"])
    return _slowest(out)


def _save_once(
    job: CheckpointJob, lib: Library, state: dict, store: CheckpointTarget, step: int, loop: TrainingLoop | None = None
) -> dict[str, float]:
    target = save_modes.save_place(store, job.place, job.save_mode)
    stepped = job.save_mode != save_modes.INPLACE  # safe and keep:K: a new step, published by the pointer
    if target.local:
        os.makedirs(target.folder, mode=0o700, exist_ok=True)
    beside: dict[str, float] = {}
    with harness_out_of_the_collector():  # collected before the ranks meet: their clocks start together
        rank = _barrier()
        if job.announce and step == job.saves:  # the kill test kills a moment of the save itself
            print("saving", flush=True)
        start = time.perf_counter()
        pending = lib.save(state, target)
        returned = time.perf_counter() - start
        if pending is not None and loop is not None:  # training goes on while the save works in the background
            steps, seconds, done_at = loop.until_done(pending)
            done = done_at - start
            beside = {"background_seconds": done - returned, "step_rate_during": steps / seconds}
        elif pending is not None:  # an asynchronous save: its future
            pending.result()
            done = time.perf_counter() - start
        else:
            done = time.perf_counter() - start
        _barrier()
        if rank == 0:
            store.make_durable(target)
            if stepped:
                save_modes.publish(store, save_modes.root_of(job.place, job.save_mode), target)
        _barrier()
        durable = time.perf_counter() - start
    if loop is not None:  # an asynchronous save blocks the loop until it returns; a synchronous one, whole
        beside = {"background_seconds": 0.0, **beside, "blocked_seconds": returned if pending is not None else durable}
    removed = 0.0  # every rank reports it (the slowest rank's figures are reduced key by key)
    if rank == 0 and stepped:  # outside the clock, as a job's cleanup: the steps beyond those kept
        began = time.perf_counter()
        save_modes.remove_beyond(store, save_modes.root_of(job.place, job.save_mode), job.save_mode.steps_kept)
        removed = time.perf_counter() - began
    timed = {"seconds": returned, "done_seconds": done, "durable_seconds": durable, **beside}
    return {**timed, "removed_seconds": removed} if stepped else timed


def _barrier() -> int:
    """Every rank here (in a group); this one's rank (0 outside one)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return 0
    dist.barrier()
    return dist.get_rank()


def _slowest(result: dict) -> dict:
    """In a group, the slowest rank's seconds and the largest memory (MLPerf Storage: the slowest rank counts), the
    bytes read by all; the ranks recorded. Alone, as it is."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        return result
    for key in [k for k, v in result.items() if isinstance(v, int | float) and not isinstance(v, bool)]:
        value = torch.tensor([float(result[key])], dtype=torch.float64)
        dist.all_reduce(value, op=dist.ReduceOp.SUM if key == "read_bytes" else dist.ReduceOp.MAX)
        result[key] = int(value.item()) if isinstance(result[key], int) else value.item()
    return {**result, "ranks": dist.get_world_size()}


def read_bytes() -> int | None:
    """Bytes this process has had read from storage (/proc/self/io: what the disk delivered, not the page cache)."""
    try:
        with open("/proc/self/io") as f:
            return int(dict(line.split(":", 1) for line in f)["read_bytes"])
    except (OSError, KeyError, ValueError):
        return None


def restore(job: CheckpointJob) -> dict:
    """Into host memory, or onto `device`: straight there where the library can (safe_open(device=...),
    fastsafetensors), else copied into a state that lives there, made before the clock (a model and its optimizer,
    as `load_state_dict` copies into them); the clock stopped when the device is done."""
    import torch

    lib = loaded(job.library)
    prepared = lib.before_restore(job.spec) if lib.before_restore is not None else None
    device = None if job.device == "cpu" or lib.ceiling else torch.device(job.device)
    if device is not None and device.type == "cuda" and device.index is None:  # fastsafetensors wants cuda:N
        device = torch.device("cuda", torch.cuda.current_device())
    straight = device is not None and lib.onto_device is not None
    on_device = _moved(make_state_shapes(job.spec), device) if device is not None and not straight else None
    place = save_modes.current(trial_target(job.place), job.place, job.save_mode)
    with harness_out_of_the_collector():
        rank = _barrier()
        before = read_bytes()
        start = time.perf_counter()
        if straight:
            state = lib.onto_device(place, job.spec, str(device))
        else:
            state = lib.restore(place, job.spec, prepared)
        if on_device is not None:
            state = _copied_into(on_device, state)
        if device is not None:
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - start
        after = read_bytes()
    out = {
        "seconds": seconds,
        **memory(),
        "read_bytes": after - before if None not in (before, after) else None,
        "onto_device": straight,
    }
    out = _slowest(out)
    if job.check and not lib.ceiling and rank == 0:
        found = differences(state, make_state(job.spec))
        out.update(exact=not found, differences=found[:5])
    return out


def _moved(state: dict, device: object) -> dict:
    import torch

    return {
        k: _moved(v, device)
        if isinstance(v, dict)
        else v.to(device)
        if isinstance(v, torch.Tensor) and k != "rng"
        else v
        for k, v in state.items()
    }


def _copied_into(target: dict, source: dict) -> dict:
    """Each tensor of `source` copied into `target`'s tensor of the same path (the RNG state stays on the host, as
    `torch.set_rng_state` takes it); the step and other values taken as they are."""
    import torch

    for key, value in source.items():
        if isinstance(value, dict):
            _copied_into(target[key], value)
        elif isinstance(value, torch.Tensor) and isinstance(target.get(key), torch.Tensor) and key != "rng":
            target[key].copy_(value, non_blocking=True)
        else:
            target[key] = value
    return target


def classify(job: CheckpointJob) -> dict:
    """The kill test's restore: which saved state came back whole (by seed), a clean error (the library refused the
    torn files, or no pointer named a step), or silent corruption (it loaded something that is neither)."""
    lib = loaded(job.library)
    try:
        state = lib.restore(save_modes.current(trial_target(job.place), job.place, job.save_mode), job.spec, None)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a refusal of the torn files (DCP's CheckpointException is a
        return {"outcome": "clean error", "error": type(exc).__name__}  # BaseException) is the clean outcome
    for name, seed in job.candidates.items():
        if not differences(state, make_state(job.spec.with_seed(seed))):
            return {"outcome": f"{name} intact"}
    return {"outcome": "silent corruption"}


def run(job: CheckpointJob) -> dict[str, Any]:
    import torch

    torch.set_num_threads(job.torch_threads)
    if job.op == "restart":
        from iobench.checkpoint.restart import restart

        result = restart(job, loaded, _copied_into, _moved)
    else:
        result = {"save": save, "restore": restore, "classify": classify}[job.op](job)
    return {**result, "torch_threads": torch.get_num_threads()}


def main() -> None:
    import signal

    from iobench.system.children import tied
    from iobench.system.ranks import started_as_ranks

    tied(signal.SIGKILL)  # no trial outlives the iobench that started it, nothing it started outlives it
    job = CheckpointJob.from_json(json.loads(sys.argv[1]))
    os.environ[TRIAL_PID] = str(os.getpid())  # what a process DCP spawns ends with
    if started_as_ranks():  # every rank in one group
        from iobench.system.world import join_group

        os.environ.setdefault("DCP_USE_PREFIX_STORE", "1")  # DCP's background process joins this group's store
        join_group("gloo", int(os.environ.get("RANK", "0")))
    result = run(job)
    if _barrier() == 0:
        print(json.dumps(result), flush=True)
    import torch.distributed as dist

    if dist.is_initialized():  # every rank leaves the group together, then the process without its C++ teardown:
        _barrier()  # gloo's threads aborted 1 exit in 8 after dcp.load ("terminate called without an active
        dist.destroy_process_group()  # exception"), whatever the order of the ranks' exits
        sys.stdout.flush()
        os._exit(0)
    if job.op == "restart":  # a restarted job trains on: no teardown of torch and the state belongs to its restart
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore")  # DCP's without-a-process-group notice is not the trial's output
    try:
        main()
    except IobenchError as exc:  # its one line, as the parent says it (not "iobench.errors.IobenchError: ...")
        print(exc, file=sys.stderr, flush=True)
        sys.exit(2)
