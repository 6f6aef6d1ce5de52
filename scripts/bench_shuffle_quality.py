"""What scoring an epoch's shuffle quality costs beside that epoch (the goal: under 1% of a warm epoch).

Times score() on the delivered order of a shuffled epoch of N samples, and a warm shuffled epoch of npy
through the DataLoader on the same N (iobench run), in one process; prints both and the ratio.
Usage: python scripts/bench_shuffle_quality.py --data-dir DIR [--batch-size 1024]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from iobench.data.manifest import find_run_dataset
from iobench.plan.config import RunConfig
from iobench.plan.resolve import RunTarget, resolve
from iobench.results.shuffle_quality import score
from iobench.run.runner import run
from iobench.settings import LoaderSettings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--batch-size", type=int, default=1024)
    args = parser.parse_args()
    dataset = find_run_dataset(args.data_dir, None, ("npy",))
    config = RunConfig(format="npy", settings=LoaderSettings(batch_size=args.batch_size), runs=1, epochs=3)
    record = run(resolve(config, RunTarget(dataset, torch.device("cpu"))))
    n = record.dataset.n_samples
    delivered = np.random.default_rng(0).permutation(n)
    costs = []
    for _ in range(5):
        start = time.perf_counter()
        score(delivered, n, args.batch_size)
        costs.append(time.perf_counter() - start)
    epoch, cost = record.epochs.epoch_seconds_median, statistics.median(costs)
    print(
        f"{n:,} samples, batch {args.batch_size}: warm shuffled npy epoch {epoch:.3f} s (median of 3), "
        f"scoring {cost * 1000:.1f} ms (median of 5): {100 * cost / epoch:.2f}% of the epoch; "
        f"scores {record.epochs.shuffle_spread:.3f}/{record.epochs.shuffle_order:.3f}"
    )


if __name__ == "__main__":
    main()
