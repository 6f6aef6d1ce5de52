"""`prepare`, `verify`, `info`: the data side."""

from __future__ import annotations

from pathlib import Path

import typer

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.console import ConsoleEvents, err, out
from iobench.errors import IobenchError


@app.command("prepare")
def prepare_cmd(
    size: o.Size = None,
    formats: o.PrepareFormats = o.DEFAULT_FORMATS_TEXT,
    data_dir: o.DataDir = Path("data"),
    dataset: o.DatasetName = None,
    workload: o.Workload = "tabular",
    shape: o.Shape = None,
    dtype: o.Dtype = None,
    classes: o.Classes = None,
    seed: o.GenerationSeed = None,
    source: o.Source = None,
    labels: o.Labels = None,
    features_key: o.FeaturesKey = None,
    labels_key: o.LabelsKey = None,
    force: o.Force = False,
    hdf5_chunk_rows: o.Hdf5ChunkRows = 0,
    hdf5_compression: o.Hdf5Compression = "none",
    hdf5_gzip_level: o.Hdf5GzipLevel = 4,
    lmdb_samples_per_record: o.LmdbSamplesPerRecord = 1,
    files_encoding: o.FilesEncoding = "auto",
    format_option: o.FormatOption = None,
    quiet: o.Quiet = False,
) -> None:
    """Generate the shared dataset, or read yours (--from), and write it in each format (atomically)."""
    from iobench.data.spec_options import SpecOptions
    from iobench.sessions.prepare import PrepareRequest, prepare_session

    spec = SpecOptions(
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
    named = {
        "hdf5": dict(
            chunk_rows=hdf5_chunk_rows, compression=hdf5_compression.lower(), compression_level=hdf5_gzip_level
        ),
        "lmdb": dict(samples_per_record=lmdb_samples_per_record),
        "files": dict(encoding=files_encoding.lower()),
    }
    request = PrepareRequest(
        spec=spec,
        formats=formats,
        data_dir=data_dir,
        dataset=dataset,
        force=force,
        format_options=named,
        typed_options=tuple(format_option or []),
    )
    outcome = prepare_session(request, ConsoleEvents(quiet))
    for name in outcome.formats:
        e = outcome.manifest.formats[name]
        out.print(f"{name:<10} {e.bytes / 1e6:>10,.1f} MB  {e.write_seconds:8.2f} s  {e.write_mb_per_s:8,.1f} MB/s")
    out.print(f"manifest: {outcome.dataset_dir / 'manifest.json'}", soft_wrap=True, highlight=False)


@app.command("verify")
def verify_cmd(data_dir: o.DataDir = Path("data"), dataset: o.DatasetName = None, quiet: o.Quiet = False) -> None:
    """Read every format back completely and check it against the manifest's checksums."""
    from iobench.data.manifest import find_datasets
    from iobench.data.verify import verify_dataset

    failed = False
    found = find_datasets(data_dir, dataset)
    for dataset_dir in found:
        try:
            with ConsoleEvents(quiet).progress() as progress:
                checks, warnings = verify_dataset(dataset_dir, progress)
        except IobenchError as exc:  # an unreadable manifest: this dataset fails, the others are verified
            if len(found) == 1:
                raise
            out.print(f"{dataset_dir}:\n  FAILED: {exc}", soft_wrap=True, highlight=False)
            failed = True
            continue
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
        try:
            m = Manifest.load(dataset_dir)
        except IobenchError as exc:
            if dataset is not None:
                raise
            err.print(f"iobench: warning: skipped {exc}", soft_wrap=True, highlight=False)  # the others are shown
            continue
        s = m.spec
        table = Table(
            title=f"{dataset_dir}\n{s.n_samples:,} samples, shape {s.shape} {s.dtype}, {s.n_classes} classes, "
            f"seed {s.seed}, {s.payload_bytes / 1e6:,.1f} MB payload"
        )
        for col in ("format", "files", "MB", "write s", "write MB/s", "options"):
            table.add_column(col, justify="left" if col in ("format", "options") else "right")
        for e in m.formats.values():
            opts = " ".join(f"{k}={v}" for k, v in e.options.items() if v != "") or "-"  # an unset option says nothing
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
