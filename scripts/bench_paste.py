"""What `tune` pastes against what it measured: for each case, iobench's fresh run of the configuration (as `tune`
confirms its winner: a warm-up and 5 timed epochs) and then the script `tune` would paste for it, run in a fresh
process as the user runs it (`tune --check-paste`); the script's median over iobench's, round after round (A, B, A,
B: both see the same drift of a shared machine). Goal: >= 0.9 for every case, quiet and beside `--busy N` loops.

Cases: npy through the DataLoader (plain PyTorch), memmap through tensorclass (plain tensordict), npy through the
DataLoader with workers, and a user's `--dataset-factory` pipeline (a Dataset reading one row at a time, with a step).
Prints one table; nothing asserted.

Usage: python scripts/bench_paste.py DATA_DIR [--size 5e5] [--shape 256] [--rounds 5] [--busy 0] [--workers 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import textwrap
import time
from dataclasses import replace
from pathlib import Path

PIPELINE = """
import numpy as np
import torch
from torch.utils.data import Dataset

FOLDER = {folder!r}


class Rows(Dataset):
    '''A user's dataset: one row at a time from the npy files, mapped in the process that reads.'''

    def __init__(self):
        self.features = None
        self.n = np.load(FOLDER + "/labels.npy", mmap_mode="r").shape[0]

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.features is None:
            self.features = np.load(FOLDER + "/features.npy", mmap_mode="r")
            self.labels = np.load(FOLDER + "/labels.npy", mmap_mode="r")
        return torch.from_numpy(np.array(self.features[i])), int(self.labels[i])


def make():
    return Rows()


def step(features, labels):
    features.float().mean()
"""


def busy_loops(n: int) -> list[multiprocessing.Process]:
    """n processes spinning on a core each: the shared machine a user's tune ran on (load 5-9 on 2 cores)."""
    found = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(n)]
    for p in found:
        p.start()
    return found


def _spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--size", default="5e5")
    parser.add_argument("--shape", default="256")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--busy", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=1024)
    a = parser.parse_args()

    import torch

    from iobench.cli import main as iobench
    from iobench.judge.intervals import record_interval as interval
    from iobench.plan.config import RunConfig
    from iobench.plan.paste import best_script, factory_script
    from iobench.plan.resolve import RunTarget, resolve
    from iobench.run.dataset_factory import FactoryRequest, FactoryTrials, plan
    from iobench.run.paste_check import check_paste
    from iobench.run.runner import run
    from iobench.settings import LoaderSettings
    from iobench.spec import DatasetSpec
    from iobench.units import parse_size

    data = a.data_dir.resolve()
    spec = DatasetSpec(parse_size(a.size), shape=tuple(int(x) for x in a.shape.split(",")))
    dataset = data / spec.name
    if not (dataset / "manifest.json").is_file():
        try:
            iobench(
                [
                    "prepare",
                    "--size",
                    a.size,
                    "--shape",
                    a.shape,
                    "--formats",
                    "npy,memmap",
                    "--data-dir",
                    str(data),
                    "-q",
                ]
            )
        except SystemExit as done:
            assert done.code == 0
    folder = Path(tempfile.mkdtemp(prefix="bench-paste-"))
    (folder / "paste_pipeline.py").write_text(textwrap.dedent(PIPELINE.format(folder=str(dataset / "npy"))))
    sys.path.insert(0, str(folder))
    cpu = torch.device("cpu")
    target = RunTarget(dataset, cpu)
    b = a.batch_size
    formats = {
        "npy/dataloader w=0": RunConfig(format="npy", loader="dataloader", settings=LoaderSettings(batch_size=b)),
        "memmap/tensorclass w=0": RunConfig(
            format="memmap", loader="tensorclass", settings=LoaderSettings(batch_size=b)
        ),
        f"npy/dataloader w={a.workers}": RunConfig(
            format="npy", loader="dataloader", settings=LoaderSettings(batch_size=b, num_workers=a.workers)
        ),
    }
    request = FactoryRequest(
        factory="paste_pipeline:make",
        settings=LoaderSettings(batch_size=256, num_workers=a.workers),
        step="paste_pipeline:step",
    )
    planned = plan(request, cpu)
    trials = FactoryTrials(planned)

    def measured(name: str) -> tuple[float, Path]:
        """iobench's fresh run (a warm-up, 5 timed epochs) and the script tune pastes for it."""
        script = folder / f"{name.replace('/', '-').replace(' ', '_')}.py"
        if name in formats:
            c = replace(formats[name], epochs=5, runs=1, warmup=1)
            record = run(resolve(c, target))
            script.write_text(best_script(c, "bench", dataset, "cpu", folder=folder))
        else:
            _, measure = trials.trial(request, 5, None)
            record = measure()
            script.write_text(factory_script(request, "bench", folder, "cpu", features_per_sample=1))
        return interval(record).median, script

    names = [*formats, "paste_pipeline:make (factory) w=2"]
    rows: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    loops = busy_loops(a.busy)
    load = os.getloadavg()[0]
    try:
        for k in range(a.rounds):
            for name in names:
                ours, script = measured(name)
                pasted = check_paste(script, timeout_s=600)
                if pasted.samples_per_s is None:
                    print(f"{name}: {pasted.said}", file=sys.stderr)
                    continue
                rows[name].append((ours, pasted.samples_per_s))
                print(
                    f"round {k + 1} {name}: iobench {ours:,.0f}, pasted {pasted.samples_per_s:,.0f} "
                    f"({pasted.samples_per_s / ours:.2f}x)",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        for p in loops:
            p.terminate()
    print(
        f"\n{spec.name}, {a.rounds} rounds, {a.busy} busy loop(s) beside (load average {load:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end), {os.cpu_count()} cores\n"
    )
    print("| case | iobench samples/s (median) | pasted script (median) | ratio median | ratio range |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, got in rows.items():
        if not got:
            continue
        ratios = [p / o for o, p in got]
        print(
            f"| {name} | {statistics.median(o for o, _ in got):,.0f} | {statistics.median(p for _, p in got):,.0f} "
            f"| {statistics.median(ratios):.2f} | {min(ratios):.2f}-{max(ratios):.2f} |"
        )
    time.sleep(0)


if __name__ == "__main__":
    main()
