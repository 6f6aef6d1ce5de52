"""Fairness and write speed of the new formats: iobench against each library's own minimal code.

Reading: for each of webdataset, arrow, zarr, tfrecord, litdata and lance, `iobench run --loader native` (through
iobench's harness: clock, split, carried indices, scoring) against the library's documentation snippet written
here without iobench (same data, batch size and workers, same process, interleaved rounds), warm and
(`--cache warm,cold`, root) cold: every file of the format evicted before each epoch on both sides.
Goal: iobench >= 0.95x the snippet (Lance: two snippets, its bare take() loop and the DataLoader over
take() it documents for PyTorch, see SNIPPETS). Writing: `iobench prepare --from` an npy pair of the samples
(page-cached: reading it costs little beside writing) against the library's writer alone fed the same
samples from memory; goal >= 0.8x. Peak RSS of the
prepare in a child process is printed (goal: under 1 GiB). Prints one table; nothing is asserted.

Writing is measured on --write-size samples (imports and set-up amortised), each format prepared alone in
a child process, and the library's writer alone followed by a sync (prepare's figure includes its fsync).

Usage: python scripts/bench_formats.py --data-dir DIR [--size 2e4] [--write-size 2e5] [--workers 0,2] [--rounds 3]
       [--formats webdataset,arrow,zarr,tfrecord,litdata] [--write-only] [--write-rounds 3] [--cache warm,cold]
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader
from workdir import MARKER, remove_tree, remove_work, work_dir

FORMATS = ("webdataset", "arrow", "zarr", "tfrecord", "litdata", "lance")
# Where a library documents more than one loop: Lance's bare take() loop, and the DataLoader over take() it hands
# PyTorch users (lance.torch.data.SafeLanceDataset, get_safe_loader), which iobench's native pipeline is
SNIPPETS = {"lance": ("lance", "lance-dataloader")}
BATCH = 256


def prepare(data_dir: Path, size: str, formats: str, source: Path | None = None) -> tuple[Path, float]:
    """Prepare in a child process (generated, or `--from` an npy pair); returns the dataset folder and the
    child's peak RSS in MiB."""
    # VmHWM, not ru_maxrss: the latter keeps the high-water mark of the forked parent across exec
    code = (
        "import sys; from iobench.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    rc = e.code\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "print('RSS', hwm)\n"
    )
    args = ["prepare", "--size", size, "--workload", "small-image", "--data-dir", str(data_dir), "--formats", formats]
    if source is not None:
        args = [
            "prepare",
            "--from",
            str(source / "x.npy"),
            "--labels",
            str(source / "y.npy"),
            "--data-dir",
            str(data_dir),
            "--formats",
            formats,
        ]
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    rss = [int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("RSS")][0] / 1024
    dataset = next(p for p in data_dir.iterdir() if p.is_dir())
    return dataset, rss


def snippet_epoch(fmt: str, folder: Path, workers: int, seed: int) -> tuple[int, float]:
    """One epoch of the library's own documented loop, no iobench code: (samples, seconds)."""
    start = time.perf_counter()
    n = 0
    if fmt == "webdataset":
        import webdataset as wds

        urls = sorted(str(p) for p in folder.glob("*.tar"))
        ds = (
            wds.WebDataset(urls, shardshuffle=100, detshuffle=True, seed=seed, nodesplitter=None, empty_check=False)
            .shuffle(1000)
            .decode("rgb8")
            .to_tuple("png", "cls")
            .batched(BATCH)
        )
        for _images, labels in DataLoader(ds, batch_size=None, num_workers=workers):
            n += len(labels)
    elif fmt == "arrow":
        import datasets

        ds = datasets.load_from_disk(str(folder))
        # choosing the torch dtype as datasets documents it (its default turns uint8 into int64)
        dtype = getattr(torch, ds.features["features"].dtype)
        ds = ds.with_format("torch", columns=["features"], output_all_columns=True, dtype=dtype)
        g = torch.Generator().manual_seed(seed)
        for batch in DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers, generator=g):
            n += len(batch["label"])
    elif fmt == "tfrecord":
        from tfrecord.torch.dataset import MultiTFRecordDataset

        np.random.seed(seed)
        shards = sorted(p.stem.removeprefix("shard-") for p in folder.glob("*.tfrecord"))
        ds = MultiTFRecordDataset(
            str(folder / "shard-{}.tfrecord"),
            str(folder / "shard-{}.index"),
            dict.fromkeys(shards, 1.0),
            description={"image": "byte", "label": "int"},
            shuffle_queue_size=1024,
            transform=decode_tfrecord,
            infinite=False,
        )
        for _images, labels in DataLoader(ds, batch_size=BATCH, num_workers=workers):
            n += len(labels)
    elif fmt == "litdata":
        import litdata

        ds = litdata.StreamingDataset(str(folder), shuffle=True, seed=seed)
        for batch in litdata.StreamingDataLoader(ds, batch_size=BATCH, num_workers=workers):
            n += len(batch["label"])
    elif fmt == "lance":
        import lance

        # Lance's documented random access: take() of each shuffled batch of row indices (no worker processes:
        # it is not fork-safe, and reads with its own threads)
        ds = lance.dataset(str(folder / "data.lance"))
        order = np.random.default_rng(seed).permutation(ds.count_rows())
        for k in range(0, len(order), BATCH):
            _x, labels = lance_tensors(ds.take(order[k : k + BATCH].tolist(), columns=["features", "label"]))
            n += len(labels)
    elif fmt == "lance-dataloader":
        # The same take, the way Lance hands it to PyTorch (lance.torch.data: SafeLanceDataset's __getitems__ takes
        # each batch of the DataLoader's shuffled indices, get_safe_loader is the DataLoader), tensors for its
        # to_pylist (what a tensor user writes)
        g = torch.Generator().manual_seed(seed)
        loader = DataLoader(
            LanceTaken(folder / "data.lance"),
            batch_size=BATCH,
            shuffle=True,
            num_workers=workers,
            collate_fn=lambda b: b,
            generator=g,
        )
        for _x, labels in loader:
            n += len(labels)
    else:
        g = torch.Generator().manual_seed(seed)
        loader = DataLoader(
            ZarrBatches(folder),
            batch_size=BATCH,
            shuffle=True,
            num_workers=workers,
            collate_fn=lambda b: b,
            generator=g,
        )
        for _x, y in loader:
            n += len(y)
    return n, time.perf_counter() - start


def decode_tfrecord(example: dict) -> tuple[np.ndarray, int]:
    """What a TFRecord image user writes as the dataset's transform: the PNG decoded, channels first."""
    from PIL import Image

    return np.moveaxis(np.asarray(Image.open(io.BytesIO(example["image"]))), -1, 0), int(example["label"][0])


def lance_tensors(table) -> tuple[torch.Tensor, torch.Tensor]:
    values = table.column("features").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return torch.from_numpy(values.copy()), torch.from_numpy(table.column("label").to_numpy())


class LanceTaken(torch.utils.data.Dataset):
    """lance.torch.data.SafeLanceDataset's shape: the row count read up front, the dataset opened where it reads."""

    def __init__(self, uri: Path) -> None:
        import lance

        self.uri, self.ds, self.n = str(uri), None, lance.dataset(str(uri)).count_rows()

    def __len__(self) -> int:
        return self.n

    def __getitems__(self, indices: list[int]):
        import lance

        if self.ds is None:
            self.ds = lance.dataset(self.uri)
        return lance_tensors(self.ds.take(indices, columns=["features", "label"]))


class ZarrBatches(torch.utils.data.Dataset):
    """What a Zarr user writes for a DataLoader: a batch as one orthogonal selection of sorted indices."""

    def __init__(self, folder: Path) -> None:
        import zarr

        self.folder, self.arrays = folder, None
        self.n = zarr.open_group(str(folder), mode="r")["labels"].shape[0]

    def __len__(self) -> int:
        return self.n

    def __getitems__(self, keys: list[int]):
        import zarr

        if self.arrays is None:  # opened in the worker
            group = zarr.open_group(str(self.folder), mode="r")
            self.arrays = group["features"], group["labels"][:]
        features, labels = self.arrays
        idx = np.sort(np.asarray(keys))
        return torch.from_numpy(features.oindex[idx]), torch.from_numpy(labels[idx])


def litdata_samples(item: tuple[str, int, int]):
    """What a LitData user's optimize function does: yield the samples of one input (here a range of rows)."""
    folder, start, stop = item
    x, y = np.load(f"{folder}/x.npy", mmap_mode="r"), np.load(f"{folder}/y.npy", mmap_mode="r")
    for i in range(start, stop):
        yield {"features": np.asarray(x[i]), "label": int(y[i]), "index": i}


def iobench_rate(dataset: Path, fmt: str, workers: int, warmup: int = 0, cache: str = "as-is") -> float:
    """One timed epoch of `iobench run --loader native`; with `warmup`, after untimed ones (the reader's
    one-off checks of its files, paid by the first epoch of a run, then land outside the clock); `cold`:
    the format's files evicted first (the reader opened after the eviction, as a cold run does)."""
    from iobench.plan.config import RunConfig
    from iobench.plan.resolve import RunTarget, resolve
    from iobench.run.runner import run
    from iobench.settings import LoaderSettings

    config = RunConfig(
        format=fmt,
        loader="native",
        settings=LoaderSettings(batch_size=BATCH, num_workers=workers),
        runs=1,
        epochs=1,
        warmup=warmup,
        cache=cache,
    )
    return run(resolve(config, RunTarget(dataset, torch.device("cpu")))).epochs.samples_per_s


def library_write(fmt: str, features: np.ndarray, labels: np.ndarray, out: Path, workers: int | None = None) -> float:
    """The library's writer alone on samples already in memory: MB/s of samples (`workers`: optimize's)."""
    start = time.perf_counter()
    if fmt == "webdataset":
        import webdataset as wds
        from PIL import Image

        with wds.ShardWriter(str(out / "shard-%06d.tar"), maxcount=10_000, verbose=0) as sink:
            for i, (x, y) in enumerate(zip(features, labels, strict=True)):
                buf = io.BytesIO()
                Image.fromarray(np.moveaxis(x, 0, -1)).save(buf, format="PNG")
                sink.write({"__key__": f"{i:09d}", "png": buf.getvalue(), "cls": int(y)})
    elif fmt == "arrow":
        import datasets

        shape = features.shape[1:]
        feats = datasets.Features(
            {"features": datasets.Array3D(shape=shape, dtype="uint8"), "label": datasets.Value("int64")}
        )

        def rows():
            for x, y in zip(features, labels, strict=True):
                yield {"features": x, "label": int(y)}

        ds = datasets.Dataset.from_generator(rows, features=feats, cache_dir=str(out / "cache"))
        ds.save_to_disk(str(out / "saved"))
    elif fmt == "tfrecord":
        import tfrecord
        from PIL import Image

        for k in range(0, len(features), 10_000):
            writer = tfrecord.TFRecordWriter(str(out / f"shard-{k // 10_000:06d}.tfrecord"))
            for i in range(k, min(k + 10_000, len(features))):
                buf = io.BytesIO()
                Image.fromarray(np.moveaxis(features[i], 0, -1)).save(buf, format="PNG")
                writer.write({"image": (buf.getvalue(), "byte"), "label": (int(labels[i]), "int"), "index": (i, "int")})
            writer.close()
    elif fmt == "litdata":
        import litdata

        np.save(out / "x.npy", features)
        np.save(out / "y.npy", labels)
        os.sync()
        start = time.perf_counter()  # optimize reads its inputs from files, as its users' functions do
        step = 10_000
        inputs = [(str(out), k, min(k + step, len(labels))) for k in range(0, len(labels), step)]
        litdata.optimize(
            fn=litdata_samples,
            inputs=inputs,
            output_dir=str(out / "optimized"),
            chunk_bytes="64MB",
            num_workers=workers,
            verbose=False,
        )
    elif fmt == "lance":
        import lance
        import pyarrow as pa

        flat = pa.array(features.reshape(-1))
        table = pa.table(
            {
                "features": pa.FixedSizeListArray.from_arrays(flat, int(np.prod(features.shape[1:]))),
                "label": pa.array(labels.astype(np.int64)),
            }
        )
        lance.write_dataset(table, str(out / "data.lance"))
    else:
        import zarr

        group = zarr.open_group(str(out), mode="w", zarr_format=3)
        c = max(1, 2**20 // int(np.prod(features.shape[1:])))
        arr = group.create_array(
            "features",
            shape=features.shape,
            dtype="uint8",
            chunks=(c, *features.shape[1:]),
            shards=(c * 64, *features.shape[1:]),
        )
        arr[:] = features
        group.create_array("labels", shape=labels.shape, dtype="int64", chunks=(len(labels),))[:] = labels
    os.sync()  # durable, as prepare's figure is (it fsyncs every file)
    return (features.nbytes + labels.nbytes) / 1e6 / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="the scratch folder (default: a fresh temporary folder)")
    parser.add_argument("--size", default="2e4")
    parser.add_argument("--write-size", default="2e5")
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--formats", default=",".join(FORMATS), help="a comma list of " + ", ".join(FORMATS))
    parser.add_argument("--write-only", action="store_true", help="skip the reading half")
    parser.add_argument("--write-rounds", type=int, default=3, help="prepare and the library's writer, alternated")
    parser.add_argument("--cache", default="warm", help="warm, cold (root: drop_caches before each epoch) or both")
    args = parser.parse_args()
    chosen = tuple(f for f in args.formats.split(",") if f)
    if unknown := set(chosen) - set(FORMATS):
        parser.error(f"--formats: {sorted(unknown)} are not among {FORMATS}")
    if not set(args.cache.split(",")) <= {"warm", "cold"}:
        parser.error("--cache: warm, cold or warm,cold")
    if "cold" in args.cache and os.geteuid() != 0:
        parser.error("--cache cold drops the page cache: run as root")
    args.data_dir = work_dir(args.data_dir, "bench-formats-")
    try:
        for entry in list(args.data_dir.iterdir()):
            if entry.name != MARKER:
                remove_tree(entry)
        if not args.write_only:
            read(args, chosen)
        write(args, chosen)
    finally:
        remove_work(args.data_dir)


def read(args: argparse.Namespace, chosen: tuple[str, ...]) -> None:
    dataset, rss = prepare(args.data_dir, args.size, ",".join(("npy", *chosen)))
    from iobench.data.manifest import Manifest
    from iobench.storage.local.page_cache import evict

    manifest = Manifest.load(dataset)
    print(
        f"{manifest.spec.n_samples:,} samples of {manifest.spec.shape} uint8; prepare's peak RSS {rss:,.0f} MiB "
        f"(npy and the formats measured); batch {BATCH}"
    )
    # A run's first epoch, like the snippet's, pays the one-off opening (iobench's reader checks every file
    # first); the second column is an epoch after a warm-up one, as `iobench run` times by default. Cold,
    # every epoch is a first one: the files evicted, the reader opened afresh.
    print(
        "| format | cache | workers | iobench native, first epoch | after a warm-up epoch | library snippet | ratios |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for fmt in chosen:
        for cache in args.cache.split(","):
            for workers in (int(w) for w in args.workers.split(",")):
                first, later = [], []
                theirs: dict[str, list[float]] = {snippet: [] for snippet in SNIPPETS.get(fmt, (fmt,))}
                for snippet in theirs:
                    snippet_epoch(snippet, dataset / fmt, workers, 99)  # warm both: the same files
                for k in range(args.rounds):
                    if cache == "cold":
                        first.append(iobench_rate(dataset, fmt, workers, cache="cold"))
                        evict(manifest.formats[fmt].file_paths(dataset), "drop_caches")
                    else:
                        first.append(iobench_rate(dataset, fmt, workers))
                        later.append(iobench_rate(dataset, fmt, workers, warmup=1))
                    for snippet, rates in theirs.items():
                        if cache == "cold" and len(theirs) > 1:
                            evict(manifest.formats[fmt].file_paths(dataset), "drop_caches")
                        n, seconds = snippet_epoch(snippet, dataset / fmt, workers, k)
                        rates.append(n / seconds)
                a = statistics.median(first)
                c = statistics.median(later) if later else None
                for snippet, rates in theirs.items():
                    b = statistics.median(rates)
                    warmed, ratios = (f"{c:,.0f}", f"{a / b:.2f}x, {c / b:.2f}x") if c else ("", f"{a / b:.2f}x")
                    name = fmt if snippet == fmt else f"{fmt} (against {snippet})"
                    print(f"| {name} | {cache} | {workers} | {a:,.0f} | {warmed} | {b:,.0f} | {ratios} |", flush=True)
    print()


def write(args: argparse.Namespace, chosen: tuple[str, ...]) -> None:
    if args.write_rounds < 1:
        return
    from iobench.data.dataset import generate
    from iobench.data.manifest import Manifest
    from iobench.spec import Content, DatasetSpec

    print(f"writing {args.write_size} samples, each format alone; MB/s of samples (features and labels) on both sides")
    print(f"{args.write_rounds} rounds, median (min-max)")
    print("| format | prepare MB/s | peak RSS of prepare | library writer alone + sync MB/s | ratio | bytes on disk |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    # The samples in memory for the library's writer, and as an npy pair for prepare's --from: generating
    # them beside the writer (prepare's default) would share the 2 cores with the writing measured.
    source = args.data_dir / "source"
    source.mkdir(exist_ok=True)
    spec = DatasetSpec(n_samples=int(float(args.write_size)), shape=(3, 32, 32), dtype="uint8", content=Content.PHOTO)
    chunks = list(generate(spec))
    big_f, big_l = np.concatenate([c.features for c in chunks]), np.concatenate([c.labels for c in chunks])
    del chunks
    np.save(source / "x.npy", big_f)
    np.save(source / "y.npy", big_l)
    for fmt in chosen:
        ours, alone, one, peaks = [], [], [], []
        entry = None
        # interleaved rounds, medians: this disk's speed moves by 30% between minutes
        for _ in range(args.write_rounds):
            folder = args.data_dir / f"write-{fmt}"
            remove_tree(folder)
            folder.mkdir()
            # the format alone: a second format's writer would share the 2 cores with the one measured
            written, fmt_rss = prepare(folder, args.write_size, fmt, source)
            manifest = Manifest.load(written)
            entry = manifest.formats[fmt]
            peaks.append(fmt_rss)
            # write_mb_per_s counts bytes on disk (PNG, padding); the library's side counts samples
            ours.append(manifest.spec.payload_bytes / 1e6 / entry.write_seconds)
            remove_tree(folder)
            with tempfile.TemporaryDirectory(dir=args.data_dir) as tmp:
                alone.append(library_write(fmt, big_f, big_l, Path(tmp)))
            if fmt == "litdata":  # optimize runs a process per core by default; prepare writes with one
                with tempfile.TemporaryDirectory(dir=args.data_dir) as tmp:
                    one.append(library_write(fmt, big_f, big_l, Path(tmp), workers=1))
        a, b = statistics.median(ours), statistics.median(alone)
        print(
            f"| {fmt} | {a:,.1f} ({min(ours):,.1f}-{max(ours):,.1f}) | {max(peaks):,.0f} MiB | "
            f"{b:,.1f} ({min(alone):,.1f}-{max(alone):,.1f}) | {a / b:.2f}x | {entry.bytes / 1e6:,.1f} MB |",
            flush=True,
        )
        if one:
            c = statistics.median(one)
            spread = f"{min(one):,.1f}-{max(one):,.1f}"
            print(f"| litdata, optimize with 1 worker | | | {c:,.1f} ({spread}) | {a / c:.2f}x | |")
    remove_tree(source)
    print(f"max RSS of this script {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")


if __name__ == "__main__":
    main()
