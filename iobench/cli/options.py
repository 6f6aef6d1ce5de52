"""The command line's options, declared once: `run` and `sweep` (and the data commands) share them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from iobench.plan.run_options import RUN_OPTIONS
from iobench.plan.selection import DEFAULT_FORMAT_NAMES, FORMAT_NAMES, loader_help
from iobench.system.ranks import MAX_RANKS
from iobench.units import DEFAULT_SIZE  # the registry only: no torch

# Help texts are rich markup: a literal "[" is written "\\[" ("[ray]" and "[default: 0]" vanished).
# typer needs Optional (not X | None) to introspect on Python 3.9-style annotations.
OptInt = Optional[int]  # noqa: UP045
OptStr = Optional[str]  # noqa: UP045
OptFloat = Optional[float]  # noqa: UP045

DataDir = Annotated[
    Path, typer.Option("--data-dir", help="Root folder of prepared datasets (or one dataset's folder).")
]
DatasetName = Annotated[
    OptStr,
    typer.Option(
        "--dataset",
        help="Dataset folder name under --data-dir (default: derived from the spec; for run, the only one).",
    ),
]
DatasetFactory = Annotated[
    OptStr,
    typer.Option(
        "--dataset-factory",
        help="module:function returning your own torch Dataset (or DataLoader): time your pipeline instead of a "
        "prepared format, with the DataLoader settings given here (imported from the working directory first).",
    ),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]
Formats = Annotated[
    OptStr,
    typer.Option(
        "--format",
        "--formats",
        help=f"Comma list of {', '.join(FORMAT_NAMES)}, or all (default: the standard comparison).",
        show_default=False,
    ),
]
Loaders = Annotated[OptStr, typer.Option(help=loader_help())]
Device = Annotated[
    str,
    typer.Option(
        help="auto (CUDA when available), cpu, cuda or cuda:N. checkpoint: where restores put the state, timed until "
        "the device is done (straight there where the library can, else copied into a state already there)."
    ),
]
Shuffle = Annotated[bool, typer.Option("--shuffle/--no-shuffle", help="Random order, as training does.")]
BlockShuffle = Annotated[int, typer.Option(help="Shuffle runs of N contiguous samples instead (0: off).")]
Epochs = Annotated[int, typer.Option(help="Timed epochs per run.")]
Warmup = Annotated[int, typer.Option(help="Untimed epochs before the timed ones, per run.")]
Runs = Annotated[int, typer.Option(help="Repetitions (each with a fresh loader).")]
UntilDecided = Annotated[
    OptFloat,
    typer.Option(
        "--until-decided",
        metavar="MINUTES",
        help="Several configurations: after --runs rounds, more rounds in turn until the answer is decided (the "
        "leader ahead of the runner-up in every round's pair, surviving the contention) or MINUTES have passed.",
    ),
]
MaxBatches = Annotated[OptInt, typer.Option(help="Stop each epoch after N batches (the record says partial).")]
MaxSeconds = Annotated[OptFloat, typer.Option(help="Stop each epoch after S seconds (the record says partial).")]
Step = Annotated[
    str,
    typer.Option(
        help="Per batch on the device: none, sleep:MS, sleep:MS:SD (a time drawn per batch from a normal "
        "distribution, seeded), mlp (one small training step), or module:function, your own training step, called "
        "as function(features, labels) with the batch on the device (imported from the working directory first)."
    ),
]
MinAu = Annotated[
    OptFloat,
    typer.Option(help="Flag configurations whose accelerator utilisation is below this (0-1; MLPerf uses 0.9)."),
]
WhatIf = Annotated[
    OptStr,
    typer.Option(
        help="Comma list of step times in ms: predict samples/s and utilisation for each from this run, then "
        "measure it with --step sleep:MS and show the prediction's error."
    ),
]
Seed = Annotated[int, typer.Option(help="Seed of the shuffles and of the mlp step.")]
Profile = Annotated[
    bool, typer.Option("--profile", help="cProfile one extra epoch (and torch.profiler on CUDA) beside the results.")
]
Remote = Annotated[
    OptStr,
    typer.Option(
        help="Object storage instead of the folder, on loopback behind a shaper with this network profile: s3-like "
        "(30 ms first byte, 90 MB/s per connection), express-like (5 ms), none; started around the command and "
        "stopped on every exit. run, sweep, tune, feed: the formats are read from a real S3 server (rclone serve "
        "s3) over --data-dir (feed: one server its ranks share); checkpoint: saved and restored there (moto's "
        "server, in memory).",
        metavar="PROFILE",
    ),
]
ServeProfile = Annotated[
    str, typer.Option("--profile", help="The network profile: s3-like, express-like or none.", metavar="PROFILE")
]
EndpointUrl = Annotated[
    OptStr,
    typer.Option(
        help="This S3-compatible store instead (keys from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY): "
        "http(s)://host:port/bucket. run, sweep, tune: each format a prefix in that bucket, as `iobench upload` "
        "puts them (with no /bucket, a bucket of the dataset's name), the local dataset's manifest saying what to "
        "read (feed: the same, for every rank); checkpoint: saved and restored under a prefix of the bucket, removed "
        "after.",
        metavar="URL",
    ),
]
UploadEndpoint = Annotated[
    str,
    typer.Option(
        "--endpoint-url",
        help="The S3-compatible store to put the formats in: http(s)://host:port/bucket (with no /bucket, a "
        "bucket of the dataset's name).",
        metavar="URL",
    ),
]
UploadFormats = Annotated[OptStr, typer.Option(help="Comma list of the formats to put (default: every prepared one).")]
FuseReadAhead = Annotated[
    OptStr,
    typer.Option(
        help="With --remote or --endpoint-url, for a format read through FUSE: what the mount reads ahead of each "
        "open file (0, or K, M or G; rclone's --buffer-size). [default: 0 for a reader of samples at random, "
        "where a seek throws it away; 16M, rclone's own, in order]",
        metavar="SIZE",
    ),
]
FuseChunk = Annotated[
    OptStr,
    typer.Option(
        help="With --remote or --endpoint-url, for a format read through FUSE (rclone mount: TFRecord, LMDB, Arrow, "
        "...): the first ranged GET of an object asks this much (K, M or G), later ones double it; a seek starts "
        "again. [default: 128M, rclone's own]",
        metavar="SIZE",
    ),
]
LatencyMs = Annotated[OptFloat, typer.Option(help="With --remote: the first-byte latency of every request, in ms.")]

ConnectionMbPerS = Annotated[
    OptFloat, typer.Option(help="With --remote: the bandwidth of one connection, in MB/s (10^6 bytes).")
]
# serve's own: the profile is always given there
ServeLatencyMs = Annotated[
    OptFloat,
    typer.Option("--latency-ms", help="The first-byte latency of every request, in ms (overrides the profile's)."),
]
ServeConnectionMbPerS = Annotated[
    OptFloat,
    typer.Option(
        "--connection-mb-per-s", help="The bandwidth of one connection, in MB/s (10^6 bytes; overrides the profile's)."
    ),
]
Results = Annotated[Path, typer.Option(help="JSONL file the records are appended to.")]
Wide = Annotated[
    bool,
    typer.Option(
        help="Every column of the results (settings, epoch times, % of the ceiling) and the per-batch split "
        "(wait, copy, step, first batch, reads, CPU); by default a table that fits 100 columns."
    ),
]
Nproc = Annotated[
    OptInt,
    typer.Option(
        min=1,
        max=MAX_RANKS,
        help="Launch N ranks on this machine, as torchrun would (its variables; their store a file only you can open, "
        "every rank ended with iobench). run: each reads its shard (or run under torchrun yourself: `torchrun "
        "--nproc-per-node N -m iobench run ...`); checkpoint: the DCP entries save and restore together, each rank "
        "holding the state, the slowest rank's seconds counted (the other libraries run in one process).",
    ),
]
RankTimeout = Annotated[
    float,
    typer.Option(
        help="Under --nproc or torchrun: how long a rank waits for the others at a barrier (seconds) before it ends "
        "the run in one line (a rank that hung, in its step or its reads). Rank 0 may prepare the dataset or measure "
        "the machine's limits while the others wait: keep it above that.",
        min=1.0,
    ),
]
Preset = Annotated[
    OptStr,
    typer.Option(
        help="settings (DataLoader settings on one format), formats (every format and loader, cold "
        "and warm) or scaling (dataset sizes 1e5, 1e6, 1e7)."
    ),
]


def List(name: str, text: str) -> object:  # noqa: N802 - used as a type in signatures
    """A sweep option that takes a comma list of values."""
    return Annotated[OptStr, typer.Option(name, help=text)]


# the place every measuring command shares (iobench.plan.place.PLACE), its options in this order
PLACE_OPTIONS: dict[str, tuple[object, object]] = {}  # name -> (annotation, default), filled below


PLACE_OPTIONS.update(
    data_dir=(DataDir, Path("data")),
    dataset=(DatasetName, None),
    device=(Device, "auto"),
    remote=(Remote, None),
    endpoint_url=(EndpointUrl, None),
    latency_ms=(LatencyMs, None),
    connection_mb_per_s=(ConnectionMbPerS, None),
    fuse_chunk=(FuseChunk, None),
    fuse_read_ahead=(FuseReadAhead, None),
)

# checkpoint's --cache: a list, as sweep's (a checkpoint restores warm or cold)
CacheList = List("--cache", RUN_OPTIONS["cache"].sweep_list)
# the limits command's --read-limit, as run's
ReadLimit = Annotated[OptFloat, typer.Option("--read-limit", help=RUN_OPTIONS["read_limit_mb_per_s"].help)]

DEFAULT_FORMATS_TEXT = ",".join(DEFAULT_FORMAT_NAMES)

RunSize = Annotated[
    OptStr,
    typer.Option(
        "--size",
        help="Measure the dataset of this many samples in --data-dir (1e5, 2e6...), preparing it first when "
        "it is missing; 1e5 (about 52 MB per format) is a first look in seconds.",
    ),
]

# ---- prepare ---------------------------------------------------------------------------------------

Size = Annotated[
    OptStr, typer.Option(help=f"Number of samples: 1e7, 10000000, 10_000_000 or 10M \\[default: {DEFAULT_SIZE:.0e}].")
]
PrepareFormats = Annotated[
    str,
    typer.Option(
        "--formats",
        "--format",
        help=f"Comma list of {', '.join(FORMAT_NAMES)}, or all. files (one file per sample: a million files for "
        "the default size) is written when named or with all.",
    ),
]
Workload = Annotated[
    str,
    typer.Option(
        help="What the samples look like: tabular (128 float32, random), image (3x224x224 uint8 photo-like), "
        "small-image (3x32x32 uint8 photo-like), tokens (2048 int32 ids) or unet3d (DLIO's: --format files, a file "
        "a sample of 147 MB mean and stdev drawn as DLIO draws them, 2 MiB handed over). --shape/--dtype override it."
    ),
]
Shape = Annotated[OptStr, typer.Option(help="Per-sample shape, e.g. 128 or 3,32,32 (default: the workload's).")]
Dtype = Annotated[
    OptStr,
    typer.Option(help="Feature dtype: float32, float16, float64, uint8, int8..int64 (default: the workload's)."),
]
Classes = Annotated[OptInt, typer.Option(help="Number of label classes \\[default: 1000].")]
GenerationSeed = Annotated[OptInt, typer.Option("--seed", help="Seed of the deterministic generator \\[default: 0].")]
Source = Annotated[
    OptStr,
    typer.Option(
        "--from",
        help="Your own data instead of generated: X.npy, D.npz, F.h5:NAME, a TensorDict memmap folder, or an "
        "image folder in class sub-folders (resized and centre-cropped to --shape C,H,W).",
    ),
]
Labels = Annotated[
    OptStr, typer.Option(help="With --from X.npy or F.h5:NAME: the labels, Y.npy or F.h5:NAME (else zeros).")
]
FeaturesKey = Annotated[
    OptStr, typer.Option(help="With --from D.npz or a TensorDict: the features' key \\[default: features].")
]
LabelsKey = Annotated[
    OptStr, typer.Option(help="With --from D.npz or a TensorDict: the labels' key \\[default: labels].")
]
Force = Annotated[bool, typer.Option("--force", help="Overwrite formats (or a different dataset) already there.")]
# The old spellings of four formats' write options, still taken (hidden from --help): `--format-option` is the one way
# (`hdf5.chunk_rows`, `hdf5.compression`, `hdf5.compression_level`, `lmdb.samples_per_record`, `files.encoding`).
_OLD = "Old spelling of --format-option {}=VALUE (still taken)."
Hdf5ChunkRows = Annotated[int, typer.Option(hidden=True, help=_OLD.format("hdf5.chunk_rows"))]
Hdf5Compression = Annotated[str, typer.Option(hidden=True, help=_OLD.format("hdf5.compression"))]
Hdf5GzipLevel = Annotated[int, typer.Option(hidden=True, help=_OLD.format("hdf5.compression_level"))]
LmdbSamplesPerRecord = Annotated[int, typer.Option(hidden=True, help=_OLD.format("lmdb.samples_per_record"))]
FormatOption = Annotated[
    Optional[list[str]],  # noqa: UP045 - typer reads the annotation at runtime
    typer.Option(
        help="A format's option, FORMAT.NAME=VALUE, repeatable: e.g. hdf5.chunk_rows=1024 (0: about 64 KiB), "
        "hdf5.compression=none|lzf|gzip, hdf5.compression_level=4, lmdb.samples_per_record=1, "
        "files.encoding=auto|png|npy|source|photos, webdataset.shard_samples=5000, zarr.shard_chunks=16, "
        "litdata.chunk_bytes=16MB (a wrong NAME lists the format's options; docs/formats.md says each).",
    ),
]
ReadOption = Annotated[
    Optional[list[str]],  # noqa: UP045 - typer reads the annotation at runtime
    typer.Option(
        "--format-option",
        help="How a format's own pipeline reads (--loader native), FORMAT.NAME=VALUE, repeatable: "
        "webdataset.shuffle_buffer=5000, webdataset.shard_shuffle=0, tfrecord.shuffle_queue=64, "
        "litdata.batch_decode=0, litdata.item_shuffle_window=full, zarr.remote_store=fsspec; "
        "with any loader, how npy is read from object storage: npy.remote_reader=s3fs, npy.s3fs_block=1M.",
    ),
]
FilesEncoding = Annotated[str, typer.Option(hidden=True, help=_OLD.format("files.encoding"))]
