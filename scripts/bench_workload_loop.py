"""`checkpoint --workload` against its own minimal loop: rank 0's files of an MLPerf checkpointing workload, written
and read as DLIO's PyTorch checkpointing does (torch.save into a fresh file, flush and fsync; the files dropped from the
page cache with fadvise; torch.load), by a loop of a few lines in this process, alternating with `iobench checkpoint
--workload` (one rank, the same layers, the same count) in a fresh process, round by round. The loop imports only the
layout (`iobench.checkpoint.llama3`: which tensors rank 0 writes), none of iobench's harness. Prints each round's
median seconds a checkpoint, write and read, of both, the ratio of their medians and each round's pair (iobench over
the loop).

    python scripts/bench_workload_loop.py [--workload llama3-8b] [--scale 0.03] [--checkpoints 5] [--rounds 3]

Everything is written in a fresh `mkdtemp` folder (or the --dir given, checked: `workdir`) and removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from workdir import remove_tree, remove_work, work_dir

from iobench.checkpoint.llama3 import OPTIMIZER_BYTES, WORKLOADS, rank_files, scaled


def loop(folder: Path, workload: str, scale: float, checkpoints: int) -> tuple[list[float], list[float]]:
    """DLIO's writes and reads of rank 0's files, timed."""
    files = rank_files(scaled(WORKLOADS[workload], scale), 0)
    states = []
    for f in files:
        state = {}
        for key, n, size in f.tensors:
            t = torch.empty(n, dtype=torch.float32 if size == OPTIMIZER_BYTES else torch.float16)
            t.view(torch.uint8).random_()
            state[key] = t
        states.append(state)
    writes, reads = [], []
    for k in range(checkpoints):
        step = folder / f"step{k}"
        step.mkdir()
        began = time.perf_counter()
        for f, state in zip(files, states, strict=True):
            with open(step / f"{f.name}.pt", "xb") as out:
                torch.save(state, out)
                out.flush()
                os.fsync(out.fileno())
        writes.append(time.perf_counter() - began)
    for k in range(checkpoints):
        for f in files:
            fd = os.open(folder / f"step{k}" / f"{f.name}.pt", os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
    for k in range(checkpoints):
        began = time.perf_counter()
        for f in files:
            torch.load(folder / f"step{k}" / f"{f.name}.pt", weights_only=True)
        reads.append(time.perf_counter() - began)
    return writes, reads


def iobench(folder: Path, args: argparse.Namespace) -> tuple[list[float], list[float]]:
    results = folder / "w.jsonl"
    command = [sys.executable, "-m", "iobench", "checkpoint", "--workload", args.workload, "--scale", str(args.scale)]
    command += [
        "--rounds",
        str(args.checkpoints),
        "--nproc",
        "1",
        "--dir",
        str(folder / "ck"),
        "--results",
        str(results),
    ]
    subprocess.run([*command, "-q"], check=True, capture_output=True, timeout=3600)
    record = json.loads(results.read_text().splitlines()[-1])
    results.unlink()
    return record["write_s"][0], record["read_s"][0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="llama3-8b", choices=sorted(WORKLOADS))
    p.add_argument("--scale", type=float, default=0.03)
    p.add_argument("--checkpoints", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dir", type=Path, default=None)
    args = p.parse_args()
    if not (0 < args.scale <= 1 and 1 <= args.checkpoints <= 100 and 1 <= args.rounds <= 20):
        sys.exit("--scale in (0, 1], --checkpoints 1..100, --rounds 1..20")
    work = work_dir(args.dir, "iobench-workload-loop-")
    mine: dict[str, list[float]] = {"write": [], "read": []}
    theirs: dict[str, list[float]] = {"write": [], "read": []}
    try:
        print(
            f"{args.workload} x{args.scale:g}, rank 0, {args.checkpoints} checkpoints a round; "
            f"load {os.getloadavg()[0]:.2f}"
        )
        for k in range(args.rounds):
            order = ("loop", "iobench") if k % 2 == 0 else ("iobench", "loop")
            for who in order:
                folder = work / f"{who}-{k}"
                folder.mkdir()
                os.sync()  # the other side's removal written back: each side starts on a disk alike
                time.sleep(5)
                writes, reads = (
                    loop(folder, args.workload, args.scale, args.checkpoints)
                    if who == "loop"
                    else iobench(folder, args)
                )
                into = mine if who == "iobench" else theirs
                into["write"].append(statistics.median(writes))
                into["read"].append(statistics.median(reads))
                remove_tree(folder)
                print(
                    f"round {k + 1} {who}: write {into['write'][-1]:.2f} s, read {into['read'][-1]:.2f} s", flush=True
                )
        for phase in ("write", "read"):
            a, b = statistics.median(mine[phase]), statistics.median(theirs[phase])
            pairs = [x / y for x, y in zip(mine[phase], theirs[phase], strict=True)]
            print(
                f"{phase}: iobench {a:.2f} s, loop {b:.2f} s a checkpoint: {a / b:.2f}x the medians; each round's "
                f"pair {', '.join(f'{x:.2f}' for x in pairs)}, their median {statistics.median(pairs):.2f}x"
            )
    finally:
        remove_work(work)


if __name__ == "__main__":
    main()
