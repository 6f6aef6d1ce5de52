"""Fairness of `--loader spdl`: iobench's run against SPDL's own minimal pipeline on the same npy files, warm,
the same batches of shuffled indices, concurrency and sink buffer, interleaved rounds in one process.

SPDL's loop is the one its documentation builds, without iobench: a source of batches of shuffled indices (drawn
when first iterated, as SPDL's samplers draw them), `.pipe(read, concurrency=N)` reading each batch from
`np.load(mmap_mode="r")` by numpy's fancy index into tensors, `.add_sink(2)`, `.build(num_threads=N)`, iterated.
Goal: iobench >= 0.95x. Prints one table; nothing asserted.

Usage: python scripts/bench_spdl.py DATASET_DIR [--rounds 5] [--concurrency 1,2] [--batch-size 1024]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch


def spdl_epoch(folder: Path, batch: int, concurrency: int, seed: int) -> float:
    """samples/s of one epoch of SPDL's own pipeline, no iobench code."""
    from spdl.pipeline import PipelineBuilder

    features = np.load(folder / "npy" / "features.npy", mmap_mode="r")
    labels = np.load(folder / "npy" / "labels.npy", mmap_mode="r")

    def batches() -> Iterator[np.ndarray]:
        # drawn when the pipeline's source is first iterated, as SPDL's own samplers draw theirs
        # (spdl.source.DistributedRandomSampler.__iter__) and iobench's source does: inside the clock on both sides
        order = np.random.default_rng(seed).permutation(len(labels))
        yield from (order[k : k + batch] for k in range(0, len(order), batch))

    def read(indices: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(features[indices]), torch.from_numpy(labels[indices])

    start = time.perf_counter()
    source = batches()
    pipeline = (
        PipelineBuilder()
        .add_source(source)
        .pipe(read, concurrency=concurrency, output_order="input")
        .add_sink(2)
        .build(num_threads=concurrency)
    )
    n = 0
    with pipeline.auto_stop():
        for _x, y in pipeline.get_iterator(timeout=None):
            n += len(y)
    return n / (time.perf_counter() - start)


def iobench_epoch(folder: Path, batch: int, concurrency: int) -> float:
    """samples/s of one timed epoch of `iobench run --loader spdl` (after a warm-up epoch)."""
    from iobench.plan.config import RunConfig
    from iobench.plan.resolve import RunTarget, resolve
    from iobench.run.runner import run
    from iobench.settings import LoaderSettings

    settings = LoaderSettings(batch_size=batch, num_workers=concurrency)
    config = RunConfig(format="npy", loader="spdl", settings=settings, runs=1, epochs=1, warmup=1, cache="as-is")
    return run(resolve(config, RunTarget(folder, torch.device("cpu")))).epochs.samples_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", default="1,2")
    parser.add_argument("--batch-size", type=int, default=1024)
    args = parser.parse_args()
    print("| concurrency | iobench --loader spdl samples/s | SPDL's own pipeline samples/s | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    for c in (int(x) for x in args.concurrency.split(",")):
        ours, theirs = [], []
        spdl_epoch(args.dataset, args.batch_size, c, 0)  # warm both: the same files
        for r in range(args.rounds):
            theirs.append(spdl_epoch(args.dataset, args.batch_size, c, r))
            ours.append(iobench_epoch(args.dataset, args.batch_size, c))
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"| {c} | {a:,.0f} | {b:,.0f} | {a / b:.2f}x |")


if __name__ == "__main__":
    main()
