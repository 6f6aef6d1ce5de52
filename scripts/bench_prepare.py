#!/usr/bin/env python
"""Benchmark `iobench prepare` against one sequential stream writing the same bytes to the same disk.

Goal (issue 2): prepare of all four formats takes at most 2x the time of the single stream, with a
peak RSS under 1.5 GiB. Both are measured in this one run; the stream is timed before and after
prepare (disks drift) and the faster of the two is the reference. The page cache is dropped
(root) or left as is before each phase, and the script says which.

    python scripts/bench_prepare.py --size 1e7 --data-dir /path/on/the/disk
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from workdir import remove_tree, remove_work, work_dir

BLOCK = 8 * 2**20


def drop_caches() -> str:
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return "dropped (root)"
    except OSError:
        return "not dropped (unprivileged)"


def sequential_write(path: Path, total: int) -> float:
    """One stream, 8 MiB writes of incompressible bytes, fsync at the end (as prepare does)."""
    buf = os.urandom(BLOCK)
    t0 = time.perf_counter()
    with open(path, "wb", buffering=0) as f:
        left = total
        while left > 0:
            left -= f.write(buf[: min(BLOCK, left)])
        os.fsync(f.fileno())
    return time.perf_counter() - t0


class Timed(NamedTuple):
    """What wait4 tells of one `iobench` child (and the writer processes it waited for)."""

    seconds: float  # wall
    peak_rss: int  # bytes
    code: int  # exit code
    cpu: float  # user + system seconds
    system: float  # of which in the kernel


def run_prepare(size: str, data_dir: Path, extra: list[str]) -> Timed:
    return timed_iobench(["prepare", "--size", size, "--data-dir", data_dir, "--force", *extra])


def timed_iobench(args: list[object], quiet: bool = False) -> Timed:
    """Run `iobench ARGS` in a child and time it."""
    t0 = time.perf_counter()
    out = subprocess.DEVNULL if quiet else None
    proc = subprocess.Popen([sys.executable, "-m", "iobench", *map(str, args)], stdout=out)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    cpu = usage.ru_utime + usage.ru_stime
    return Timed(seconds, usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status), cpu, usage.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1e7")
    ap.add_argument("--data-dir", type=Path, help="where prepare writes (default: a fresh temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the prepared dataset")
    ap.add_argument("extra", nargs="*", help="more `iobench prepare` options, after --")
    args = ap.parse_args()
    args.data_dir = work_dir(args.data_dir, "bench-prepare-")
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print(subprocess.run(["findmnt", "-T", str(args.data_dir)], capture_output=True, text=True).stdout.strip())

    ref = args.data_dir / "sequential-reference.bin"
    from iobench.spec import DatasetSpec
    from iobench.units import parse_size

    guess = 4.2 * DatasetSpec(parse_size(args.size)).payload_bytes  # about what prepare writes
    cache0 = drop_caches()
    try:
        seq_before = sequential_write(ref, int(guess))
    finally:
        ref.unlink(missing_ok=True)
    cache = drop_caches()
    prep_s, rss, code, cpu, _ = run_prepare(args.size, args.data_dir, args.extra)
    if code != 0:
        sys.exit(f"prepare failed with exit code {code}")
    (dataset_dir,) = [p for p in args.data_dir.iterdir() if (p / "manifest.json").is_file()][-1:]
    manifest = json.loads((dataset_dir / "manifest.json").read_text())
    total = sum(e["bytes"] for e in manifest["formats"].values())

    cache2 = drop_caches()
    try:
        seq_after = sequential_write(ref, total)
    finally:
        ref.unlink(missing_ok=True)
    # The first stream wrote an estimate of the bytes; scale it to the same total.
    seq_before *= total / int(guess)
    seq_s = min(seq_before, seq_after)
    if not args.keep:
        remove_tree(dataset_dir)
        remove_work(args.data_dir)

    print(f"\npage cache before each stream: {cache0}, {cache2}; before prepare: {cache}")
    print(f"{'format':<8} {'MB':>10} {'write s':>9} {'write MB/s':>11} {'checksum s':>11}")
    for name, e in manifest["formats"].items():
        print(
            f"{name:<8} {e['bytes'] / 1e6:>10,.1f} {e['write_seconds']:>9.2f} "
            f"{e['write_mb_per_s']:>11,.1f} {e['checksum_seconds']:>11.2f}"
        )
    print(
        f"\nprepare, all formats: {total / 1e6:,.1f} MB in {prep_s:.1f} s = {total / 1e6 / prep_s:,.1f} MB/s "
        f"({cpu:.1f} CPU s of the {os.cpu_count()} cores' {os.cpu_count() * prep_s:.1f})"
    )
    for label, secs in (("before", seq_before), ("after", seq_after)):
        print(f"one sequential stream {label}: {total / 1e6:,.1f} MB in {secs:.1f} s = {total / 1e6 / secs:,.1f} MB/s")
    ratio = prep_s / seq_s
    print(f"ratio prepare / faster stream: {ratio:.2f} (goal <= 2.00): {'PASS' if ratio <= 2 else 'FAIL'}")
    gib = rss / 2**30
    print(f"peak RSS of prepare: {gib:.2f} GiB (goal < 1.5 GiB): {'PASS' if gib < 1.5 else 'FAIL'}")


if __name__ == "__main__":
    main()
