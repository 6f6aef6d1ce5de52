#!/usr/bin/env python
"""What iobench's harness costs a user's own pipeline (`iobench.measure`, `run --dataset-factory`).

The same DataLoader over the same user Dataset, timed three ways, interleaved round by round so that
the machine's drift falls on all three alike:
  bare     a plain loop: `for features, labels in loader: features.to(device)`, perf_counter around it
  measure  `iobench.measure(loader, epochs=1, warmup=0)` (its clock, split and sync)
  factory  `run --dataset-factory`'s runner (`iobench.run.dataset_factory.run_factory`), one timed epoch
Each round builds a fresh DataLoader for each and runs one untimed epoch first. Prints samples/s
(median, min-max) and each harness's median against the bare loop's (1.00 = costs nothing).

    python scripts/bench_factory.py [--rounds 7] [--samples 200000] [--workers 0,2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))  # plan() imports this file as bench_factory

SAMPLES = 200_000  # what plan() builds to describe the samples; the measured rows are --samples


class Rows(Dataset):
    """A user's rows: 64 float32 a sample, read one at a time (the DataLoader's default pattern)."""

    def __init__(self, n: int) -> None:
        self.x = torch.randn(n, 64)
        self.y = torch.randint(0, 10, (n,))

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i], self.y[i]


def make_rows() -> Rows:
    return Rows(SAMPLES)


def bare(loader: DataLoader) -> float:
    for features, _ in loader:  # untimed epoch, as the harnesses have
        features.to("cpu")
    seen, start = 0, time.perf_counter()
    for features, _ in loader:
        features.to("cpu")
        seen += len(features)
    return seen / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--samples", type=int, default=SAMPLES)
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()

    import iobench
    from iobench.run.dataset_factory import FactoryRequest, plan, run_factory
    from iobench.settings import LoaderSettings

    rounds = f"{args.rounds} rounds, torch {torch.__version__}"
    print(f"{args.samples:,} rows of 64 float32, batch {args.batch_size}, {rounds}")
    print(
        f"{'workers':>7} {'bare samples/s':>24} {'measure samples/s':>24} {'factory samples/s':>24} "
        f"{'measure/bare':>12} {'factory/bare':>12}"
    )
    for workers in [int(w) for w in args.workers.split(",")]:
        settings = LoaderSettings(batch_size=args.batch_size, num_workers=workers)
        request = FactoryRequest(factory="bench_factory:make_rows", settings=settings, runs=1, epochs=1, warmup=1)
        planned = plan(request, torch.device("cpu"))
        planned = replace(planned, dataset=Rows(args.samples), n_samples=args.samples)
        rates: dict[str, list[float]] = {"bare": [], "measure": [], "factory": []}
        for _ in range(args.rounds):
            rates["bare"].append(bare(planned.loader()))
            m = iobench.measure(planned.loader(), epochs=1, warmup=1)
            rates["measure"].append(m.samples_per_s)
            rates["factory"].append(run_factory(planned).epochs.samples_per_s)
        med = {k: statistics.median(v) for k, v in rates.items()}
        cells = [f"{med[k]:,.0f} ({min(v):,.0f}-{max(v):,.0f})" for k, v in rates.items()]
        print(
            f"{workers:>7} {cells[0]:>24} {cells[1]:>24} {cells[2]:>24} "
            f"{med['measure'] / med['bare']:>12.2f} {med['factory'] / med['bare']:>12.2f}"
        )


if __name__ == "__main__":
    main()
