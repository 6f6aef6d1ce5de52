"""One rank of an MLPerf checkpointing workload (`checkpoint --workload`), as DLIO's PyTorch checkpointing does it:
its files of the layout (`iobench.checkpoint.llama3.rank_files`) held in memory as fp16 model and fp32 optimizer
tensors of random bytes, made before the clock; each checkpoint into a folder of its own (`global_epoch1_stepK`), every
file `torch.save`d to a fresh file and fsynced (the workloads' `fsync: True`), every rank starting together; then the
page cache dropped for the checkpoint's files (fadvise: the files alone, as the write's fsync left them clean), and
each checkpoint read back with `torch.load(weights_only=True)`, every rank starting together. Rank 0 prints a line
after each checkpoint written or read (its own seconds, `PROGRESS`), and last every rank's seconds per write and read
as one JSON line. Run by `iobench.sessions.checkpoint_workload` as ranks joined by a
store of this user's (`iobench.system.ranks`)."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from iobench.checkpoint.llama3 import OPTIMIZER_BYTES, WORKLOADS, ShardFile, rank_files
from iobench.system.private import CREATE_FLAGS

MAX_CHECKPOINTS = 100
PROGRESS = "progress"  # the key of rank 0's line after each checkpoint


@dataclass(frozen=True)
class WorkloadJob:
    """What every rank runs: the workload by name, its layers kept, the folder (iobench's own), how many checkpoints
    written and read."""

    workload: str
    layers: int
    folder: str
    writes: int
    reads: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: object) -> WorkloadJob:
        if not isinstance(data, dict) or set(data) != {"workload", "layers", "folder", "writes", "reads"}:
            raise ValueError("not a workload job")
        job = cls(**data)
        w = WORKLOADS.get(job.workload)
        counts = (job.writes, job.reads)
        if w is None or not 1 <= job.layers <= w.layers or not all(1 <= c <= MAX_CHECKPOINTS for c in counts):
            raise ValueError("a workload job out of its bounds")
        return job


def checkpoint_folder(root: Path, k: int) -> Path:
    """The k-th checkpoint's folder (DLIO's name for the step)."""
    return root / f"global_epoch1_step{k + 1}"


def _tensors(f: ShardFile) -> dict[str, torch.Tensor]:
    """A file's tensors, of random bytes (nothing a file system could compress or deduplicate)."""
    out = {}
    for key, n, size in f.tensors:
        t = torch.empty(n, dtype=torch.float32 if size == OPTIMIZER_BYTES else torch.float16)
        t.view(torch.uint8).random_()
        out[key] = t
    return out


def _save(path: Path, state: dict[str, torch.Tensor]) -> None:
    fd = os.open(path, CREATE_FLAGS, 0o600)
    with os.fdopen(fd, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())


def _progress(rank: int, done: str, k: int, of: int, seconds: float) -> None:
    """Rank 0's line after each checkpoint, outside its clock (the session says it as it comes)."""
    if rank == 0:
        print(json.dumps({PROGRESS: done, "k": k + 1, "of": of, "seconds": seconds}), flush=True)


def main() -> None:
    import signal

    import torch.distributed as dist

    from iobench.storage.local.page_cache import evict
    from iobench.system.children import tied
    from iobench.system.world import join_group

    tied(signal.SIGKILL)
    job = WorkloadJob.from_json(json.loads(sys.argv[1]))
    rank = int(os.environ.get("RANK", "0"))
    join_group("gloo", rank)
    w = replace(WORKLOADS[job.workload], layers=job.layers)
    files = rank_files(w, rank)
    states = [_tensors(f) for f in files]
    root = Path(job.folder)
    writes, reads = [], []
    for k in range(job.writes):
        folder = checkpoint_folder(root, k)
        if rank == 0:
            folder.mkdir(mode=0o700)
        dist.barrier()
        began = time.perf_counter()
        for f, state in zip(files, states, strict=True):
            _save(folder / f"{f.name}.pt", state)
        writes.append(time.perf_counter() - began)
        _progress(rank, "written", k, job.writes, writes[-1])
    del states
    dist.barrier()
    mine = [checkpoint_folder(root, k) / f"{f.name}.pt" for k in range(job.writes) for f in files]
    evict(mine, "auto")  # each rank its own files, after every rank's fsync: the reads are cold
    for k in range(job.reads):
        folder = checkpoint_folder(root, k % job.writes)
        dist.barrier()
        began = time.perf_counter()
        for f in files:
            loaded = torch.load(folder / f"{f.name}.pt", weights_only=True)
            del loaded
        reads.append(time.perf_counter() - began)
        _progress(rank, "read", k, job.reads, reads[-1])
    mine_row = torch.tensor([*writes, *reads, float(sum(f.nbytes for f in files))], dtype=torch.float64)
    rows = [torch.empty_like(mine_row) for _ in range(dist.get_world_size())]
    dist.all_gather(rows, mine_row)  # floats, not pickled objects
    if rank == 0:
        n = job.writes
        said = {
            "write_s": [r[:n].tolist() for r in rows],
            "read_s": [r[n:-1].tolist() for r in rows],
            "bytes": [int(r[-1]) for r in rows],
        }
        print(json.dumps(said), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
