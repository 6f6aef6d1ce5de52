"""`prepare`, `verify`, `info`: the data side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.console import err, out, reporter
from iobench.formats import FORMATS
from iobench.units import DEFAULT_SIZE


@app.command("prepare")
def prepare_cmd(
    size: Annotated[
        str | None,
        typer.Option(help=f"Number of samples: 1e7, 10000000, 10_000_000 or 10M [default: {DEFAULT_SIZE:.0e}]."),
    ] = None,
    formats: Annotated[
        str,
        typer.Option(
            help=f"Comma list of {', '.join(FORMATS)}, or all. files (one file per sample: a million files for "
            "the default size) is written when named or with all."
        ),
    ] = ",".join(n for n in FORMATS if n != "files"),
    data_dir: o.DataDir = Path("data"),
    dataset: o.DatasetName = None,
    workload: Annotated[
        str,
        typer.Option(
            help="What the samples look like: tabular (128 float32, random), image (3x224x224 uint8 photo-like), "
            "small-image (3x32x32 uint8 photo-like) or tokens (2048 int32 ids). --shape/--dtype override it."
        ),
    ] = "tabular",
    shape: Annotated[
        str | None, typer.Option(help="Per-sample shape, e.g. 128 or 3,32,32 (default: the workload's).")
    ] = None,
    dtype: Annotated[
        str | None,
        typer.Option(help="Feature dtype: float32, float16, float64, uint8, int8..int64 (default: the workload's)."),
    ] = None,
    classes: Annotated[int | None, typer.Option(help="Number of label classes [default: 1000].")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the deterministic generator [default: 0].")] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Your own data instead of generated: X.npy, D.npz, F.h5:NAME, a TensorDict memmap folder, or an "
            "image folder in class sub-folders (resized and centre-cropped to --shape C,H,W).",
        ),
    ] = None,
    labels: Annotated[
        str | None, typer.Option(help="With --from X.npy or F.h5:NAME: the labels, Y.npy or F.h5:NAME (else zeros).")
    ] = None,
    features_key: Annotated[
        str | None, typer.Option(help="With --from D.npz or a TensorDict: the features' key [default: features].")
    ] = None,
    labels_key: Annotated[
        str | None, typer.Option(help="With --from D.npz or a TensorDict: the labels' key [default: labels].")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite formats (or a different dataset) already there.")
    ] = False,
    hdf5_chunk_rows: Annotated[int, typer.Option(help="HDF5 rows per chunk; 0 = about 64 KiB of features.")] = 0,
    hdf5_compression: Annotated[str, typer.Option(help="HDF5 compression: none, lzf or gzip.")] = "none",
    hdf5_gzip_level: Annotated[int, typer.Option(help="gzip level 0..9 when --hdf5-compression gzip.")] = 4,
    lmdb_samples_per_record: Annotated[int, typer.Option(help="Samples in one LMDB record.")] = 1,
    quiet: o.Quiet = False,
) -> None:
    """Generate the shared dataset, or read yours (--from), and write it in each format (atomically)."""
    from iobench.data.prepare import PrepareRequest, parse_formats, plan, prepare
    from iobench.data.spec_options import SpecOptions, build_spec

    spec = build_spec(
        SpecOptions(
            size=size,
            workload=workload,
            shape=shape,
            dtype=dtype,
            classes=classes,
            seed=seed,
            source=source,
            labels=labels,
            features_key=features_key,
            labels_key=labels_key,
        )
    )
    names = parse_formats(formats)
    options = {name: FORMATS[name].options() for name in names}
    if "hdf5" in options:
        options["hdf5"] = FORMATS["hdf5"].options(
            chunk_rows=hdf5_chunk_rows, compression=hdf5_compression.lower(), compression_level=hdf5_gzip_level
        )
    if "lmdb" in options:
        options["lmdb"] = FORMATS["lmdb"].options(samples_per_record=lmdb_samples_per_record)
    request = PrepareRequest(spec, data_dir, names, options, dataset, force)
    checked = plan(request)
    if not quiet:
        err.print(
            f"preparing {request.dataset_dir}: {spec.n_samples:,} samples of {spec.shape} {spec.dtype}, "
            f"{spec.payload_bytes / 1e6:,.1f} MB per format, about {checked.estimated_bytes / 1e9:,.2f} GB in all",
            soft_wrap=True,
            highlight=False,
        )
    with reporter(quiet) as progress:
        manifest = prepare(checked, progress)
    for name in names:
        e = manifest.formats[name]
        out.print(f"{name:<7} {e.bytes / 1e6:>10,.1f} MB  {e.write_seconds:8.2f} s  {e.write_mb_per_s:8,.1f} MB/s")
    out.print(f"manifest: {request.dataset_dir / 'manifest.json'}", soft_wrap=True, highlight=False)


@app.command("verify")
def verify_cmd(data_dir: o.DataDir = Path("data"), dataset: o.DatasetName = None, quiet: o.Quiet = False) -> None:
    """Read every format back completely and check it against the manifest's checksums."""
    from iobench.data.manifest import find_datasets
    from iobench.data.verify import verify_dataset

    failed = False
    for dataset_dir in find_datasets(data_dir, dataset):
        with reporter(quiet) as progress:
            checks, warnings = verify_dataset(dataset_dir, progress)
        out.print(f"{dataset_dir}:", soft_wrap=True, highlight=False)
        for c in checks:
            verdict = f"OK ({c.seconds:.1f} s)" if c.ok else "FAILED: " + "; ".join(c.problems)
            out.print(f"  {c.name:<7} {verdict}", highlight=False)
            failed |= not c.ok
        if not checks:
            out.print("  no format prepared yet")
        for w in warnings:
            out.print(f"  warning: {w}", highlight=False)
    if failed:
        raise typer.Exit(1)


@app.command("info")
def info_cmd(data_dir: o.DataDir = Path("data"), dataset: o.DatasetName = None) -> None:
    """Print the manifest of each dataset as a table."""
    from rich.table import Table

    from iobench.data.manifest import Manifest, find_datasets

    for dataset_dir in find_datasets(data_dir, dataset):
        m = Manifest.load(dataset_dir)
        s = m.spec
        table = Table(
            title=f"{dataset_dir}\n{s.n_samples:,} samples, shape {s.shape} {s.dtype}, {s.n_classes} classes, "
            f"seed {s.seed}, {s.payload_bytes / 1e6:,.1f} MB payload"
        )
        for col in ("format", "files", "MB", "write s", "write MB/s", "options"):
            table.add_column(col, justify="left" if col in ("format", "options") else "right")
        for e in m.formats.values():
            opts = " ".join(f"{k}={v}" for k, v in e.options.items()) or "-"
            table.add_row(
                e.name,
                str(len(e.files)),
                f"{e.bytes / 1e6:,.1f}",
                f"{e.write_seconds:.2f}",
                f"{e.write_mb_per_s:,.1f}",
                opts,
            )
        out.print(table)
        if m.content:
            out.print(f"content sha256: features {m.content['features'][:16]}…, labels {m.content['labels'][:16]}…")
