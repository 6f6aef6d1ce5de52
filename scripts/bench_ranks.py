#!/usr/bin/env python
"""One process against several: the same configurations under torchrun with 1 and N ranks.

For every configuration it runs `iobench run` three ways, one after the other in this script:
  plain     no torchrun, torch's default thread count (the single-process reference)
  ranks=1   torchrun --nproc-per-node 1
  ranks=N   torchrun --nproc-per-node N
Both torchrun cases get OMP_NUM_THREADS=1 (torchrun's own default for N > 1), so they differ only
in the number of processes; the records say torch_threads. It prints global MB/s, each against
ranks=1, the per-rank spread and the straggler ratio, and keeps the records in --results.

    python scripts/bench_ranks.py --data-dir data [--dataset NAME] [--nproc 2] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from iobench.results.store import read_records

CONFIGS = {
    "memmap/tensorclass shuffle warm": ["--format", "memmap", "--loader", "tensorclass", "--cache", "warm"],
    "memmap/tensorclass sequential warm": [
        "--format",
        "memmap",
        "--loader",
        "tensorclass",
        "--cache",
        "warm",
        "--no-shuffle",
    ],
    "memmap/tensorclass shuffle cold": ["--format", "memmap", "--loader", "tensorclass", "--cache", "cold"],
    "memmap/tensorclass sequential cold": [
        "--format",
        "memmap",
        "--loader",
        "tensorclass",
        "--cache",
        "cold",
        "--no-shuffle",
    ],
    "npy/dataloader shuffle warm": ["--format", "npy", "--loader", "dataloader", "--cache", "warm"],
    "npy/dataloader shuffle cold": ["--format", "npy", "--loader", "dataloader", "--cache", "cold"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--dataset", default=None)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=None, help="Comma list of configuration names to keep.")
    parser.add_argument("--results", type=Path, default=Path("results/ranks.jsonl"))
    args = parser.parse_args()
    common = ["--data-dir", str(args.data_dir), "--device", args.device, "--runs", str(args.runs)]
    common += ["--results", str(args.results), "-q"] + (["--dataset", args.dataset] if args.dataset else [])
    chosen = {k: v for k, v in CONFIGS.items() if args.only is None or k in args.only.split(",")}
    start = len(read_records(args.results)) if args.results.is_file() else 0
    ways = [("plain", None), ("ranks=1", 1), (f"ranks={args.nproc}", args.nproc)]
    for name, extra in chosen.items():
        for way, nproc in ways:
            env = dict(os.environ)
            command = [sys.executable, "-m", "iobench", "run", *extra, *common]
            if nproc is not None:
                env["OMP_NUM_THREADS"] = "1"
                command += ["--nproc", str(nproc)]
            print(f"{name}: {way} ...", file=sys.stderr, flush=True)
            subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    records = [r.to_json() for r in read_records(args.results)[start:]]  # flat, as stored
    r0 = records[0]
    print(
        f"\n{r0['hostname']}: {r0['cpu_model']}, {r0['cpu_count']} CPUs, {r0['gpu_name'] or 'no GPU'}; "
        f"dataset {r0['dataset']} ({r0['dataset_bytes'] / 1e9:.2f} GB), {r0['data_filesystem']} on "
        f"{r0['data_device']}; median of {args.runs} epochs each"
    )
    header = f"{'configuration':38} {'way':8} {'threads':>7} {'MB/s':>9} {'vs ranks=1':>10} "
    header += f"{'rank MB/s min-max':>19} {'straggler':>9} {'disk MB/epoch':>13}"
    print(header)
    for i, name in enumerate(chosen):
        group = records[i * len(ways) : (i + 1) * len(ways)]
        one = group[1]["mb_per_s"]
        for (way, _), r in zip(ways, group, strict=True):
            reads = [x for x in r["device_read_bytes"] if x is not None]
            disk = f"{sum(reads) / len(reads) / 1e6:,.0f}" if reads else "-"
            spread = f"{r['rank_mb_per_s_min']:,.0f}-{r['rank_mb_per_s_max']:,.0f}"
            print(
                f"{name:38} {way:8} {r['torch_threads']:>7} {r['mb_per_s']:>9,.0f} {r['mb_per_s'] / one:>9.2f}x "
                f"{spread:>19} {r['straggler_ratio']:>8.2f}x {disk:>13}"
            )


if __name__ == "__main__":
    main()
