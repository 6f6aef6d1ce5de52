#!/usr/bin/env python
"""`--loader preload`, cold and shuffled, against the disk's own sequential read of the same file under the same read
throttle, alternating round by round (issue 68: 0.89-0.93 of fio on an Intel host, 0.954-0.964 on an AMD one).

Each round, in this order:
  disk       O_DIRECT sequential reads of the npy features file, 8 MiB blocks, queue depth 4 (what preload reads
             with), inside iobench's throttle cgroup (`--read-limit`; 0: none); the file evicted first. By fio
             (`--reference fio`, the default where it is installed) or by 4 threads' O_DIRECT preads into aligned
             buffers (`--reference odirect`: a machine without fio, such as the lent GPU machine)
  loaders    `iobench run --format npy,memmap --loader preload --cache cold --read-limit L --runs 1 --epochs 1`
             (`--loaders` adds others, device-read say, `--device` names the device): each epoch's MB/s (the
             dataset's bytes, labels included, over the epoch's seconds) for each format
The throttle lets about 500 MB through at full speed: give 1.5 GB or more (the default dataset is 3,000,000 rows of
128 float32, 1.56 GB). Prints the table of rounds and each ratio to the disk's figure, with `lscpu`'s model and the
load.

    sudo python scripts/bench_preload.py --data-dir data [--size 3e6] [--read-limit 400] [--rounds 3]
    python scripts/bench_preload.py --data-dir /tmp/d --read-limit 0 --reference odirect --device cuda \\
        --loaders preload,device-read
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

DISK = (
    "import json, subprocess, sys\n"
    "from pathlib import Path\n"
    "from iobench.storage.local.disk_limits import direct_read_mb_per_s\n"
    "from iobench.storage.local.confine import Confinement, confined\n"
    "from iobench.storage.local.page_cache import evict\n"
    "p, limit, how = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3]\n"
    "BLOCK, DEPTH = 8 << 20, 4\n"
    "def odirect():\n"  # iobench's storage ceiling: the same 8 MiB reads, 4 in flight, into aligned buffers
    "    return direct_read_mb_per_s(p, BLOCK, DEPTH)[0]\n"
    "def fio():\n"
    "    out = subprocess.run(['fio', '--name=seq', f'--filename={p}', '--rw=read', '--bs=8M', '--iodepth=4',\n"
    "        '--ioengine=libaio', '--direct=1', '--output-format=json'], capture_output=True, text=True, check=True)\n"
    "    return json.loads(out.stdout)['jobs'][0]['read']['bw_bytes'] / 1e6\n"
    "evict([p], 'fadvise')\n"
    "with confined(Confinement(read_limit_mb_per_s=limit or None), p.parent):\n"
    "    print(fio() if how == 'fio' else odirect())\n"
)


def cpu_model() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "?")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--size", default="3e6")
    parser.add_argument("--read-limit", type=float, default=400.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reference", choices=("fio", "odirect"), default="fio" if shutil.which("fio") else "odirect")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--loaders", default="preload", help="comma-separated; preload first")
    parser.add_argument("--results", type=Path, help="keep the runs' records here (appended)")
    args = parser.parse_args()
    if args.reference == "fio" and shutil.which("fio") is None:
        sys.exit("fio is not installed (apt-get install fio)")
    loaders = args.loaders.split(",")
    limit = ["--read-limit", str(args.read_limit)] if args.read_limit else []
    iobench = [sys.executable, "-m", "iobench"]
    from iobench.spec import DatasetSpec
    from iobench.units import parse_size

    name = DatasetSpec(parse_size(args.size)).name
    if not (args.data_dir / name / "memmap").is_dir():
        subprocess.run(
            [
                *iobench,
                "prepare",
                "--size",
                args.size,
                "--formats",
                "npy,memmap",
                "--data-dir",
                str(args.data_dir),
                "-q",
            ],
            check=True,
        )
    features = args.data_dir / name / "npy" / "features.npy"
    scratch = work_dir(None, "bench-preload-")
    rows = []
    try:
        for k in range(args.rounds):
            disk = float(
                subprocess.run(
                    [sys.executable, "-c", DISK, str(features), str(args.read_limit), args.reference],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout.split()[-1]
            )
            results = scratch / f"r{k}.jsonl"
            done = subprocess.run(
                [
                    *iobench,
                    "run",
                    "--format",
                    "npy,memmap",
                    "--loader",
                    args.loaders,
                    "--cache",
                    "cold",
                    *limit,
                    "--runs",
                    "1",
                    "--epochs",
                    "1",
                    "--device",
                    args.device,
                    "--data-dir",
                    str(args.data_dir),
                    "--dataset",
                    name,
                    "--results",
                    str(results),
                    "-q",
                ],
                capture_output=True,
                text=True,
            )
            if done.returncode:  # said, with what it measured before (a loader refused, or one that failed)
                print(f"round {k + 1}: iobench run ended with {done.returncode}:\n{done.stderr[-3000:]}", flush=True)
            if not results.exists():
                sys.exit(f"round {k + 1}: no record")
            records = [json.loads(line) for line in results.read_text().splitlines()]
            if args.results is not None:
                with args.results.open("a") as kept:
                    kept.write(results.read_text())
            rate = {(r["loader"], r["format"]): r["mb_per_s"] for r in records}
            busy = max(r.get("other_cpu_before") or 0.0 for r in records)  # other programs' cores before each run
            rows.append((disk, rate, busy))
            print(
                f"round {k + 1}: disk {disk:.1f} MB/s, "
                + ", ".join(f"{f}/{lo} {v:.1f} ({v / disk:.3f}x)" for (lo, f), v in rate.items()),
                flush=True,
            )
    finally:
        remove_work(scratch)
    limit_text = f"read limit {args.read_limit:g} MB/s" if args.read_limit else "no read limit"
    print(f"\n{name}, shuffled, cold, {limit_text}, device {args.device}, {cpu_model()}, uid {os.geteuid()}")
    keys = [(lo, f) for lo in loaders for f in ("npy", "memmap")]
    print(
        f"| round | {args.reference} sequential | "
        + " | ".join(f"{f}/{lo}" for lo, f in keys)
        + " | other programs' cores |"
    )
    print("| --- | ---: | " + "---: | " * len(keys) + "---: |")
    for k, (disk, rate, load) in enumerate(rows, 1):
        cells = " | ".join(f"{rate[key]:.1f} ({rate[key] / disk:.3f}x)" if key in rate else "-" for key in keys)
        print(f"| {k} | {disk:.1f} MB/s | {cells} | {load:.2f} |")
    for loader in loaders:
        best = [max(rate.get((loader, "npy"), 0.0), rate.get((loader, "memmap"), 0.0)) / disk for disk, rate, _ in rows]
        print(
            f"best of npy and memmap by {loader} against {args.reference}: median {statistics.median(best):.3f}x "
            f"({min(best):.3f}-{max(best):.3f})"
        )


if __name__ == "__main__":
    main()
