"""Is `--loader dali` as fast as DALI's own loop? The same photos of a `files` dataset, read by DALI's documented image
pipeline (`fn.readers.file` + `fn.decoders.image` + `fn.random_resized_crop`, `DALIGenericIterator`) in a minimal
loop written from DALI's documentation, and through iobench's loader and clock, in alternating rounds in one process;
the median images/s of each and their ratio. The pipeline is built before each side's clock, as a script builds it
before its loop; the clock stops after the device is done.

    python scripts/bench_dali.py DATASET_DIR [--rounds 5] [--threads 2] [--batch-size 64] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from iobench.data.manifest import Manifest
from iobench.formats import FORMATS
from iobench.formats.files_layout import sample_path
from iobench.loaders import LoaderName
from iobench.loaders.device import synchronize
from iobench.measuring.clocks import time_epoch
from iobench.plan.config import RunConfig
from iobench.plan.resolve import RunTarget, resolve
from iobench.run.building import build_loader
from iobench.settings import LoaderSettings


def dalis_own_loop(
    files: list[str], shape: tuple[int, ...], batch: int, threads: int, device: torch.device, epochs: int
) -> list[float]:
    """DALI's documentation's loop: a pipeline_def, build, DALIGenericIterator, iterate; images/s per epoch."""
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    cuda = device.type == "cuda"

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=(device.index or 0) if cuda else None, seed=0)
    def images():
        jpegs, labels = fn.readers.file(
            files=files, labels=list(range(len(files))), random_shuffle=True, pad_last_batch=True, name="Reader"
        )
        decoded = fn.decoders.image(jpegs, device="mixed" if cuda else "cpu", output_type=types.RGB)
        decoded = fn.random_resized_crop(decoded, size=shape[1:])
        return fn.transpose(decoded, perm=[2, 0, 1]), labels

    pipe = images()
    pipe.build()
    loader = DALIGenericIterator(
        pipe, ["data", "label"], reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True
    )
    rates = []
    for _ in range(epochs + 1):  # the first epoch untimed, as iobench's warm-up
        start, seen = time.perf_counter(), 0
        for out in loader:
            seen += out[0]["data"].shape[0]
        synchronize(device)
        rates.append(seen / (time.perf_counter() - start))
    del loader, pipe
    return rates[1:]


def harness(dataset: Path, batch: int, threads: int, device: torch.device, epochs: int) -> list[float]:
    settings = LoaderSettings(batch_size=batch, num_workers=threads)
    config = RunConfig(format="files", loader=LoaderName.DALI, settings=settings)
    loader = build_loader(resolve(config, RunTarget(dataset, device)))
    rates = []
    try:
        for epoch in range(epochs + 1):
            loader.prepare(epoch)
            timing = time_epoch(loader, epoch, lambda b: None)
            rates.append(timing.samples / timing.seconds)
    finally:
        loader.close()
    return rates[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    a = parser.parse_args()
    device = torch.device(a.device)
    manifest = Manifest.load(a.dataset)
    spec, entry = manifest.spec, manifest.formats["files"]
    options = FORMATS["files"].options_from_json(entry.options)
    folder = entry.folder(a.dataset)
    files = [str(folder / sample_path(i, spec, options.file_suffix)) for i in range(spec.n_samples)]
    own, ours = [], []
    for k in range(a.rounds):  # alternating: a shared machine's drift falls on both
        own += dalis_own_loop(files, spec.shape, a.batch_size, a.threads, device, a.epochs)
        ours += harness(a.dataset, a.batch_size, a.threads, device, a.epochs)
        print(
            f"round {k + 1}: DALI's loop {statistics.median(own):,.0f} images/s, "
            f"iobench {statistics.median(ours):,.0f} images/s"
        )
    ratio = statistics.median(ours) / statistics.median(own)
    print(
        f"iobench --loader dali / DALI's own loop: {ratio:.2f}x ({len(ours)} epochs each, {spec.n_samples} photos, "
        f"batch {a.batch_size}, {a.threads} threads, {device})"
    )


if __name__ == "__main__":
    main()
