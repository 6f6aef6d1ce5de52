"""One save or restore in a fresh process (`python -m iobench.checkpoint.trial JSON`), so that its peak memory is its
own (`ru_maxrss`; resident anonymous and file-backed memory from `/proc/self/smaps_rollup` at the clock's end). It
prints one JSON object: the seconds until the call returned and, for a save, until it was done (an asynchronous
save's future) and until every file and the folder were fsynced (durable); for a restore, whether the state came
back bit for bit (checked after the clock and the memory readings, against a fresh copy made from the seed)."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

from iobench.checkpoint.libraries import LIBRARIES, make_state_shapes
from iobench.checkpoint.state import StateSpec, differences, make_state


def fsync_tree(folder: Path) -> None:
    """Every file under `folder`, then every folder, flushed to the disk (what 'durable' means)."""
    for path in sorted(folder.rglob("*"), reverse=True):
        if path.is_file() and not path.is_symlink():
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for path in [*sorted((p for p in folder.rglob("*") if p.is_dir()), reverse=True), folder]:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def memory() -> dict[str, int]:
    """Peak resident bytes of this process, and its resident anonymous and file-backed bytes now."""
    out = {"peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    try:
        with open("/proc/self/smaps_rollup") as f:
            fields = {k.strip(): int(v.split()[0]) * 1024 for k, v in (line.split(":", 1) for line in f if ":" in line)
                      if v.strip().endswith("kB")}  # fmt: skip
        out["anon_bytes"] = fields.get("Anonymous", 0)
        out["file_bytes"] = fields.get("Rss", 0) - fields.get("Anonymous", 0)
    except OSError:
        pass
    return out


def loaded(library: str) -> object:
    """The library with its modules imported (before the clock, as a training job has them)."""
    import importlib

    lib = LIBRARIES[library]
    for module in lib.modules:
        importlib.import_module(module)
    return lib


def save(library: str, spec: StateSpec, folder: Path, announce: bool = False) -> dict:
    """Under torchrun (`--nproc`), every rank holds the state (data parallel) and saves it together (DCP splits the
    writes); the folder is made durable by rank 0 once every rank's writes are done."""
    state = make_state(spec)  # before the clock: the job has its state
    lib = loaded(library)
    rank = _barrier()
    if announce:  # the kill test kills at a moment of the save itself, not of the interpreter's start
        print("saving", flush=True)
    start = time.perf_counter()
    pending = lib.save(state, folder)
    returned = time.perf_counter() - start
    if pending is not None:  # an asynchronous save: its future
        pending.result()
    done = time.perf_counter() - start
    _barrier()
    if rank == 0:
        fsync_tree(folder)
    _barrier()
    durable = time.perf_counter() - start
    return _slowest({"seconds": returned, "done_seconds": done, "durable_seconds": durable, **memory()})


def _barrier() -> int:
    """Every rank here (under torchrun); this one's rank (0 outside torchrun)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return 0
    dist.barrier()
    return dist.get_rank()


def _slowest(result: dict) -> dict:
    """Under torchrun, the slowest rank's seconds and the largest memory (MLPerf Storage: the slowest rank counts),
    the bytes read by all; the ranks recorded. Outside torchrun, as it is."""
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


def restore(library: str, spec: StateSpec, folder: Path, check: bool, device: str = "cpu") -> dict:
    """Into host memory, or onto `device`: copied into a state that lives there, made before the clock (a model and
    its optimizer, as `load_state_dict` copies into them), the clock stopped when the device is done."""
    import torch

    lib = loaded(library)
    prepared = lib.before_restore(spec) if lib.before_restore is not None else None
    on_device = None if device == "cpu" or lib.ceiling else _moved(make_state_shapes(spec), torch.device(device))
    rank = _barrier()
    before = read_bytes()
    start = time.perf_counter()
    state = lib.restore(folder, spec, prepared)
    if on_device is not None:
        state = _copied_into(on_device, state)
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    after = read_bytes()
    out = {"seconds": seconds, **memory(), "read_bytes": after - before if None not in (before, after) else None}
    out = _slowest(out)
    if check and not lib.ceiling and rank == 0:
        found = differences(state, make_state(spec))
        out.update(exact=not found, differences=found[:5])
    return out


def _moved(state: dict, device: object) -> dict:
    import torch

    return {k: _moved(v, device) if isinstance(v, dict) else v.to(device) if isinstance(v, torch.Tensor) and k != "rng"
            else v for k, v in state.items()}  # fmt: skip


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


def classify(library: str, spec: StateSpec, folder: Path, candidates: dict[str, int]) -> dict:
    """The kill test's restore: which saved state came back whole (by seed), a clean error (the library refused the
    torn files), or silent corruption (it loaded something that is neither)."""
    lib = loaded(library)
    try:
        state = lib.restore(folder, spec, None)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a refusal of the torn files (DCP's CheckpointException is a
        return {"outcome": "clean error", "error": type(exc).__name__}  # BaseException) is the clean outcome
    for name, seed in candidates.items():
        if not differences(state, make_state(StateSpec(spec.params, spec.layout, seed, spec.source))):
            return {"outcome": f"{name} intact"}
    return {"outcome": "silent corruption"}


def main() -> None:
    import signal

    from iobench.system.ranks import tie_to_parent

    tie_to_parent(signal.SIGKILL)  # no trial outlives the iobench that started it
    job = json.loads(sys.argv[1])
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # launched by torchrun (--nproc): every rank in one group
        import torch.distributed as dist

        dist.init_process_group("gloo")
    spec = StateSpec(int(job["params"]), job["layout"], int(job["seed"]), job.get("source", ""))
    folder = Path(job["folder"])
    if job["op"] == "save":
        result = save(job["library"], spec, folder, bool(job.get("announce")))
    elif job["op"] == "classify":
        result = classify(job["library"], spec, folder, job["candidates"])
    else:
        result = restore(job["library"], spec, folder, bool(job.get("check", True)), job.get("device", "cpu"))
    if _barrier() == 0:
        print(json.dumps(result), flush=True)
    import torch.distributed as dist

    if dist.is_initialized():  # every rank leaves the group together, then the process without its C++ teardown:
        _barrier()  # gloo's threads aborted 1 exit in 8 after dcp.load ("terminate called without an active
        dist.destroy_process_group()  # exception"), whatever the order of the ranks' exits
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore")  # DCP's without-a-process-group notice is not the trial's output
    main()
