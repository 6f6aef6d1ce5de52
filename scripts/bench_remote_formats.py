"""Every format from object storage on loopback, and iobench's remote pipelines against each library's own snippet.

Fairness: for LitData (`StreamingDataset("s3://...")` in a `StreamingDataLoader`), WebDataset (presigned shard
URLs in `wds.WebDataset`, opened by its `gopen`: curl), Arrow (`load_dataset("arrow", data_files=[s3 URLs],
streaming=True)`, `.shuffle(buffer_size=1000)`, torch format), zarr (`zarr.open_group` on its `ObjectStore`, a batch as
one orthogonal selection; `zarr-fsspec`: `zarr.open_group("s3://...", storage_options=...)`, its FsspecStore over
s3fs, against `--format-option zarr.remote_store=fsspec`), npy through s3fs (`npy-s3fs`: an s3fs file object seeked
to each sample in `__getitem__`, against `npy.remote_reader=s3fs`), HDF5 (`h5py.File` on an s3fs file object, a row per
`__getitem__`) and files (s3torchconnector's `S3MapDataset`, an object per `__getitem__`), one cold epoch of
`iobench run --loader native` (HDF5, files and npy-s3fs: `dataloader --fetch item`, a sample per `__getitem__` as
their snippets read) against the library's snippet written here without
iobench, on the same endpoint and profile, interleaved rounds, each measurement in a process of its own (obstore is
not fork-safe). Cold on both sides: the snippet opens a fresh dataset (LitData: an empty cache folder) and iobench a
fresh reader. The requests are the server's count over the timed epoch. Goal: iobench >=
0.95x the snippet's samples/s, and no more requests. Setup is outside the clock on both sides: the snippet makes its
dataset and loader before it (LitData fetching its index, datasets resolving its files), as `iobench run` prepares
each epoch's pipeline and opens its reader before the epoch's clock; the requests counted are the epoch's. On both
sides what exists before the clock is frozen out of Python's garbage collector (`gc.freeze`), so that neither
charges the pipeline for a full collection of its own heap (iobench's is larger: LitData's 0.67-0.79x came from one).

Formats: `iobench run --remote PROFILE --cache cold` of each (format, loader) given, one record each: its path
(the library's own, or FUSE), samples/s, requests and bytes the server sent per epoch, time to the first batch.
Prints tables; nothing is asserted.

Usage: python scripts/bench_remote_formats.py DATASET_DIR [--profile s3-like] [--rounds 3] [--workers 0]
       [--fairness litdata,webdataset,zarr,zarr-fsspec] [--same-heap] [--no-gc] [--formats-table FMT:LOADER,...]
       [--fuse-chunk 256K]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BATCH = 256
SNIPPET, IOBENCH = "snippet", "iobench"
SAME_HEAP = "snippet-in-iobench-heap"  # the snippet after importing what iobench's run imports (--same-heap)
IOBENCH_RUN = ("torch", "iobench.loaders.base", "iobench.plan.config", "iobench.plan.resolve", "iobench.run.runner")
LIBRARIES = {
    "litdata": ("litdata", "litdata.streaming.downloader", "torch.utils.data"),
    "webdataset": ("webdataset", "boto3", "botocore.config", "torch.utils.data"),
    "zarr": ("zarr", "zarr.storage", "obstore.store", "torch.utils.data"),
    "zarr-fsspec": ("zarr", "zarr.storage", "s3fs", "torch.utils.data"),
    "npy-s3fs": ("s3fs", "torch.utils.data"),
    "hdf5": ("h5py", "s3fs", "torch.utils.data"),
    "files": ("s3torchconnector", "torch.utils.data"),
    "arrow": ("datasets", "s3fs", "torch.utils.data"),
}
NATIVE = ("litdata", "webdataset", "zarr", "arrow")  # the formats with a pipeline of their own; hdf5, files by index
READ_OPTIONS = {
    "zarr-fsspec": ("zarr", (("remote_store", "fsspec"),)),
    "npy-s3fs": ("npy", (("remote_reader", "s3fs"),)),
}  # a name here: (format, its read options)


def one(kind: str, name: str, dataset: Path, endpoint: dict, log: str, profile_name: str, workers: int) -> dict:
    """One cold epoch in this process: samples, seconds, the server's requests and bytes over it."""
    fmt, options = READ_OPTIONS.get(name, (name, ()))
    from iobench.storage.remote import RemoteTarget
    from iobench.storage.remote.endpoint import Endpoint
    from iobench.storage.remote.profiles import profile
    from iobench.storage.remote.requests_log import read, size

    target = RemoteTarget(Endpoint(**endpoint), profile(profile_name), Path(log), (), dataset.parent)
    if kind == IOBENCH:
        import torch

        from iobench.plan.config import RunConfig
        from iobench.plan.resolve import RunTarget, resolve
        from iobench.run.runner import run
        from iobench.settings import LoaderSettings

        loader = "native" if fmt in NATIVE else "dataloader"
        fetch = "batch" if loader == "native" else "item"  # the by-index snippets read a sample per __getitem__
        settings = LoaderSettings(batch_size=BATCH, num_workers=workers, fetch=fetch)
        config = RunConfig(
            format=fmt,
            loader=loader,
            settings=settings,
            runs=1,
            epochs=1,
            warmup=0,
            cache="cold",
            format_options=options,
        )
        record = run(resolve(config, RunTarget(dataset, torch.device("cpu"), target)))
        return {
            "samples_per_s": record.epochs.samples_per_s,
            "requests": record.system.requests[0],
            "bytes": record.system.device_read_bytes[0],
        }
    for module in LIBRARIES[name] + (IOBENCH_RUN if kind == SAME_HEAP else ()):  # before the clock, as iobench's are
        importlib.import_module(module)
    # the dataset and its loader made before the clock and its requests, as iobench's run prepares its pipeline
    # (and opens its reader) before each epoch's clock: like for like, the epoch alone on both sides
    batches = snippet(name, dataset, target, workers)
    time.sleep(0.2)  # nginx writes a request's line after its response: the setup's lines are in before the count
    before = size(Path(log))
    gc.collect()
    gc.freeze()  # what exists before the clock out of the collector, as iobench's runner does for its timed epoch
    started = time.perf_counter()
    n = sum(batches)
    seconds = time.perf_counter() - started
    gc.unfreeze()
    time.sleep(0.2)  # nginx writes a request's line after its response
    seen = read(Path(log), before, size(Path(log)))
    return {"samples_per_s": n / seconds, "requests": seen.total, "bytes": seen.bytes_sent}


def lazily(loader, size):
    """The loader's batch sizes, its iterator started on the first one (a generator expression would start it, and
    its workers, when it is made: before the clock)."""
    for batch in loader:
        yield size(batch)


def snippet(fmt: str, dataset: Path, target, workers: int):
    """The library's documented remote loop; yields batch sizes."""
    import numpy as np
    import torch
    from torch.utils.data import DataLoader

    e, bucket = target.endpoint, dataset.name
    if fmt == "litdata":
        import litdata
        import litdata.streaming.downloader as downloader

        downloader._OBSTORE_AVAILABLE = False  # its boto3 path: LitData's obstore store cannot use http:// endpoints
        options = {
            "endpoint_url": e.url,
            "aws_access_key_id": e.access_key,
            "aws_secret_access_key": e.secret_key,
            "region_name": e.region,
        }
        ds = litdata.StreamingDataset(
            f"s3://{bucket}/litdata", cache_dir=tempfile.mkdtemp(), shuffle=True, seed=0, storage_options=options
        )
        return lazily(litdata.StreamingDataLoader(ds, batch_size=BATCH, num_workers=workers), lambda b: len(b["label"]))
    if fmt == "webdataset":
        import boto3
        import webdataset as wds
        from botocore.config import Config

        s3 = boto3.client(
            "s3",
            endpoint_url=e.url,
            aws_access_key_id=e.access_key,
            region_name=e.region,
            aws_secret_access_key=e.secret_key,
            config=Config(signature_version="s3v4"),
        )
        shards = sorted(p.name for p in (dataset / "webdataset").glob("*.tar"))  # the names its user knows
        urls = [
            s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": f"webdataset/{k}"}, ExpiresIn=3600)
            for k in shards
        ]
        ds = (
            wds.WebDataset(urls, shardshuffle=100, detshuffle=True, seed=0, nodesplitter=None, empty_check=False)
            .shuffle(1000)
            .decode()
            .to_tuple("npy", "cls")
            .batched(BATCH)
        )
        return lazily(DataLoader(ds, batch_size=None, num_workers=workers), lambda b: len(b[1]))
    if fmt == "arrow":
        import datasets

        options = {
            "key": e.access_key,
            "secret": e.secret_key,
            "client_kwargs": {"endpoint_url": e.url, "region_name": e.region},
        }
        files = sorted(f"s3://{bucket}/arrow/{p.name}" for p in (dataset / "arrow").glob("*.arrow"))
        ds = datasets.load_dataset(
            "arrow",
            data_files=files,
            split="train",
            streaming=True,
            storage_options=options,
            cache_dir=tempfile.mkdtemp(),
        )
        ds = ds.shuffle(seed=0, buffer_size=1000).with_format("torch")
        return lazily(DataLoader(ds, batch_size=BATCH, num_workers=workers), lambda b: len(b["label"]))
    if fmt == "files":
        import io

        from s3torchconnector import S3ClientConfig, S3MapDataset

        os.environ.update(AWS_ACCESS_KEY_ID=e.access_key, AWS_SECRET_ACCESS_KEY=e.secret_key)  # as its users export
        folder = dataset / "files"
        names = sorted(p.relative_to(folder).as_posix() for p in (folder / "samples").rglob("*.npy"))
        config = S3ClientConfig(force_path_style=True)
        uris = [f"s3://{bucket}/files/{name}" for name in ["labels.npy", *names]]

        def load(r):
            return np.load(io.BytesIO(r.read()), allow_pickle=False)

        ds = S3MapDataset.from_objects(uris, region=e.region, endpoint=e.url, s3client_config=config, transform=load)
        labels = ds[0]

        class Rows(torch.utils.data.Dataset):
            def __len__(self) -> int:
                return len(names)

            def __getitem__(self, i):
                return ds[i + 1], labels[i]

        loader = DataLoader(
            Rows(), batch_size=BATCH, shuffle=True, num_workers=workers, generator=torch.Generator().manual_seed(0)
        )
        return lazily(loader, lambda b: len(b[1]))
    if fmt == "npy-s3fs":
        import s3fs

        fs = s3fs.S3FileSystem(
            key=e.access_key, secret=e.secret_key, endpoint_url=e.url, client_kwargs={"region_name": e.region}
        )

        class Samples(torch.utils.data.Dataset):
            def __init__(self) -> None:
                self.f = None

            def __len__(self) -> int:
                return len(labels)

            def __getitem__(self, i):
                if self.f is None:  # opened in the process that reads
                    self.f = fs.open(f"{bucket}/npy/features.npy", "rb")
                    np.lib.format.read_magic(self.f)
                    self.shape, _, self.dtype = np.lib.format.read_array_header_2_0(self.f)
                    self.offset, self.row = self.f.tell(), int(np.prod(self.shape[1:])) * self.dtype.itemsize
                self.f.seek(self.offset + i * self.row)
                return np.frombuffer(self.f.read(self.row), self.dtype).reshape(self.shape[1:]), labels[i]

        with fs.open(f"{bucket}/npy/labels.npy", "rb") as f:
            labels = np.load(f, allow_pickle=False)
        loader = DataLoader(
            Samples(), batch_size=BATCH, shuffle=True, num_workers=workers, generator=torch.Generator().manual_seed(0)
        )
        return lazily(loader, lambda b: len(b[1]))
    if fmt == "hdf5":
        import h5py
        import s3fs

        fs = s3fs.S3FileSystem(
            key=e.access_key, secret=e.secret_key, endpoint_url=e.url, client_kwargs={"region_name": e.region}
        )

        class Rows(torch.utils.data.Dataset):
            def __init__(self) -> None:
                self.f = None

            def __len__(self) -> int:
                return n

            def __getitem__(self, i):
                if self.f is None:  # opened in the process that reads, its datasets looked up once
                    self.f = h5py.File(fs.open(f"{bucket}/hdf5/data.h5", "rb"), "r")
                    self.x, self.y = self.f["features"], self.f["labels"]
                return self.x[i], self.y[i]

        n = json.loads((dataset / "manifest.json").read_text())["spec"]["n_samples"]
        loader = DataLoader(
            Rows(), batch_size=BATCH, shuffle=True, num_workers=workers, generator=torch.Generator().manual_seed(0)
        )
        return lazily(loader, lambda b: len(b[1]))
    import zarr

    def opened():
        if fmt == "zarr-fsspec":  # zarr's documented way to a URL: an FsspecStore over s3fs
            options = {
                "key": e.access_key,
                "secret": e.secret_key,
                "client_kwargs": {"endpoint_url": e.url, "region_name": e.region},
            }
            return zarr.open_group(f"s3://{bucket}/zarr", mode="r", zarr_format=3, storage_options=options)
        from obstore.store import S3Store
        from zarr.storage import ObjectStore

        store = S3Store(
            bucket,
            endpoint=e.url,
            access_key_id=e.access_key,
            secret_access_key=e.secret_key,
            region=e.region,
            client_options={"allow_http": True},
        )
        return zarr.open_group(ObjectStore(store, read_only=True), path="zarr", mode="r", zarr_format=3)

    class Batches(torch.utils.data.Dataset):
        def __init__(self) -> None:
            self.arrays = None

        def __len__(self) -> int:
            return n

        def __getitems__(self, keys):
            if self.arrays is None:  # opened in the process that reads
                group = opened()
                self.arrays = group["features"], group["labels"][:]
            features, labels = self.arrays
            idx = np.sort(np.asarray(keys))
            return torch.from_numpy(features.oindex[idx]), torch.from_numpy(labels[idx])

    n = json.loads((dataset / "manifest.json").read_text())["spec"]["n_samples"]
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(
        Batches(), batch_size=BATCH, shuffle=True, num_workers=workers, collate_fn=lambda b: b, generator=g
    )
    return lazily(loader, lambda b: len(b[1]))


def child(kind: str, fmt: str, args: argparse.Namespace, endpoint, log: Path) -> dict:
    argv = [
        sys.executable,
        __file__,
        str(args.dataset),
        "--one",
        kind,
        fmt,
        "--profile",
        args.profile,
        "--workers",
        str(args.workers),
        "--endpoint",
        json.dumps(endpoint.__dict__),
        "--log",
        str(log),
        *(["--no-gc"] if args.no_gc else []),
    ]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"{kind} {fmt} failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def fairness(args: argparse.Namespace) -> None:
    from iobench.storage.remote.emulator import Emulator
    from iobench.storage.remote.profiles import profile

    emulator = Emulator(args.dataset.parent, profile(args.profile))
    print(
        f"\nfairness: one cold epoch, {args.profile}, batch {BATCH}, {args.workers} workers, medians of "
        f"{args.rounds} interleaved rounds{', garbage collector off' if args.no_gc else ''}"
    )
    print(
        f"{'format':<11} {'snippet/s':>10} {'iobench/s':>10} {'ratio':>6}  {'requests (snippet | iobench)':<34} "
        f"{'MB moved':>17}",
        flush=True,
    )
    with emulator as endpoint:
        for fmt in args.fairness.split(","):
            kinds = (SNIPPET, IOBENCH, SAME_HEAP) if args.same_heap else (SNIPPET, IOBENCH)
            got: dict[str, list[dict]] = {k: [] for k in kinds}
            for r in range(args.rounds):
                for kind in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:  # each kind first in turn
                    got[kind].append(child(kind, fmt, args, endpoint, emulator.access_log))
            s, i = (statistics.median(x["samples_per_s"] for x in got[k]) for k in (SNIPPET, IOBENCH))
            bs, bi = (statistics.median(x["bytes"] for x in got[k]) / 1e6 for k in (SNIPPET, IOBENCH))
            requests = f"{[x['requests'] for x in got[SNIPPET]]} | {[x['requests'] for x in got[IOBENCH]]}"
            print(f"{fmt:<11} {s:>10,.0f} {i:>10,.0f} {i / s:>5.3f}x  {requests:<34} {bs:>8.1f}|{bi:<8.1f}", flush=True)
            _rounds(SNIPPET, got)
            if args.same_heap:
                _rounds(SAME_HEAP, got)


def _rounds(reference: str, got: dict[str, list[dict]]) -> None:
    """Each round's pair, measured one after the other: the spread the medians hide."""
    rounds = list(zip(got[reference], got[IOBENCH], strict=True))
    pairs = [f"{a['samples_per_s']:,.0f}/{b['samples_per_s']:,.0f}" for a, b in rounds]
    ratios = sorted(b["samples_per_s"] / a["samples_per_s"] for a, b in rounds)
    print(
        f"{'':<11} rounds ({reference}/iobench): {', '.join(pairs)}; ratios {ratios[0]:.3f}-{ratios[-1]:.3f}, "
        f"median {statistics.median(ratios):.3f}",
        flush=True,
    )


def formats_table(args: argparse.Namespace) -> None:
    results = Path(tempfile.mkdtemp()) / "formats.jsonl"
    for pair in args.formats_table.split(","):
        fmt, loader = pair.split(":")
        argv = [
            sys.executable,
            "-m",
            "iobench",
            "run",
            "--remote",
            args.profile,
            "--format",
            fmt,
            "--loader",
            loader,
            "--num-workers",
            str(args.workers),
            "--cache",
            "cold",
            "--runs",
            "1",
            "--epochs",
            "1",
            "--batch-size",
            str(BATCH),
            "--fuse-chunk",
            args.fuse_chunk,
            "--device",
            "cpu",
            "-q",
            "--data-dir",
            str(args.dataset.parent),
            "--dataset",
            args.dataset.name,
            "--results",
            str(results),
        ]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            print(f"{fmt}:{loader}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
    records = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    print(
        f"\nformats: one cold epoch each, {args.profile}, batch {BATCH}, {args.workers} workers, "
        f"FUSE chunk {args.fuse_chunk}; records in {results}"
    )
    print(
        f"{'format':<11} {'loader':<11} {'path':<7} {'samples/s':>10} {'GETs':>7} {'HEADs':>6} {'MB moved':>9} "
        f"{'x data':>7} {'first batch s':>13}"
    )
    for x in records:
        by = x.get("requests_by_method") or {}
        moved = (x.get("device_read_bytes") or [0])[0]
        payload = json.loads((args.dataset / "manifest.json").read_text())["formats"][x["format"]]["bytes"]
        print(
            f"{x['format']:<11} {x['loader']:<11} {x['storage']:<7} {x['samples_per_s']:>10,.0f} "
            f"{by.get('GET', 0):>7,} {by.get('HEAD', 0):>6,} {moved / 1e6:>9.1f} {moved / payload:>7.2f} "
            f"{x['first_batch_seconds'][0]:>13.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--profile", default="s3-like")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--fairness", default="litdata,webdataset,zarr")
    parser.add_argument(
        "--same-heap",
        action="store_true",
        help="also the snippet in a process that has imported "
        "what iobench's run imports: iobench against it is the harness's own cost per epoch",
    )
    parser.add_argument(
        "--no-gc",
        action="store_true",
        help="Python's garbage collector off in every measurement: "
        "what the collector's full passes cost each side (a diagnosis, not how users run)",
    )
    parser.add_argument("--formats-table", default="")
    parser.add_argument("--fuse-chunk", default="256K")
    parser.add_argument("--one", nargs=2)
    parser.add_argument("--endpoint")
    parser.add_argument("--log")
    args = parser.parse_args()
    args.dataset = args.dataset.resolve()
    if args.one:
        kind, fmt = args.one
        if args.no_gc:
            gc.disable()
        print(json.dumps(one(kind, fmt, args.dataset, json.loads(args.endpoint), args.log, args.profile, args.workers)))
        return
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    if args.fairness:
        fairness(args)
    if args.formats_table:
        formats_table(args)


if __name__ == "__main__":
    main()
