#!/usr/bin/env python
"""Benchmark `iobench run` against this machine's raw read bandwidth (issue 3's goals).

Measured in one run, on the memmap files of one prepared dataset:
  raw cold   sequential O_DIRECT reads of the features file, 8 MiB blocks, 4 in flight
  raw warm   plain reads of the same file with every page cached (a copy out of the page cache)
  cold       `--loader tensorclass --no-shuffle --device cpu`, caches dropped before the epoch
  warm       the median of the next three epochs with the same loader (everything cached and mapped)
  overhead   the runner's timed loop against a bare loop over the same batches, replayed from
             memory so that only the harness differs; reported as a share of the warm epoch
Goals: cold >= 90% of raw cold, warm >= 70% of raw warm, overhead < 2%. Every batch size in
--batch-sizes is measured; the goals are read at the first.

    python scripts/bench_run.py --data-dir data [--dataset NAME] [--repeats 3] [--batch-sizes 1024,4096]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import torch

from iobench.data.manifest import find_run_dataset
from iobench.loaders.base import Loader
from iobench.measuring.clocks import EpochTiming, time_bare_epoch, time_epoch
from iobench.measuring.read_rates import page_cache_mb_per_s
from iobench.plan.config import RunConfig
from iobench.plan.resolve import RunTarget, resolve
from iobench.run.building import build_loader
from iobench.storage.local.disk_limits import direct_read_mb_per_s
from iobench.storage.local.page_cache import evict, resident_fraction

BLOCK = 8 * 2**20
IN_FLIGHT = 4


class ReplayLoader(Loader):
    """Yields batches already in memory: a loop over it costs nothing but the loop itself."""

    def __init__(self, inner: Loader, batches: list) -> None:
        super().__init__(inner.order, inner.settings, inner.device)
        self.inner = inner
        self.batches = batches

    def _batches(self, epoch: int):
        return iter(self.batches)

    def to_device(self, batch):
        return self.inner.to_device(batch)

    def _release(self) -> None:
        self.batches = []


def harness_overhead(loader: Loader, rounds: int = 15) -> float:
    """Seconds per epoch the timed loop adds over a bare loop (min over alternating rounds)."""
    replay = ReplayLoader(loader, list(loader.epoch(0)))
    timed, bare = [], []
    for _ in range(rounds):
        timed.append(time_epoch(replay, 0, lambda b: None).seconds)
        bare.append(time_bare_epoch(replay, 0, lambda b: None))
    return min(timed) - min(bare)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=Path("data"))
    ap.add_argument("--dataset")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-sizes", default="1024,4096,16384")
    args = ap.parse_args()
    dataset_dir = find_run_dataset(args.data_dir, args.dataset)
    if dataset_dir is None:
        sys.exit(f"no dataset in {args.data_dir}; run `iobench prepare` first")
    sizes = [int(x) for x in args.batch_sizes.split(",")]
    config = RunConfig(format="memmap", loader="tensorclass", order="sequential")
    target = RunTarget(dataset_dir, torch.device("cpu"))
    resolved = resolve(config, target)
    manifest, files = resolved.manifest, resolved.files
    features = dataset_dir / resolved.entry.directory / "features.memmap"
    print(
        f"dataset {dataset_dir.name}: {manifest.spec.payload_bytes / 1e6:,.1f} MB payload; "
        f"{os.cpu_count()} cores; tensorclass loader --no-shuffle --device cpu"
    )

    def mbps(t: EpochTiming) -> float:
        return t.samples * manifest.spec.sample_bytes / 1e6 / t.seconds

    raw_cold, raw_warm, overhead = [], [], []
    cold: dict[int, list[float]] = {b: [] for b in sizes}
    warm: dict[int, list[float]] = {b: [] for b in sizes}
    for rep in range(args.repeats):
        method = evict(files)
        raw_cold.append(direct_read_mb_per_s(features)[0])
        raw_warm.append(page_cache_mb_per_s(features))
        lines = [f"repeat {rep + 1}: raw O_DIRECT {raw_cold[-1]:,.0f} MB/s, page-cache copy {raw_warm[-1]:,.0f} MB/s"]
        for bs in sizes:
            cfg = resolve(config.with_settings(batch_size=bs), target)
            evict(files, method)
            resident = resident_fraction(files)
            loader = build_loader(cfg)
            c = time_epoch(loader, 0, lambda b: None)
            ws = [time_epoch(loader, 1 + k, lambda b: None) for k in range(3)]
            w = sorted(ws, key=lambda t: t.seconds)[1]  # the median of three warm epochs
            cold[bs].append(mbps(c))
            warm[bs].append(mbps(w))
            if bs == sizes[0]:
                overhead.append(harness_overhead(loader) / w.seconds)
            loader.close()
            lines.append(
                f"batch {bs}: cold {cold[bs][-1]:,.0f} MB/s ({resident:.1%} resident at its start, "
                f"evicted by {method}), warm {warm[bs][-1]:,.0f} MB/s"
            )
        print("\n  ".join(lines))

    med = statistics.median
    print(
        f"\nmedians of {args.repeats} repeats: raw O_DIRECT {med(raw_cold):,.0f} MB/s, "
        f"page-cache copy {med(raw_warm):,.0f} MB/s"
    )
    print(f"{'batch':>7} {'cold MB/s':>10} {'% of raw':>9} {'warm MB/s':>10} {'% of copy':>10}")
    for bs in sizes:
        print(
            f"{bs:>7} {med(cold[bs]):>10,.0f} {med(cold[bs]) / med(raw_cold):>9.0%} "
            f"{med(warm[bs]):>10,.0f} {med(warm[bs]) / med(raw_warm):>10.0%}"
        )
    first = sizes[0]
    cold_ratio = med(cold[first]) / med(raw_cold)
    warm_ratio = med(warm[first]) / med(raw_warm)
    print(f"goal: cold >= 90% of raw at batch {first}: {cold_ratio:.0%} {'PASS' if cold_ratio >= 0.9 else 'FAIL'}")
    print(
        f"goal: warm >= 70% of the page-cache copy at batch {first}: {warm_ratio:.0%} "
        f"{'PASS' if warm_ratio >= 0.7 else 'FAIL'}"
    )
    print(
        f"goal: harness overhead < 2% of the warm epoch at batch {first}: {med(overhead):.2%} "
        f"{'PASS' if med(overhead) < 0.02 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
