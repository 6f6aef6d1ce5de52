#!/usr/bin/env python
"""Benchmark `iobench run` against this machine's raw read bandwidth (issue 3's goals).

Measured in one run, on the memmap features file of one prepared dataset:
  raw_cold   sequential O_DIRECT reads, 8 MiB blocks, 4 in flight (the storage's bandwidth)
  raw_warm   plain reads of the same file with every page cached (a copy out of the page cache)
  tc_cold    `--loader tensorclass --no-shuffle`, caches dropped before every timed epoch
  tc_warm    the same after a warm-up epoch
  overhead   the runner's timed epoch against a bare loop over the same batches (warm)
Goals: tc_cold >= 90% of raw_cold, tc_warm >= 70% of raw_warm, overhead < 2%.

    python scripts/bench_run.py --data-dir data [--dataset NAME] [--repeats 3]
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import torch

from iobench.cache import evict, resident_fraction
from iobench.loaders.base import LoaderSettings
from iobench.manifest import find_run_dataset
from iobench.measure import time_bare_epoch, time_epoch
from iobench.runner import RunConfig, build_loader, check_dataset, resolve

BLOCK = 8 * 2**20
IN_FLIGHT = 4


def raw_direct_read(path: Path) -> float:
    """MB/s of O_DIRECT sequential reads with IN_FLIGHT threads on interleaved blocks."""
    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    offsets = list(range(0, size, BLOCK))

    def worker(k: int) -> None:
        buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT requires
        for off in offsets[k::IN_FLIGHT]:
            os.preadv(fd, [buf], off)
        buf.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(IN_FLIGHT)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    os.close(fd)
    return size / 1e6 / seconds


def page_cache_read(path: Path) -> float:
    """MB/s of copying an entirely cached file into a user buffer (one stream, 8 MiB reads)."""
    buf = bytearray(BLOCK)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass  # warm every page
        f.seek(0)
        t0 = time.perf_counter()
        n = 0
        while k := f.readinto(buf):
            n += k
    return n / 1e6 / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=Path("data"))
    ap.add_argument("--dataset")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=1024)
    args = ap.parse_args()
    dataset_dir = find_run_dataset(args.data_dir, args.dataset)
    if dataset_dir is None:
        sys.exit(f"no dataset in {args.data_dir}; run `iobench prepare` first")
    config = RunConfig(
        dataset_dir, "memmap", "tensorclass", LoaderSettings(batch_size=args.batch_size), device="cpu", shuffle=False
    )
    config = resolve(config, torch.device("cpu"))
    manifest = check_dataset(config)
    entry = manifest.formats["memmap"]
    files = [dataset_dir / entry.directory / f.path for f in entry.files]
    features = dataset_dir / entry.directory / "features.memmap"
    payload = manifest.spec.payload_bytes
    print(f"dataset {dataset_dir.name}: {payload / 1e6:,.1f} MB payload; {os.cpu_count()} cores")

    raw_cold, raw_warm, tc_cold, tc_warm, overhead = [], [], [], [], []
    for rep in range(args.repeats):
        method = evict(files)
        raw_cold.append(raw_direct_read(features))
        raw_warm.append(page_cache_read(features))
        loader = build_loader(config, manifest, torch.device("cpu"))
        loader.close()  # nothing may stay mapped while evicting
        evict(files, method)
        resident = resident_fraction(files)
        loader = build_loader(config, manifest, torch.device("cpu"))
        cold = time_epoch(loader, 0, lambda b: None)
        tc_cold.append(cold.samples * manifest.spec.sample_bytes / 1e6 / cold.seconds)
        warm = time_epoch(loader, 1, lambda b: None)
        tc_warm.append(warm.samples * manifest.spec.sample_bytes / 1e6 / warm.seconds)
        timed = [time_epoch(loader, 2 + k, lambda b: None).seconds for k in range(3)]
        bare = [time_bare_epoch(loader, 5 + k, lambda b: None) for k in range(3)]
        overhead.append(statistics.median(timed) / statistics.median(bare) - 1)
        loader.close()
        print(
            f"repeat {rep + 1}: evicted by {method}, {resident:.1%} resident before the cold epoch; "
            f"raw cold {raw_cold[-1]:,.0f} MB/s, tensorclass cold {tc_cold[-1]:,.0f} MB/s; "
            f"page-cache copy {raw_warm[-1]:,.0f} MB/s, tensorclass warm {tc_warm[-1]:,.0f} MB/s; "
            f"overhead {overhead[-1]:+.2%}"
        )

    def med(xs: list[float]) -> float:
        return statistics.median(xs)

    cold_ratio = med(tc_cold) / med(raw_cold)
    warm_ratio = med(tc_warm) / med(raw_warm)
    print(
        f"\nmedian of {args.repeats}: raw O_DIRECT {med(raw_cold):,.0f} MB/s, tensorclass cold {med(tc_cold):,.0f} "
        f"MB/s = {cold_ratio:.0%} (goal >= 90%): {'PASS' if cold_ratio >= 0.9 else 'FAIL'}"
    )
    print(
        f"median of {args.repeats}: page-cache copy {med(raw_warm):,.0f} MB/s, tensorclass warm "
        f"{med(tc_warm):,.0f} MB/s = {warm_ratio:.0%} (goal >= 70%): {'PASS' if warm_ratio >= 0.7 else 'FAIL'}"
    )
    print(
        f"harness overhead, timed vs bare epoch (median): {med(overhead):+.2%} (goal < 2%): "
        f"{'PASS' if med(overhead) < 0.02 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
