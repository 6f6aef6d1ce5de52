"""The `iobench` command line: parses, calls, prints. No logic a test would want to call."""

from __future__ import annotations

import signal
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from formats import FORMATS
from iobench import __version__
from iobench.dataset import DatasetSpec, parse_shape, parse_size
from iobench.errors import IobenchError
from iobench.manifest import Manifest, find_datasets
from iobench.prepare import PrepareRequest, parse_formats, plan, prepare
from iobench.progress import NullReporter, RichReporter
from iobench.verify import verify_dataset

app = typer.Typer(
    name="iobench",
    help="How fast does training data travel from disk to the device in PyTorch? "
    "Prepare one dataset in npy, HDF5, LMDB and TensorDict memmap, verify it, then time loading it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

DataDir = Annotated[
    Path, typer.Option("--data-dir", help="Root folder of prepared datasets (or one dataset's folder).")
]
DatasetName = Annotated[
    Optional[str],  # noqa: UP045 - typer needs Optional on 3.9-style introspection
    typer.Option("--dataset", help="Dataset folder name under --data-dir [default: derived from the spec]."),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]


def _reporter(quiet: bool) -> RichReporter | NullReporter:
    return NullReporter() if quiet else RichReporter(err)


@app.command("prepare")
def prepare_cmd(
    size: Annotated[str, typer.Option(help="Number of samples: 1e7, 10000000, 10_000_000 or 10M.")] = "1e6",
    formats: Annotated[str, typer.Option(help=f"Comma list of {', '.join(FORMATS)}, or all.")] = "all",
    data_dir: DataDir = Path("data"),
    dataset: DatasetName = None,
    shape: Annotated[str, typer.Option(help="Per-sample shape, e.g. 128 or 3,32,32.")] = "128",
    dtype: Annotated[
        str, typer.Option(help="Feature dtype: float32, float16, float64, uint8, int8..int64.")
    ] = "float32",
    classes: Annotated[int, typer.Option(help="Number of label classes.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the deterministic generator.")] = 0,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite formats (or a different dataset) already there.")
    ] = False,
    hdf5_chunk_rows: Annotated[int, typer.Option(help="HDF5 rows per chunk; 0 = about 64 KiB of features.")] = 0,
    hdf5_compression: Annotated[str, typer.Option(help="HDF5 compression: none, lzf or gzip.")] = "none",
    hdf5_gzip_level: Annotated[int, typer.Option(help="gzip level 0..9 when --hdf5-compression gzip.")] = 4,
    lmdb_samples_per_record: Annotated[int, typer.Option(help="Samples in one LMDB record.")] = 1,
    quiet: Quiet = False,
) -> None:
    """Generate the shared dataset and write it in each format (atomically: temp dir, fsync, rename)."""
    spec = DatasetSpec(parse_size(size), parse_shape(shape), dtype.lower(), classes, seed)
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
    reporter = _reporter(quiet)
    with reporter if isinstance(reporter, RichReporter) else nullcontext():
        manifest = prepare(checked, reporter)
    for name in names:
        e = manifest.formats[name]
        out.print(f"{name:<7} {e.bytes / 1e6:>10,.1f} MB  {e.write_seconds:8.2f} s  {e.write_mb_per_s:8,.1f} MB/s")
    out.print(f"manifest: {request.dataset_dir / 'manifest.json'}", soft_wrap=True, highlight=False)


@app.command("verify")
def verify_cmd(data_dir: DataDir = Path("data"), dataset: DatasetName = None, quiet: Quiet = False) -> None:
    """Read every format back completely and check it against the manifest's checksums."""
    failed = False
    for dataset_dir in find_datasets(data_dir, dataset):
        reporter = _reporter(quiet)
        with reporter if isinstance(reporter, RichReporter) else nullcontext():
            checks, warnings = verify_dataset(dataset_dir, reporter)
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
def info_cmd(data_dir: DataDir = Path("data"), dataset: DatasetName = None) -> None:
    """Print the manifest of each dataset as a table."""
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


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        out.print(f"iobench {__version__}")
        raise typer.Exit(0)


# typer raises click's exceptions, or since typer 0.20 those of its own vendored copy of click.
_CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


_signals_received: list[int] = []


def _terminate(signum: int, _frame: object) -> None:
    # typer swallows KeyboardInterrupt into a bare exit code; remember why we stop to say so.
    _signals_received.append(signum)
    raise KeyboardInterrupt(f"signal {signum}")


def _interrupted() -> None:
    err.print("iobench: interrupted; nothing half-written was kept", highlight=False)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every expected failure becomes one line on stderr and exit code 2."""
    signal.signal(signal.SIGTERM, _terminate)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _terminate)
    command = typer.main.get_command(app)
    try:
        rc = command.main(args=argv, prog_name="iobench", standalone_mode=False)
    except IobenchError as exc:
        err.print(f"iobench: error: {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except _CLICK_ERROR as exc:
        err.print(f"iobench: error: {exc.format_message()}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        _interrupted()
        sys.exit(130)
    if _signals_received:
        _interrupted()
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)
