"""Where a save lands decides its speed: torch.save + fsync of one state, in a minimal loop of its own (no iobench in
the timed process), in four patterns, against `iobench checkpoint --libraries torch --save-mode keep:K`'s steady save,
in alternating rounds (who goes first alternates):

- new-kept: DLIO's: each save a new file in a new folder, every one kept (MLPerf Storage's checkpointing workload);
- keep:K: each save a new folder, the oldest removed after the clock once more than K exist (a job's `save_top_k`);
- after-removal: each save a new folder made just after the previous one was removed (iobench's safe mode);
- inplace: each save over the last file.

Each pattern saves `K + 1` times in one process, into a fresh folder, and times the last save until durable (the
file, its folder and its entry fsynced): for new-kept and keep:K that is the save made while K checkpoints are kept,
which is what iobench's keep:K trial times. Where each save's blocks went is read with FIEMAP (`filefrag`), and
whether they are blocks a removed step held.

    python scripts/bench_keep_loop.py [--bytes 1GiB] [--keep 3] [--rounds 4] [--dir FOLDER]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from workdir import remove_tree, remove_work, work_dir

from iobench.checkpoint.state import BYTES_PER_PARAM
from iobench.system.processes import python_code
from iobench.units import parse_bytes

PATTERNS = ("new-kept", "keep", "after-removal", "inplace")
# The timed process: no iobench import. The state: bf16 weights and fp32 master weights and Adam moments, 14 bytes a
# parameter, in tensors of a Llama-like layer's size, made before any clock.
LOOP = r"""
import json, os, subprocess, sys, time, gc
import torch
torch.set_num_threads(1)
pattern, folder, params, keep = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
layer = 4096 * 4096
state, left, k = {}, params, 0
while left > 0:
    n = min(layer, left)
    state[f"w{k}"] = torch.randn(n).to(torch.bfloat16)
    state[f"m{k}"] = torch.randn(n)
    state[f"a{k}"] = torch.randn(n)
    state[f"v{k}"] = torch.randn(n)
    left, k = left - n, k + 1

def fsync(path, directory=False):
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    os.fsync(fd); os.close(fd)

def remove(step):  # the one file this loop wrote in a folder it made, then the folder (a link: unlinked)
    os.unlink(os.path.join(step, "state.pt"))
    os.rmdir(step)

def blocks(path):
    out = subprocess.run(["filefrag", "-e", path], capture_output=True, text=True).stdout.splitlines()
    found = []
    for line in out:
        parts = [p.strip() for p in line.split(":")]
        if len(parts) >= 4 and parts[0].isdigit() and ".." in parts[2]:
            a, b = parts[2].split("..")
            found.append((int(a), int(b.rstrip(":"))))
    return found

removed, seconds, reused = [], [], []
for n in range(1, keep + 2):
    step = os.path.join(folder, "current" if pattern == "inplace" else f"step-{n}")
    if pattern == "after-removal" and n > 1:
        old = os.path.join(folder, f"step-{n - 1}")
        removed += blocks(os.path.join(old, "state.pt"))
        remove(old)
    os.makedirs(step, exist_ok=True)
    gc.collect(); gc.freeze()
    t = time.perf_counter()
    torch.save(state, os.path.join(step, "state.pt"))
    fsync(os.path.join(step, "state.pt")); fsync(step, True); fsync(folder, True)
    seconds.append(time.perf_counter() - t)
    gc.unfreeze()
    mine = blocks(os.path.join(step, "state.pt"))
    reused.append(any(a <= d and c <= b for a, b in mine for c, d in removed))
    if pattern == "keep":
        steps = sorted((s for s in os.listdir(folder) if s.startswith("step-")), key=lambda s: int(s[5:]))
        for s in steps[:-keep]:
            removed += blocks(os.path.join(folder, s, "state.pt"))
            remove(os.path.join(folder, s))
size = os.path.getsize(os.path.join(step, "state.pt"))
print(json.dumps({"seconds": seconds, "bytes": size, "reused": reused}))
"""


def loop(pattern: str, folder: Path, params: int, keep: int) -> dict:
    code = python_code(LOOP)
    done = subprocess.run([*code, pattern, str(folder), str(params), str(keep)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{pattern}: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout.splitlines()[-1])


def iobench_keep(folder: Path, params: int, keep: int) -> float:
    """iobench's keep:K trial of torch: its steady save until durable (the (K+1)th, K kept)."""
    results = folder / "r.jsonl"
    command = [sys.executable, "-m", "iobench", "checkpoint", "--libraries", "torch", "--params", str(params)]
    command += ["--save-mode", f"keep:{keep}", "--rounds", "1", "--cache", "warm", "--torch-threads", "1"]
    command += ["--dir", str(folder), "--results", str(results), "--quiet"]
    subprocess.run(command, capture_output=True, text=True, check=True)
    saves = [json.loads(line) for line in results.read_text().splitlines()]
    return next(r["durable_seconds"] for r in saves if r.get("op") == "save")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", default="1GiB", help="the state's bytes")
    parser.add_argument("--keep", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--dir", type=Path, help="where the checkpoints go (default: a fresh temporary folder)")
    a = parser.parse_args()
    if not 1 <= a.keep <= 16 or not 1 <= a.rounds <= 100:
        sys.exit("--keep is 1..16 and --rounds 1..100")
    params = max(1, parse_bytes(a.bytes) // BYTES_PER_PARAM)
    a.dir = work_dir(a.dir, "keeploop-")
    try:
        compare(a, params)
    finally:
        remove_work(a.dir)


def compare(a: argparse.Namespace, params: int) -> None:
    print(
        f"{params * BYTES_PER_PARAM / 2**30:.2f} GiB state, keep {a.keep}, {a.rounds} rounds; load "
        f"{os.getloadavg()[0]:.2f}",
        flush=True,
    )
    times: dict[str, list[float]] = {p: [] for p in (*PATTERNS, "iobench keep")}
    reused: dict[str, list[bool]] = {p: [] for p in PATTERNS}
    size = 0
    for k in range(a.rounds):
        order = [*PATTERNS, "iobench keep"]
        for name in order if k % 2 == 0 else order[::-1]:
            folder = a.dir / name.replace(" ", "-")
            remove_tree(folder)
            folder.mkdir()
            os.sync()  # the previous pattern's dirty pages written before this one's saves
            if name == "iobench keep":
                times[name].append(iobench_keep(folder, params, a.keep))
            else:
                got = loop(name, folder, params, a.keep)
                times[name].append(got["seconds"][-1])
                reused[name].append(got["reused"][-1])
                size = got["bytes"]
            remove_tree(folder)
        print(f"round {k + 1}: " + ", ".join(f"{n} {v[-1]:.2f} s" for n, v in times.items()), flush=True)
    for name, seconds in times.items():
        median = statistics.median(seconds)
        where = f"; its last save in a removed step's blocks {sum(reused[name])}/{a.rounds}" if name in reused else ""
        print(
            f"{name}: steady save durable {median:.3f} s [{min(seconds):.3f}-{max(seconds):.3f}], "
            f"{size / median / 1e9:.3f} GB/s{where}",
            flush=True,
        )
    ours, theirs = times["iobench keep"], times["new-kept"]
    paired = [t / o for t, o in zip(theirs, ours, strict=True)]
    print(
        f"iobench keep:{a.keep} against new-kept (DLIO's pattern): its loop's seconds over iobench's "
        f"{statistics.median(theirs) / statistics.median(ours):.2f}; a round's pair {statistics.median(paired):.2f} "
        f"[{min(paired):.2f}-{max(paired):.2f}]; load after {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
