"""Fairness of `--loader ray-data`: iobench's run against Ray Data's own minimal loop on the same npy files, warm,
the same batches of shuffled indices, actor pool and prefetch, interleaved rounds on one local Ray instance.

Ray Data's loop is the one its documentation writes to feed PyTorch, without iobench: `ray.data.from_items` of the
epoch's batches of indices (a block each), `map_batches` of a callable class that opens the files with
`np.load(mmap_mode="r")` and reads each batch by numpy's fancy index, on `ActorPoolStrategy(size=N)`,
`iter_torch_batches(batch_size=None, prefetch_batches=2)`. Each epoch is a new execution on both sides (its actors
start inside the epoch), and each side's timed epoch follows a warm-up epoch at once (the last execution's actors
still ending). Goal: iobench >= 0.95x. Prints one table; nothing asserted.

Usage: python scripts/bench_ray_data.py DATASET_DIR [--rounds 5] [--actors 1,2] [--batch-size 1024]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch


class Read:
    """Ray Data's callable class: the files opened once per actor."""

    def __init__(self, folder: str) -> None:
        self.features = np.load(Path(folder) / "npy" / "features.npy", mmap_mode="r")
        self.labels = np.load(Path(folder) / "npy" / "labels.npy", mmap_mode="r")

    def __call__(self, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        (indices,) = rows["indices"]
        return {"features": self.features[indices], "labels": self.labels[indices]}


def ray_data_epoch(folder: Path, batch: int, actors: int, seed: int) -> float:
    """samples/s of one epoch of Ray Data's own loop, no iobench code."""
    import ray.data

    n = len(np.load(folder / "npy" / "labels.npy", mmap_mode="r"))
    order = np.random.default_rng(seed).permutation(n)
    start = time.perf_counter()
    windows = [{"indices": order[k : k + batch]} for k in range(0, n, batch)]
    ds = ray.data.from_items(windows, override_num_blocks=len(windows))
    ds = ds.map_batches(
        Read,
        fn_constructor_args=(str(folder),),
        batch_size=1,
        compute=ray.data.ActorPoolStrategy(size=actors),
        batch_format="numpy",
    )
    seen = 0
    for b in ds.iter_torch_batches(batch_size=None, prefetch_batches=2, device="cpu"):
        seen += len(b["labels"])
    return seen / (time.perf_counter() - start)


def iobench_epoch(folder: Path, batch: int, actors: int) -> float:
    """samples/s of one timed epoch of `iobench run --loader ray-data` (after a warm-up epoch)."""
    from iobench.plan.config import RunConfig
    from iobench.plan.resolve import RunTarget, resolve
    from iobench.run.runner import run
    from iobench.settings import LoaderSettings

    settings = LoaderSettings(batch_size=batch, num_workers=actors)
    config = RunConfig(format="npy", loader="ray-data", settings=settings, runs=1, epochs=1, warmup=1, cache="as-is")
    return run(resolve(config, RunTarget(folder, torch.device("cpu")))).epochs.samples_per_s


def main() -> None:
    import logging

    import ray

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--actors", default="1,2")
    parser.add_argument("--batch-size", type=int, default=1024)
    args = parser.parse_args()
    ray.init(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    print("| actors | iobench --loader ray-data samples/s | Ray Data's own loop samples/s | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    for a in (int(x) for x in args.actors.split(",")):
        ours, theirs = [], []
        ray_data_epoch(args.dataset, args.batch_size, a, 0)  # warm both: the same files
        for r in range(args.rounds):
            ray_data_epoch(args.dataset, args.batch_size, a, r)  # as iobench's: timed right after a warm-up epoch
            theirs.append(ray_data_epoch(args.dataset, args.batch_size, a, r))
            ours.append(iobench_epoch(args.dataset, args.batch_size, a))
        x, y = statistics.median(ours), statistics.median(theirs)
        print(f"| {a} | {x:,.0f} | {y:,.0f} | {x / y:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
