"""iobench tune's best DataLoader settings for photos:make_dataset, 3,035 samples/s measured (epochs 2,713-3,447).

Run it to check the figure here; copy make_loader() into a training script.
"""

import sys
import time

import torch
from torch.utils.data import DataLoader

from iobench.api import split_batch

sys.path.insert(0, '/work/study-tree/docs/study/your-pipeline')  # where photos was imported from
from photos import make_dataset  # noqa: E402

DEVICE = torch.device('cpu')


def make_loader() -> DataLoader:
    return DataLoader(
        make_dataset(),
        batch_size=64,
        shuffle=True,
        num_workers=2,
        persistent_workers=True,
        in_order=False,
        pin_memory=False,
    )


if __name__ == "__main__":
    loader = make_loader()
    for epoch in range(2):
        start, seen = time.perf_counter(), 0
        for batch in loader:
            features, labels = split_batch(batch)
            features = features.to(DEVICE, non_blocking=True)
            seen += len(features)
        if DEVICE.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        print(f"epoch {epoch}: {seen} samples in {seconds:.2f} s, {seen / seconds:,.0f} samples/s")
