"""Is `iobench checkpoint` costing a library nothing? Each library's own minimal save and load, written from its
documentation, in a fresh process of its own, against iobench's trial of the same library on the same state, in
alternating rounds; the median seconds of each (save until the call returns, or for async_save until its future is
done; a warm restore) and their ratio.

    python scripts/bench_checkpoint_loops.py [--params 5e7] [--rounds 5] [--dir /tmp/ckloops]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from iobench.system.processes import python_code, python_module
from iobench.units import parse_size

# The state is made as iobench makes it (the same tensors); the calls timed are the documentation's.
MAKE = "from iobench.checkpoint.state import StateSpec, make_state, flat_tensors\nstate = make_state(StateSpec({p}))\n"
OWN = {
    "torch": ("import torch", "torch.save(state, f'{d}/state.pt')", "torch.load(f'{d}/state.pt', weights_only=True)"),
    "safetensors": ("from safetensors.torch import save_file, load_file",
                    "save_file({{k: v.contiguous() for k, v in flat_tensors(state).items()}}, f'{d}/m.safetensors')",
                    "{{k: v.clone() for k, v in load_file(f'{d}/m.safetensors').items()}}"),  # copied into a model
    "dcp": ("import torch.distributed.checkpoint as dcp",
            "dcp.save(state, storage_writer=dcp.FileSystemWriter('{d}', thread_count=1, sync_files=True))",
            "dcp.load(state, storage_reader=dcp.FileSystemReader('{d}'))"),
    "dcp-threads": ("import torch.distributed.checkpoint as dcp",
                    "dcp.save(state, storage_writer=dcp.FileSystemWriter('{d}', thread_count=4, sync_files=True))",
                    "dcp.load(state, storage_reader=dcp.FileSystemReader('{d}'))"),
    # timed until its future is done (iobench's done_seconds), what a loop waiting for the checkpoint waits
    "dcp-async": ("import torch.distributed.checkpoint as dcp",
                  "dcp.async_save(state, storage_writer=dcp.FileSystemWriter('{d}', thread_count=1, "
                  "sync_files=True)).result()",
                  "dcp.load(state, storage_reader=dcp.FileSystemReader('{d}'))"),
}  # fmt: skip


def own_loop(library: str, params: int, folder: Path) -> tuple[float, float]:
    """The save in one process, the load in a fresh one (a resuming job's process loads first thing: a load right
    after a save in the same process found DCP's machinery warm, 0.62-0.74x of iobench's fresh-process figure)."""
    imports, save, load = OWN[library]
    seconds = []
    for call in (save, load):
        code = (f"import time, warnings\nwarnings.filterwarnings('ignore')\n{imports}\n{MAKE.format(p=params)}"
                f"t = time.perf_counter()\n{call.format(d=folder)}\nprint(time.perf_counter() - t)\n")  # fmt: skip
        done = subprocess.run(python_code(code), capture_output=True, text=True, check=True)
        seconds.append(float(done.stdout.split()[-1]))
    return seconds[0], seconds[1]


def iobench_trials(library: str, params: int, folder: Path) -> tuple[float, float]:
    job = {"library": library, "params": params, "layout": "llama", "seed": 0, "folder": str(folder)}
    out = []
    for op in ("save", "restore"):
        done = subprocess.run(python_module("iobench.checkpoint.trial", json.dumps({**job, "op": op, "check": False})),
                              capture_output=True, text=True, check=True)  # fmt: skip
        measured = json.loads(done.stdout.splitlines()[-1])
        out.append(measured.get("done_seconds", measured["seconds"]))  # an async save: until its future is done
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="5e7")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/ckloops"))
    parser.add_argument("--libraries", default="torch,safetensors,dcp")
    a = parser.parse_args()
    params = parse_size(a.params)
    for library in a.libraries.split(","):
        own, ours = [], []
        for k in range(a.rounds):
            pairs = [(own_loop, own), (iobench_trials, ours)]
            for runner, kept in pairs if k % 2 == 0 else pairs[::-1]:  # who goes first alternates
                folder = a.dir / library
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                os.sync()  # the previous side's dirty pages written before this side's save
                kept.append(runner(library, params, folder))  # the save leaves the files warm for the load
        shutil.rmtree(a.dir / library, ignore_errors=True)
        for k, what in enumerate(("save", "warm load")):
            mine, theirs = statistics.median(x[k] for x in ours), statistics.median(x[k] for x in own)
            print(f"{library} {what}: its own loop {theirs:.3f} s, iobench {mine:.3f} s: iobench's rate "
                  f"{theirs / mine:.2f}x its own ({a.rounds} rounds, {params:,} parameters)")  # fmt: skip
        sys.stdout.flush()


if __name__ == "__main__":
    main()
