"""Where does tune's figure differ from its pasted script? Interleaved warm epochs in one process.

For each case: iobench's loader under its clock ("harness"), the same loader without the clock ("bare(carry)"),
the same DataLoader with its dataset's index carrying switched off ("nocarry"), and make_loader() of the script
tune pasted ("pasted"); samples/s, median (min-max), and x the pasted loop.

Usage: python harness-vs-pasted.py [CASE ...] (the formats study's rows at DATA below; output in the .txt)
"""

import runpy
import statistics
import sys
import time
from pathlib import Path

import torch

from iobench.loaders.base import LoaderSettings
from iobench.measuring.clocks import time_bare_epoch, time_epoch
from iobench.plan.config import RunConfig
from iobench.plan.resolve import RunTarget, resolve
from iobench.run.building import build_loader

DATA = Path("/work/study-nfw/tabular/n50000_128_float32_c1000_s0")
HERE = Path(__file__).parent
ROUNDS = 7
CASES = {
    "litdata-dl-w2": (
        RunConfig(format="litdata", settings=LoaderSettings(batch_size=256, num_workers=2)),
        HERE / "rows-litdata-best.py",
    ),
    "litdata-native-w0": (
        RunConfig(format="litdata", loader="native", settings=LoaderSettings(batch_size=256)),
        HERE / "rows-litdata-speed-best.py",
    ),
    "wds-dl-w2-unordered": (
        RunConfig(format="webdataset", settings=LoaderSettings(batch_size=256, num_workers=2, in_order=False)),
        HERE / "rows-webdataset-best.py",
    ),
}


def loop(batches) -> float:
    """The pasted script's loop: samples/s of one epoch."""
    start, n = time.perf_counter(), 0
    for features, _ in batches:
        n += len(features.to("cpu", non_blocking=True))
    return n / (time.perf_counter() - start)


def measure(name: str) -> None:
    config, script = CASES[name]
    loader = build_loader(resolve(config, RunTarget(DATA, torch.device("cpu"))))
    pasted = runpy.run_path(str(script))["make_loader"]()
    inner = getattr(loader, "loader", None)  # the DataLoader (None for a native pipeline)

    def nocarry(epoch: int) -> float:
        if inner is None:
            return 0.0
        was, inner.dataset.carry = inner.dataset.carry, False
        loader.sampler.epoch = epoch
        try:
            return loop(inner)
        finally:
            inner.dataset.carry = was

    res: dict[str, list[float]] = {"harness": [], "bare(carry)": [], "nocarry": [], "pasted": []}
    time_epoch(loader, 0, lambda b: None)
    loop(pasted)
    for r in range(1, ROUNDS + 1):
        t = time_epoch(loader, r, lambda b: None)
        res["harness"].append(t.samples / t.seconds)
        res["bare(carry)"].append(t.samples / time_bare_epoch(loader, r, lambda b: None))
        res["nocarry"].append(nocarry(r))
        res["pasted"].append(loop(pasted))
    loader.close()
    base = statistics.median(res["pasted"])
    parts = [
        f"{k}: {statistics.median(v):,.0f} ({min(v):,.0f}-{max(v):,.0f}) {statistics.median(v) / base:.3f}x"
        for k, v in res.items()
    ]
    print(name, "  ".join(parts), flush=True)


if __name__ == "__main__":
    for case in sys.argv[1:] or CASES:
        measure(case)
