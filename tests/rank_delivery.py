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
from iobench.formats import FORMATS
from iobench.loaders import LOADERS, RankShare
from iobench.measuring.clocks import time_epoch
from iobench.plan.config import RunConfig
from iobench.plan.resolve import RunTarget, resolve
from iobench.run.building import build_loader
from iobench.system.world import joined
from tests.conftest import run_config

ORDERS = {"sequential": {"shuffle": False}, "shuffle": {"shuffle": True}, "block": {"shuffle": True, "block_size": 5}}


def native_combinations(dataset_dir: Path) -> list[tuple[str, RunConfig]]:
    """The formats' own pipelines that split an epoch between ranks by their library's means."""
    prepared = Manifest.load(dataset_dir).formats
    out = []
    for fmt in (f for f in prepared if FORMATS[f].native_rank_split):
        for order in ("sequential", "shuffle"):
            out.append((f"{fmt}-native-{order}", run_config(fmt, "native", **ORDERS[order])))
        out.append((f"{fmt}-native-workers", run_config(fmt, "native", num_workers=2)))
    return out


def combinations(dataset_dir: Path) -> list[tuple[str, RunConfig]]:
    prepared = Manifest.load(dataset_dir).formats  # `--formats all` leaves out formats not installed
    out = []
    for loader, kind in LOADERS.items():
        if kind.ranks in (RankShare.NONE, RankShare.LIBRARY):
            continue  # Ray, Ray Data: one process fed by a cluster (refused); native: native_combinations
        if not kind.installed or kind.needs_cuda or kind.check is not None:
            continue  # nodes without torchdata: refused in one line (its own test); device-read: CUDA; dali: images

        for fmt in (f for f in kind.reads if f in prepared):
            for order, kw in ORDERS.items():
                if kind.ranks is RankShare.SAMPLER and order == "block":
                    continue  # DistributedSampler has no block shuffle (refused by check_world)
                out.append((f"{fmt}-{loader}-{order}", run_config(fmt, loader, **kw)))
    out.append(("npy-dataloader-workers", run_config("npy", "dataloader", num_workers=1)))
    out.append(("lmdb-dataloader-item", run_config("lmdb", "dataloader", fetch="item")))
    out.append(("memmap-tensorclass-workers", run_config("memmap", "tensorclass", num_workers=1)))
    return out


def main(dataset_dir: Path, out: Path, native: bool = False) -> None:
    manifest = Manifest.load(dataset_dir)
    chunks = list(generate(manifest.spec))
    features = np.concatenate([c.features for c in chunks])
    labels = np.concatenate([c.labels for c in chunks])
    index = {row.tobytes(): i for i, row in enumerate(features)}
    cpu = torch.device("cpu")
    with joined("cpu") as (world, _device):
        for name, config in (native_combinations if native else combinations)(dataset_dir):
            loader = build_loader(resolve(config, RunTarget(dataset_dir, cpu), world))
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
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:] == ["native"])
