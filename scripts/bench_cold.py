#!/usr/bin/env python
"""Cold means the dataset is cold, not iobench: `iobench run --cache cold` as root against tensordict's own loop and
fio, under the same read throttle, interleaved, on one prepared dataset's memmap (issue 49).

Each round, in this order:
  iobench    `iobench run --format memmap --loader tensorclass --no-shuffle --cache cold --read-limit L` in a
             process of its own, with the default eviction (as root: drop_caches, an untimed pass of two batches,
             then the dataset's files evicted alone); its MB/s, first batch and the kernel's disk-read count
  own loop   tensordict's own loop in a process of its own, inside the same throttle (iobench's cgroup), set up
             before the clock as its user's script would be: `TensorDict.load_memmap(prefix)` and the batch
             slices, then its dataset's files evicted (fadvise: the dataset cold, the loop's own code not; with
             --own-eviction drop_caches the whole page cache, which makes it read its own libraries back in its
             timed loop), then timed: each contiguous slice `.clone()`d, as tensorclass loading reads a memmap
  fio        O_DIRECT sequential reads of the features file, 1 MiB blocks, queue depth 32, in the same cgroup
The ratios are of medians over rounds; the disk reads are /proc/diskstats' device-wide count (nothing else may read
the disk meanwhile).

    sudo python scripts/bench_cold.py --data-dir data [--dataset NAME] [--read-limit 400] [--rounds 3]
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

from workdir import remove_work, work_dir

OWN_LOOP = r"""
import json, os, sys, time
from pathlib import Path
prefix, batch, read_limit, eviction = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
from iobench.storage.local.confine import Confinement, confined
from iobench.storage.local.page_cache import evict
from iobench.storage.local.traffic import Traffic
from tensordict import TensorDict

with confined(Confinement(read_limit_mb_per_s=read_limit), Path(prefix)):
    td = TensorDict.load_memmap(prefix, non_blocking=False)  # lazily mapped; the user's setup
    n = td.batch_size[0]
    slices = [slice(i, min(i + batch, n)) for i in range(0, n, batch)]
    files = [p for p in Path(prefix).rglob("*") if p.is_file()]
    method = evict(files, eviction)
    counter = Traffic(Path(prefix))
    before = counter.snapshot()
    t0 = time.perf_counter()
    first = None
    for s in slices:
        td[s].clone()
        if first is None:
            first = time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    moved = counter.delta(before, counter.snapshot())["device_read_bytes"]
    size = sum(p.stat().st_size for p in files)
    print(json.dumps({"seconds": seconds, "first": first, "read": moved, "bytes": size, "method": method}))
"""


def run_iobench(args: argparse.Namespace, results: Path) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "iobench",
        "run",
        "--format",
        "memmap",
        "--loader",
        "tensorclass",
        "--no-shuffle",
        "--cache",
        "cold",
        "--warmup",
        "0",
        "--runs",
        "1",
        "--epochs",
        "1",
        "--device",
        "cpu",
        "-q",
        "--batch-size",
        str(args.batch_size),
        "--read-limit",
        str(args.read_limit),
        "--data-dir",
        str(args.data_dir),
        "--results",
        str(results),
    ]
    if args.dataset:
        cmd += ["--dataset", args.dataset]
    subprocess.run(cmd, check=True, capture_output=True)
    record = json.loads(results.read_text().splitlines()[-1])
    return {
        "mb_per_s": record["mb_per_s"],
        "first": record["first_batch_seconds"][0],
        "read": record["device_read_bytes"][0],
        "bytes": record["dataset_bytes"],
        "method": record["eviction_method"],
    }


def run_own_loop(args: argparse.Namespace, prefix: Path) -> dict:
    eviction = args.own_eviction
    done = subprocess.run(
        [sys.executable, "-c", OWN_LOOP, str(prefix), str(args.batch_size), str(args.read_limit), eviction],
        check=True,
        capture_output=True,
        text=True,
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "mb_per_s": out["bytes"] / 1e6 / out["seconds"],
        "first": out["first"],
        "read": out["read"],
        "bytes": out["bytes"],
        "method": out["method"],
    }


def run_fio(args: argparse.Namespace, path: Path) -> dict:
    code = (
        "import json, subprocess, sys\n"
        "from pathlib import Path\n"
        "from iobench.storage.local.confine import Confinement, confined\n"
        "from iobench.storage.local.page_cache import evict\n"
        "p = Path(sys.argv[1])\n"
        "evict([p], 'fadvise')\n"
        "with confined(Confinement(read_limit_mb_per_s=float(sys.argv[2])), p.parent):\n"
        "    out = subprocess.run(['fio', '--name=seq', f'--filename={p}', '--rw=read', '--bs=1M', '--iodepth=32',\n"
        "        '--ioengine=libaio', '--direct=1', '--output-format=json'],\n"
        "        capture_output=True, text=True, check=True)\n"
        "print(json.loads(out.stdout)['jobs'][0]['read']['bw_bytes'] / 1e6)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), str(args.read_limit)], check=True, capture_output=True, text=True
    )
    return {"mb_per_s": float(done.stdout.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--dataset", default=None)
    parser.add_argument("--read-limit", type=float, default=400.0)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--own-eviction", choices=("fadvise", "drop_caches"), default="fadvise")
    args = parser.parse_args()

    from iobench.data.manifest import find_run_dataset

    dataset = find_run_dataset(args.data_dir, args.dataset, ("memmap",))
    if dataset is None:
        sys.exit(f"no prepared dataset with memmap in {args.data_dir}")
    prefix = dataset / "memmap"
    features = max((p for p in prefix.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    scratch = work_dir(None, "bench-cold-")
    rows: dict[str, list[dict]] = {"iobench": [], "own loop": [], "fio": []}
    try:
        for k in range(args.rounds):
            rows["iobench"].append(run_iobench(args, scratch / f"r{k}.jsonl"))
            rows["own loop"].append(run_own_loop(args, prefix))
            if shutil.which("fio"):
                rows["fio"].append(run_fio(args, features))
            print(
                f"round {k + 1}: " + ", ".join(f"{name} {r[-1]['mb_per_s']:.0f} MB/s" for name, r in rows.items() if r),
                flush=True,
            )
    finally:
        remove_work(scratch)
    median = {name: statistics.median(r["mb_per_s"] for r in runs) for name, runs in rows.items() if runs}
    print(
        f"\n{dataset.name}, memmap in order, batch {args.batch_size}, read limit {args.read_limit:g} MB/s, "
        f"{args.rounds} rounds, uid {os.geteuid()}"
    )
    print("| path | MB/s (min-max) | first batch s | disk read / dataset bytes | eviction |")
    print("| --- | --- | --- | --- | --- |")
    for name, runs in rows.items():
        if not runs:
            continue
        rates = [r["mb_per_s"] for r in runs]
        first = ", ".join(f"{r['first']:.3f}" for r in runs if "first" in r) or "-"
        read = ", ".join(f"{r['read'] / r['bytes']:.4f}" for r in runs if r.get("read") is not None) or "-"
        print(
            f"| {name} | {median[name]:.0f} ({min(rates):.0f}-{max(rates):.0f}) | {first} | {read} | "
            f"{runs[0].get('method', 'O_DIRECT')} |"
        )
    print(
        f"\niobench / own loop: {median['iobench'] / median['own loop']:.3f}"
        + (f"; iobench / fio: {median['iobench'] / median['fio']:.3f}" if "fio" in median else "")
    )


if __name__ == "__main__":
    main()
