"""Run under torchrun by test_distributed.py: each rank saves which samples reached it.

For every (format, loader, order, workers) and two epochs, rank r writes NAME-eE-rR.npy: the
dataset index of each delivered sample, -1 for a row that is not in the dataset and -2 for a row
whose label is wrong. The test checks that the ranks together cover the dataset exactly once.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from iobench.data.dataset import generate
from iobench.data.manifest import Manifest
from iobench.run.clocks import time_epoch
from iobench.run.distributed import joined
from iobench.run.loaders.base import LoaderSettings
from iobench.run.runner import LOADER_FORMATS, RunConfig, build_loader, resolve

ORDERS = {"sequential": {"shuffle": False}, "shuffle": {"shuffle": True}, "block": {"shuffle": True, "block_size": 5}}


def combinations(dataset_dir: Path) -> list[tuple[str, RunConfig]]:
    out = []
    for loader, formats in LOADER_FORMATS.items():
        if loader == "ray":
            continue  # one process fed by Ray actors: refused under torchrun
        for fmt in formats:
            for order, kw in ORDERS.items():
                if loader == "dataloader" and order == "block":
                    continue  # DistributedSampler has no block shuffle (refused by check_world)
                settings = LoaderSettings(batch_size=16)
                out.append((f"{fmt}-{loader}-{order}", RunConfig(dataset_dir, fmt, loader, settings, "cpu", **kw)))
    with_workers = LoaderSettings(batch_size=16, num_workers=1)
    out.append(("npy-dataloader-workers", RunConfig(dataset_dir, "npy", "dataloader", with_workers, "cpu")))
    item = LoaderSettings(batch_size=16, fetch="item")
    out.append(("lmdb-dataloader-item", RunConfig(dataset_dir, "lmdb", "dataloader", item, "cpu")))
    out.append(("memmap-tensorclass-workers", RunConfig(dataset_dir, "memmap", "tensorclass", with_workers, "cpu")))
    return out


def main(dataset_dir: Path, out: Path) -> None:
    manifest = Manifest.load(dataset_dir)
    chunks = list(generate(manifest.spec))
    features = np.concatenate([c.features for c in chunks])
    labels = np.concatenate([c.labels for c in chunks])
    index = {row.tobytes(): i for i, row in enumerate(features)}
    cpu = torch.device("cpu")
    with joined("cpu") as (world, _device):
        for name, config in combinations(dataset_dir):
            loader = build_loader(resolve(config, cpu), manifest, cpu, world)
            try:
                for epoch in (0, 1):
                    got: list[int] = []

                    def keep(batch, got=got):
                        for row, label in zip(batch[0].numpy(), batch[1].numpy(), strict=True):
                            i = index.get(np.ascontiguousarray(row).tobytes(), -1)
                            got.append(i if i < 0 or labels[i] == label else -2)

                    time_epoch(loader, epoch, keep)
                    np.save(out / f"{name}-e{epoch}-r{world.rank}.npy", np.array(got, dtype=np.int64))
            finally:
                loader.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
