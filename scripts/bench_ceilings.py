"""iobench's storage ceilings next to fio's, measured on the same file in one run, alternating.

    python scripts/bench_ceilings.py FILE [--read-limit MB/s] [--rounds 3]

fio is the reference tool (apt-get install fio); iobench does not need it at run time. Sequential:
fio 1 MiB blocks at queue depth 32 (libaio) against iobench's 8 MiB x 4 threads. Random 4 KiB:
fio psync with 1 job against iobench's one thread, and fio libaio at depth 32 against iobench's Linux
AIO at depth 32 (fio psync with 32 jobs is shown too, for the thread-per-read way). With --read-limit
both run inside the same blkio throttle (needs root).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
from pathlib import Path

from iobench.storage.local.confine import Confinement, confined
from iobench.storage.local.disk_limits import direct_read_mb_per_s, random_read_iops

FIO_JOBS = {
    "sequential MB/s": ["--rw=read", "--bs=1M", "--ioengine=libaio", "--iodepth=32"],
    "random 4 KiB QD1 IOPS": ["--rw=randread", "--bs=4k", "--ioengine=psync", "--numjobs=1"],
    "random 4 KiB QD32 IOPS": ["--rw=randread", "--bs=4k", "--ioengine=psync", "--numjobs=32"],
    "random 4 KiB QD32 IOPS (libaio)": ["--rw=randread", "--bs=4k", "--ioengine=libaio", "--iodepth=32"],
}


def fio(path: Path, job: list[str]) -> float:
    cmd = ["fio", "--name=x", f"--filename={path}", "--readonly", "--direct=1", "--group_reporting"]
    cmd += ["--time_based", "--runtime=3", "--output-format=json", *job]
    read = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)["jobs"][0]["read"]
    return read["bw_bytes"] / 1e6 if "--rw=read" in job else read["iops"]


def iobench(path: Path, name: str) -> float | None:
    if name.startswith("sequential"):
        return direct_read_mb_per_s(path)[0]
    if "QD32" in name and "libaio" not in name:
        return None  # iobench keeps 32 in flight with AIO: compared with fio's libaio row
    return random_read_iops(path, 4096, 32 if "QD32" in name else 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--read-limit", type=float, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("fio") is None:
        raise SystemExit("fio is not installed (apt-get install fio)")
    got: dict[str, dict[str, list[float]]] = {name: {"fio": [], "iobench": []} for name in FIO_JOBS}
    with confined(Confinement(read_limit_mb_per_s=args.read_limit), args.file.parent):
        for _ in range(args.rounds):
            for name, job in FIO_JOBS.items():
                got[name]["fio"].append(fio(args.file, job))
                value = iobench(args.file, name)
                if value is not None:
                    got[name]["iobench"].append(value)
    throttle = f", read limit {args.read_limit:g} MB/s" if args.read_limit else ""
    print(f"| {args.file.name}{throttle} | fio (median, min-max) | iobench (median, min-max) | iobench/fio |")
    print("| --- | --- | --- | --- |")
    for name, values in got.items():
        f, i = values["fio"], values["iobench"]
        cell = lambda v: f"{statistics.median(v):,.0f} ({min(v):,.0f}-{max(v):,.0f})" if v else "-"  # noqa: E731
        ratio = f"{statistics.median(i) / statistics.median(f):.2f}" if i else "-"
        print(f"| {name} | {cell(f)} | {cell(i)} | {ratio} |")


if __name__ == "__main__":
    main()
