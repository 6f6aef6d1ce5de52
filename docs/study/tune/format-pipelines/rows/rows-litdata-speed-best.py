"""iobench tune's best configuration: litdata through native, 151,763 samples/s measured (epochs 151,086-152,021).

Run it to check the figure here; copy make_loader() into a training script (iobench must be installed).
"""

import time

import torch

from iobench.api import NativeBatches, native_loader

DATASET = "/work/study-nfw/tabular/n50000_128_float32_c1000_s0"
DEVICE = torch.device("cpu")


def make_loader() -> NativeBatches:
    # litdata's own library pipeline with the knobs tune measured (--loader native)
    return native_loader(
        DATASET,
        "litdata",
        batch_size=256,
        shuffle=True,
        num_workers=0,
        pin_memory=False,
    )


if __name__ == "__main__":
    loader = make_loader()
    # epoch 0 warms up, as tune's rounds did: its figure is printed, not the one to compare
    for epoch in range(3):
        start, seen = time.perf_counter(), 0
        for batch in loader:
            features, labels = batch
            features = features.to(DEVICE, non_blocking=True)
            seen += len(features)
        if DEVICE.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        name = f"epoch {epoch}" if epoch else "warm-up"
        rate = seen / seconds
        print(f"{name}: {seen} samples in {seconds:.2f} s, {rate:,.0f} samples/s")
