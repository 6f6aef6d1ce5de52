"""Is `iobench checkpoint` costing a library nothing? Each library's own minimal loop, written from its documentation,
against iobench's trial of the same library on the same state at the same torch threads, in alternating rounds (who
goes first alternates): the steady save until durable (a first save in the same process made durable, untimed, then
the timed one over it, as a job's next checkpoint; durable: every file, the folder and its entry in its parent
fsynced), a warm restore and a cold one (the files evicted with fadvise first), each restore in a fresh process. The
medians of each and their ratio (its own loop's seconds over iobench's: above 1, iobench is faster), and the median
of each round's pair's ratio. (Each measure taken on both sides back to back, in folders of their own, did not
narrow the spread: the second side's save paid the first's writeback, torch's durable save reading 0.72-1.18.)

    python scripts/bench_checkpoint_loops.py [--params 7.7e7] [--rounds 4] [--threads 1] [--dir FOLDER]

The state is made with iobench's maker before the clock (the same tensors on both sides); the timed calls and the
loop's own fsync and eviction are the documentation's, with no iobench import among them. Each clock starts, on both
sides, with what exists collected and frozen out of Python's garbage collector.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

from workdir import remove_tree, remove_work, work_dir

from iobench.checkpoint.job import CheckpointJob
from iobench.checkpoint.state import StateSpec
from iobench.storage.checkpoints import CheckpointPlace, LocalCheckpoints
from iobench.system.processes import python_code, python_module
from iobench.units import parse_size

# Each process makes what iobench's trial makes before its clock, and nothing more: a 1 GiB state made and dropped
# before a restore slowed torch.load threefold (2.8 s against 0.9 s warm). The save makes the state; a DCP restore the
# initialised state it loads into (another seed); a torch or safetensors restore nothing.
IMPORT = "from iobench.checkpoint.state import StateSpec, make_state, flat_tensors\n"
MAKE_STATE = IMPORT + "state = make_state(StateSpec({p}))\n"
MAKE_TARGET = IMPORT + "target = make_state(StateSpec({p}, seed=7))\n"
DURABLE = """
def durable(folder):
    for root, dirs, files in os.walk(folder, topdown=False):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            os.fsync(fd); os.close(fd)
        fd = os.open(root, os.O_RDONLY)
        os.fsync(fd); os.close(fd)
    fd = os.open(os.path.dirname(folder), os.O_RDONLY)
    os.fsync(fd); os.close(fd)
"""
OWN = {
    "torch": ("import torch", "torch.save(state, '{d}/state.pt')", "torch.load('{d}/state.pt', weights_only=True)"),
    "safetensors": (
        "from safetensors.torch import save_file, load_file",
        "save_file({{k: v.contiguous() for k, v in flat_tensors(state).items()}}, '{d}/m.safetensors')",
        "{{k: v.clone() for k, v in load_file('{d}/m.safetensors').items()}}",
    ),  # copied into a model
    "dcp": (
        "import torch.distributed.checkpoint as dcp",
        "dcp.save(state, storage_writer=dcp.FileSystemWriter('{d}', thread_count=1, sync_files=True))",
        "dcp.load(target, storage_reader=dcp.FileSystemReader('{d}'))",
    ),
    "dcp-threads": (
        "import torch.distributed.checkpoint as dcp",
        "dcp.save(state, storage_writer=dcp.FileSystemWriter('{d}', thread_count=4, sync_files=True))",
        "dcp.load(target, storage_reader=dcp.FileSystemReader('{d}'))",
    ),
    "dcp-async": (
        "import torch.distributed.checkpoint as dcp",
        "dcp.async_save(state, storage_writer=dcp.FileSystemWriter('{d}', thread_count=1, sync_files=True)).result()",
        "dcp.load(target, storage_reader=dcp.FileSystemReader('{d}'))",
    ),
}
# Before each clock, on both sides, what exists is collected and frozen out of Python's garbage collector (iobench's
# trial does it as its runner does for a timed epoch): otherwise whether a full collection of torch's heap falls
# inside a steady torch.save decided a 0.07 s gap at 0.25 GiB (0.25 s here, 0.33 s there: one more module imported).
COLLECTED = "import gc\ngc.collect()\ngc.freeze()\n"
WHAT = ("durable save", "warm restore", "cold restore")


def _run(imports: str, make: str, threads: int, body: str) -> float:
    code = (
        f"import os, time, warnings\nwarnings.filterwarnings('ignore')\nimport torch\n"
        f"torch.set_num_threads({threads})\n{imports}\n{DURABLE}\n{make}{body}"
    )
    done = subprocess.run(python_code(code), capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


def own_loop(library: str, params: int, folder: Path, threads: int) -> list[float]:
    """The library's save twice in one process (the second timed until durable), then a fresh process loading warm,
    then one loading cold (the files evicted with POSIX_FADV_DONTNEED)."""
    imports, save, load = OWN[library]
    d = folder / "current"
    seconds = [
        _run(
            imports,
            MAKE_STATE.format(p=params),
            threads,
            f"os.makedirs('{d}', exist_ok=True)\n{save.format(d=d)}\ndurable('{d}')\n"
            f"{COLLECTED}t = time.perf_counter()\n{save.format(d=d)}\ndurable('{d}')\nprint(time.perf_counter() - t)\n",
        )
    ]
    for cold in (False, True):
        if cold:
            for root, _, files in os.walk(d):
                for name in files:
                    fd = os.open(os.path.join(root, name), os.O_RDONLY)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    os.close(fd)
        make = MAKE_TARGET.format(p=params) if library.startswith("dcp") else IMPORT
        # the restored state kept past the clock, as a job keeps it (dropped inside, 1 GiB freed counted: torch's
        # warm restore read 0.659 s here against 0.576 s in iobench's trial, which keeps it for its check)
        timed = f"{COLLECTED}t = time.perf_counter()\nrestored = {load.format(d=d)}\nprint(time.perf_counter() - t)\n"
        seconds.append(_run(imports, make, threads, timed))
    return seconds


def iobench_trials(library: str, params: int, folder: Path, threads: int) -> list[float]:
    """iobench's trial processes on the same folder: the save (first and steady), the warm restore, the cold one (made
    cold by iobench's target)."""
    place = CheckpointPlace(folder=str(folder))
    job = CheckpointJob(library, "save", StateSpec(params), place, torch_threads=threads, check=False)
    out = [_trial(job)["durable_seconds"]]
    target = LocalCheckpoints(folder.parent)
    for cold in (False, True):
        if cold:
            target.make_cold(place.child("current"))
        out.append(_trial(job.with_(op="restore"))["seconds"])
    return out


def _trial(job: CheckpointJob) -> dict:
    done = subprocess.run(
        python_module("iobench.checkpoint.trial", json.dumps(job.to_json())), capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="7.7e7")  # about 1 GiB of state
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dir", type=Path, help="where the checkpoints go (default: a fresh temporary folder)")
    parser.add_argument("--libraries", default="torch,safetensors,dcp,dcp-threads")
    a = parser.parse_args()
    params = parse_size(a.params)
    a.dir = work_dir(a.dir, "ckloops-")
    try:
        compare(a, params)
    finally:
        remove_work(a.dir)


def compare(a: argparse.Namespace, params: int) -> None:
    print(
        f"{params:,} parameters ({params * 14 / 2**30:.2f} GiB), {a.threads} torch threads, {a.rounds} rounds; "
        f"load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    for library in a.libraries.split(","):
        own, ours = [], []
        for k in range(a.rounds):
            pairs = [(own_loop, own), (iobench_trials, ours)]
            for runner, kept in pairs if k % 2 == 0 else pairs[::-1]:
                folder = a.dir / library
                remove_tree(folder)
                folder.mkdir()
                os.sync()  # the previous side's dirty pages written before this side's save
                kept.append(runner(library, params, folder, a.threads))
        remove_tree(a.dir / library)
        for k, what in enumerate(WHAT):
            mine, theirs = statistics.median(x[k] for x in ours), statistics.median(x[k] for x in own)
            paired = [x[k] / y[k] for x, y in zip(own, ours, strict=True)]
            print(
                f"{library} {what}: its own loop {theirs:.3f} s [{min(x[k] for x in own):.3f}-"
                f"{max(x[k] for x in own):.3f}], iobench {mine:.3f} s [{min(x[k] for x in ours):.3f}-"
                f"{max(x[k] for x in ours):.3f}]: ratio {theirs / mine:.2f}; a round's pair "
                f"{statistics.median(paired):.2f} [{min(paired):.2f}-{max(paired):.2f}]",
                flush=True,
            )
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
